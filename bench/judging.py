"""Do the judges keep up? Two policy agents and one reward agent, as a new user starts them.

A fresh server (SQLite in a temporary folder, 127.0.0.1 only), fresh tiny models from
``bigworld model init``, and three ``bigworld agent run`` processes with their defaults: two
rank-mode ``transformers`` policy agents and one ``transformers`` reward agent (rank mode,
``--votes 3``). Every ``--interval`` seconds it counts the ended episodes and those with a step
short of its m votes (``GET /v1/episodes?needs_votes=m``); at the end it checks the bar: at
least ``--bar`` of the ended episodes fully judged, and the backlog not growing over the second
half (its last count at most ``--slack`` above its count at half time). Writes the counts and
the verdict, with the headline of the README's results table, to ``--json`` (by default
``docs/benchmarks/judging.json``, beside the scenario's page) and the agents' logs to ``--out``::

    .venv/bin/python bench/judging.py --minutes 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from live import start_server  # noqa: E402
from results import provenance  # noqa: E402

from agents.client import BigWorldClient  # noqa: E402

HEADLINE_ORDER = 4  # this scenario's row in the README's results table (bench/results.py)
BIGWORLD = [sys.executable, "-c", "import sys; from agents.cli import main; sys.exit(main())"]


def count(admin: BigWorldClient, votes: int) -> tuple[int, int]:
    """(ended episodes, ended episodes with a step short of ``votes`` judgments)."""
    ended = sum(1 for e in admin.episodes(page_size=500) if e["status"] != "open")
    short = sum(1 for _ in admin.episodes(needs_votes=votes, page_size=500))
    return ended, short


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between counts")
    parser.add_argument("--votes", type=int, default=3, help="m: judgments per step")
    parser.add_argument("--policies", type=int, default=2, help="policy agents")
    parser.add_argument("--bar", type=float, default=0.6, help="share fully judged at the end")
    parser.add_argument("--slack", type=int, default=2, help="backlog growth allowed")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bw-judging",
        help="folder for the agents' logs",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=ROOT / "docs" / "benchmarks" / "judging.json",
        help="the counts and the verdict (default: docs/benchmarks/judging.json)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bigworld-judging-") as tmp:
        work = Path(tmp)
        for kind in ("policy", "reward"):
            subprocess.run(
                [*BIGWORLD, "model", "init", "--kind", kind, "--out", str(work / kind)],
                check=True,
                capture_output=True,
            )
        server = start_server(work / "data", env={"BIGWORLD_VOTES_PER_STEP": str(args.votes)})
        agents: list[subprocess.Popen[bytes]] = []
        try:
            admin = BigWorldClient(server.url, server.admin_token)
            roles = ["policy"] * args.policies + ["reward"]
            for i, role in enumerate(roles):
                token = admin.create_agent(f"{role}-{i}", role).token
                command = [*BIGWORLD, "agent", "run", "--role", role, "--backend", "transformers"]
                command += ["--model", str(work / role), "--server", server.url]
                command += ["--seed", str(i)] + (["--votes", str(args.votes)] * (role == "reward"))
                log = (args.out / f"{role}-{i}.log").open("wb")
                agents.append(
                    subprocess.Popen(
                        command,
                        env={"BIGWORLD_TOKEN": token, "PATH": "/usr/bin:/bin"},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            started, samples = time.monotonic(), []
            print(f"{'s':>5} {'ended':>6} {'judged':>7} {'short':>6} {'share':>6}", flush=True)
            while (elapsed := time.monotonic() - started) < args.minutes * 60:
                time.sleep(min(args.interval, max(0.0, args.minutes * 60 - elapsed)))
                ended, short = count(admin, args.votes)
                share = (ended - short) / ended if ended else 0.0
                samples.append({"t": round(time.monotonic() - started, 1), "ended": ended,
                                "short": short, "share": round(share, 3)})  # fmt: skip
                print(f"{samples[-1]['t']:>5.0f} {ended:>6} {ended - short:>7} {short:>6} "
                      f"{share:>6.0%}", flush=True)  # fmt: skip
        finally:
            for agent in agents:
                agent.terminate()
            for agent in agents:
                agent.wait(timeout=60)
            server.stop()
    last, middle = samples[-1], samples[len(samples) // 2 - 1]
    kept_up = last["share"] >= args.bar
    steady = last["short"] <= middle["short"] + args.slack
    verdict = (
        f"{last['ended'] - last['short']} of {last['ended']} ended episodes fully judged "
        f"({last['share']:.0%}, bar {args.bar:.0%}): {'PASS' if kept_up else 'FAIL'}; backlog "
        f"{middle['short']} at {middle['t']:.0f} s, {last['short']} at {last['t']:.0f} s: "
        f"{'not growing' if steady else 'GROWING'}"
    )
    print(verdict)
    head = {
        "order": HEADLINE_ORDER,
        "label": f"Do the judges keep up? {args.policies} policy agents, 1 judge, "
        f"{args.minutes:g} minutes",
        "figure": verdict,
        "page": "docs/benchmarks/judging.md",
    }
    report = {**provenance(), "headline": head, "samples": samples, "verdict": verdict}
    args.json.write_text(json.dumps(report, indent=1))
    return 0 if kept_up and steady else 1


if __name__ == "__main__":
    raise SystemExit(main())
