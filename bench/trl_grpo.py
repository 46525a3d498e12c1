"""TRL's GRPOTrainer beside ``bigworld train`` on the go_to rung: same start, seed and wall time.

Three arms, each on its own server started from one prepared world (``bench/learning.py``'s
cold start: a fresh world, one policy agent per family, an untrained tiny policy):

- ``frozen``: the starting weights play, nothing learns (``bench/learning.py``'s arm);
- ``outcome_only``: ``bigworld train``'s trainer learns from outcomes (``bench/learning.py``'s arm);
- ``trl``: ``trl.GRPOTrainer`` trains the same weights through OpenEnv sessions at ``/openenv``
  (``agents/trl_rollout.py``): the policy chooses in rank mode as the other arms' agents do,
  TRL trains its own objective on the chosen answer's tokens, and every optimiser step's
  weights are registered as a policy version that the world's steps then carry.

The optimiser settings TRL shares with our trainer are set alike (learning rate, weight decay,
gradient clip, clip ε, KL β, a constant rate: ``agents.trl_rollout.grpo_config``); the rest is
TRL's default (loss ``dapo``, rewards scaled per group). Reports success with 95% Wilson
intervals overall, per half and over the first and last ``--window`` episodes, and the
ladder's bar. Writes ``trl.json`` (with the headline of the README's results table) and
``trl.png`` into ``--out``, by default ``docs/benchmarks`` beside the comparison's page::

    .venv/bin/python bench/trl_grpo.py --minutes 10 --parallel    # about 12 minutes
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from learning import (  # noqa: E402
    RUNGS,
    Start,
    _end_with_parent,
    arguments,
    prepare_cold,
    run_arm,
    serve,
)
from learning_figures import cell, headline, inspect_steps, plot, summarise, verdict  # noqa: E402
from results import provenance  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: E402
from transformers.trainer_callback import PrinterCallback  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from agents.client import BigWorldClient  # noqa: E402
from agents.train.config import TrainConfig  # noqa: E402
from agents.trl_rollout import (  # noqa: E402
    PublishVersions,
    WorldRollouts,
    grpo_config,
    outcome_reward,
)

ARMS = ("frozen", "outcome_only", "trl")
HEADLINE_ORDER = 3  # this comparison's row in the README's results table (bench/results.py)


class Deadline(TrainerCallback):
    """Stops TRL's run at the arm's wall time, with a progress line every 30 s."""

    def __init__(self, rollouts: WorldRollouts, seconds: float) -> None:
        self.rollouts, self.seconds, self.shown = rollouts, seconds, 0.0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        elapsed = time.monotonic() - self.rollouts.started
        if elapsed >= self.shown + 30:
            self.shown = elapsed
            rows = self.rollouts.played
            wins = sum(r.success for r in rows)
            print(
                f"trl: {elapsed:5.0f}s {len(rows)} episodes, {wins} succeeded "
                f"({wins / max(1, len(rows)):.0%}), {state.global_step} GRPO steps",
                flush=True,
            )
        control.should_training_stop = elapsed >= self.seconds


def run_trl_arm(args: argparse.Namespace, work: Path, start: Start) -> dict[str, Any]:
    """The ``trl`` arm: TRL's GRPOTrainer plays the arm's players through OpenEnv."""
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)  # as the other arms' agents and trainer
    world = work / "trl"
    shutil.copytree(start.world, world)
    server = serve(world, args, BIGWORLD_FORGE_ENABLED="false", BIGWORLD_RECORD_DISTANCE="true")
    if multiprocessing.parent_process() is not None:
        _end_with_parent(server)  # no arm outlives a killed bench
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        trainer_token = admin.create_agent("trl-trainer", "trainer").token
        tokens = [token for _, token in sorted(start.players.items())]
        rollouts = WorldRollouts(server.url, tokens, args.families[0], args.temperature, args.seed)
        publish = PublishVersions(
            BigWorldClient(server.url, trainer_token),
            rollouts,
            start.policy,
            world / "train",
            config={"batch": args.trl_batch, "group": args.trl_group, "lr": args.lr},
        )
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(start.policy),
            processing_class=AutoTokenizer.from_pretrained(start.policy, padding_side="left"),
            reward_funcs=outcome_reward,
            args=grpo_config(
                world / "trl-out",
                group=args.trl_group,
                batch=args.trl_batch,
                learning_rate=args.lr,
                seed=args.seed,
            ),
            train_dataset=Dataset.from_dict({"prompt": [args.families[0]] * args.trl_batch}),
            rollout_func=rollouts,
            callbacks=[publish, Deadline(rollouts, args.minutes * 60)],
        )
        trainer.remove_callback(PrinterCallback)  # its log lines; the Deadline prints progress
        rollouts.started = time.monotonic()
        try:
            trainer.train()
        finally:
            rollouts.close()
        # no bigworld trainer puts credit, no judge votes
        inspected = inspect_steps(admin, start.policy, None, judged=False)
    finally:
        server.stop()
    rows = [
        {
            "t": p.t,
            "success": p.success,
            "family": p.family,
            "task": p.task,
            "steps": p.steps,
            "version": p.version,
        }
        for p in rollouts.played
        if p.t <= args.minutes * 60
    ]
    updates = [
        {k: v for k, v in h.items() if isinstance(v, int | float)}
        for h in trainer.state.log_history
        if "loss" in h
    ]
    return {
        "arm": "trl",
        "mode": "trl.GRPOTrainer",
        "forge": False,
        "episodes": rows,
        "updates": updates,
        "versions": sorted({r["version"] for r in rows}),
        "flow": {
            "grpo_steps": trainer.state.global_step,
            "published": len(publish.versions),
            # the share of GRPO groups whose outcomes were all alike: no advantage, no gradient
            "groups_without_signal": round(
                sum(u["frac_reward_zero_std"] for u in updates) / max(1, len(updates)), 3
            ),
        },
        **inspected,
    }


def run_one(arm: str, args: argparse.Namespace, work: Path, start: Start) -> dict[str, Any]:
    return run_trl_arm(args, work, start) if arm == "trl" else run_arm(arm, args, work, start)


def run_arms(args: argparse.Namespace, work: Path, start: Start) -> dict[str, dict[str, Any]]:
    if not args.parallel:
        return {arm: run_one(arm, args, work, start) for arm in args.arms}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(args.arms), mp_context=spawn) as pool:
        running = {arm: pool.submit(run_one, arm, args, work, start) for arm in args.arms}
        return {arm: future.result() for arm, future in running.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="wall time per arm")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seed", type=int, default=7, help="world seed (every arm) and model seed")
    parser.add_argument("--parallel", action="store_true", help="run the arms at the same time")
    parser.add_argument("--window", type=int, default=300, help="episodes in the first/last window")
    parser.add_argument("--margin", type=float, default=0.25, help="the bar: last >= frozen + this")
    parser.add_argument("--gain", type=float, default=2.0, help="the bar: last >= this x first")
    parser.add_argument("--lr", type=float, default=TrainConfig.lr, help="both trainers' lr")
    parser.add_argument("--temperature", type=float, default=1.0, help="rank-mode sampling")
    parser.add_argument("--trl-group", type=int, default=4, help="GRPO's num_generations")
    parser.add_argument("--trl-batch", type=int, default=8, help="decisions per GRPO step")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks",
        help="folder for trl.json and trl.png (default: docs/benchmarks)",
    )
    # bench/learning.py's settings (its defaults: the go_to rung, a cold start) with this
    # bench's own, so that its arms run unchanged
    args = argparse.Namespace(**{**vars(arguments().parse_args([])), **vars(parser.parse_args())})
    args.families = RUNGS[args.rung][0]
    hf_logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bigworld-trl-grpo-") as tmp:
        work = Path(tmp)
        start = prepare_cold(args, work)
        print(f"start: {json.dumps(start.figures)}")
        results = run_arms(args, work, start)
        summaries = [summarise(results[arm], args) for arm in args.arms]
    verdicts = verdict(summaries, args.window, args.margin, args.gain)
    report = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"TRL's GRPOTrainer beside bigworld train: go_to, {args.minutes:g} minutes",
            "figure": headline(summaries, args.window, verdicts),
            "page": "docs/benchmarks/trl.md",
        },
        "args": {k: str(v) for k, v in vars(args).items()},
        "arms": summaries,
    }
    (args.out / "trl.json").write_text(json.dumps({**report, "verdict": verdicts}, indent=2))
    plot(summaries, args.out / "trl.png", "bigworld go_to: TRL's GRPO beside bigworld train")
    print(
        f"{'arm':<14}{'episodes':>9}{'success':>19}{'1st half':>19}{'2nd half':>19}"
        f"{f'first {args.window}':>19}{f'last {args.window}':>19}{'updates':>9}"
    )
    for s in summaries:
        keys = ("success", "first_half", "second_half", "first_window", "last_window")
        print(
            f"{s['arm']:<14}{s['episodes']:>9}" + "".join(f"{cell(s[k]):>19}" for k in keys), end=""
        )
        print(f"{s['updates']:>9}")
    for s in summaries:
        print(
            f"{s['arm']}: versions played {len(s['versions_played'])}, flow {json.dumps(s['flow'])}"
        )
    for line in verdicts:
        print(line)
    print(f"wrote {args.out / 'trl.json'} and {args.out / 'trl.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
