"""How much narrower is a paired comparison from forks than an unpaired one of the same size?

Starts a server on a fresh SQLite world, lets ``--agents`` policy agents play
``--warmup-episodes`` episodes each (the scripted explorer, so that their avatars stand in
different places: they walk go_to tasks), then runs ``bigworld eval`` with ``--pairs`` pairs of forks of the world at
its current tick: policy A against policy B, each pair as one agent on one task from one start.
It reports both policies' success, the paired difference's 95% interval (Newcombe's paired
score interval) and the unpaired interval of the same episode counts, and writes
``paired-eval.json`` into ``--out`` (default ``docs/benchmarks``, beside its page)::

    .venv/bin/python bench/paired_eval.py --pairs 40        # some 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from live import live_server  # noqa: E402
from results import provenance  # noqa: E402

from agents.cli import main as bigworld  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.policy_agent import ExplorerPolicy, PolicyRunner, RunnerConfig  # noqa: E402

HEADLINE_ORDER = 14


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=12, help="agents whose avatars take turns")
    parser.add_argument("--warmup-episodes", type=int, default=3, help="each agent's, before")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--family", help="the tasks' family (default: any drawn family)")
    parser.add_argument("--policies", nargs=2, default=["explorer", "random"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp) / "data") as server:
        admin = BigWorldClient(server.url, server.admin_token)
        agents = [admin.create_agent(f"eval-agent-{i}", "policy") for i in range(args.agents)]
        for i, agent in enumerate(agents):
            with BigWorldClient(server.url, agent.token) as player:
                config = RunnerConfig(family="go_to", max_episodes=args.warmup_episodes)
                PolicyRunner(player, ExplorerPolicy(args.seed + i), config).run()
        tick = admin.world()["tick"]
        report = Path(tmp) / "eval.json"
        tokens = [flag for a in agents for flag in ("--agent-token", a.token)]
        started = time.perf_counter()
        code = bigworld(
            [
                "eval",
                "--policies",
                *args.policies,
                "--forks",
                str(2 * args.pairs),
                *(["--family", args.family] if args.family else []),
                "--seed",
                str(args.seed),
                "--server",
                server.url,
                "--token",
                server.admin_token,
                *tokens,
                "--json",
                str(report),
            ]
        )
        seconds = time.perf_counter() - started
        if code != 0:
            return code
        result = json.loads(report.read_text())

    paired, unpaired = result["paired"], result["unpaired"]
    body = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"Paired evaluation in forks ({' vs '.join(args.policies)}, "
            f"{args.family or 'any family'}, {args.pairs} pairs)",
            "figure": f"95% interval of the difference {paired['width']:.3f} wide, against "
            f"{unpaired['width']:.3f} unpaired: {100 * result['narrower']:.0f}% narrower",
            "page": "docs/benchmarks/paired-eval.md",
        },
        "figures": {
            "agents": args.agents,
            "warmup_episodes": args.warmup_episodes,
            "at_tick": tick,
            "eval_s": round(seconds, 1),
            "seconds_per_pair": round(seconds / args.pairs, 2),
            **{k: result[k] for k in ("pairs", "A", "B", "paired", "unpaired", "narrower")},
            "discordant": result["discordant"],
            "distinct_tasks": len({p["task"] for p in result["played"]}),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "paired-eval.json").write_text(json.dumps(body, indent=1) + "\n")
    print(json.dumps(body["figures"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
