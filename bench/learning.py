"""Does a tiny policy get better in this world, on a laptop-class CPU? (issue 5; not a test)

Five arms, each on its own server started from one prepared world (same seed, same task
pool), each given the same wall time:

- ``frozen``: the starting policy plays, nothing learns;
- ``outcome_only``: the trainer learns from outcomes alone;
- ``integrated``: outcomes + the reward model's step votes, reward model frozen;
- ``integrated_rm``: the same, and the reward model learns from consistency rewards;
- ``integrated_rm_forge``: the same with the forge on (task adaptation and world dynamics);
  in the other arms the forge is off, but episode begins still re-draw the pool's tasks.

All arms start from the same models, warm-started once before the clock runs (not counted):
demonstrating agents (one per family: the scripted explorer, which decides from the prompt
alone, or with ``--demonstrator oracle`` the oracle, whose choices rest on what the prompt does
not show) and a random agent play on a
preparation server, a heuristic judge (the oracle's plan distance, with some votes flipped)
judges their steps, the tiny policy is cloned from the demonstrator's choices in its successful
episodes (rank loss; per-step accuracy measured on the held-out tenth of those episodes), the
tiny reward model from the judge's answers.
Each arm's policy agents are the preparation's players (same avatars, same pool tasks).

Reports success rate over wall time per arm, per task family in the first and second half of
each arm's episodes, and the trainer's figures; writes ``learning.json`` and ``learning.png``::

    .venv/bin/python bench/learning.py --minutes 5          # about 40 minutes in all
    .venv/bin/python bench/learning.py --minutes 1 --arms frozen outcome_only   # smoke
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from live import LiveServer, start_server  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from agents.backends import Sampling, TransformersModel  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.models.tiny import ModelSpec, init_model  # noqa: E402
from agents.policy_agent import (  # noqa: E402
    ExpertPolicy,
    ExplorerPolicy,
    ModelPolicy,
    PolicyRunner,
    RandomPolicy,
    RunnerConfig,
)
from agents.reward_agent import HeuristicJudge, ModelJudge, RewardConfig, RewardRunner  # noqa: E402
from agents.train.checkpoints import save_checkpoint  # noqa: E402
from agents.train.config import TrainConfig  # noqa: E402
from agents.train.data import episode_from_detail  # noqa: E402
from agents.train.learner import (  # noqa: E402
    Choice,
    Learner,
    Sample,
    rank_accuracy,
    rank_cross_entropy,
)
from agents.train.trainer import Trainer  # noqa: E402

ARMS = {  # arm → (trainer mode, None: no trainer; the forge on)
    "frozen": (None, False),
    "outcome_only": ("outcome_only", False),
    "integrated": ("integrated_frozen_rm", False),
    "integrated_rm": ("integrated_rm", False),
    "integrated_rm_forge": ("integrated_rm", True),
}
VOTES = 3  # m: the judges' votes per step (the trainer's default)
COLOURS = {
    "frozen": (120, 120, 120),
    "outcome_only": (31, 119, 180),
    "integrated": (255, 127, 14),
    "integrated_rm": (44, 160, 44),
    "integrated_rm_forge": (214, 39, 40),
}


@dataclass
class Played:
    """Episodes as the bench's policy runners saw them end (wall time since the arm began)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **row: Any) -> None:
        with self.lock:
            self.rows.append(row)


class TimedRunner(PolicyRunner):
    """A policy runner that notes when each episode ended, how, and under which version."""

    def __init__(self, *args: Any, played: Played, started: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.played, self.started = played, started

    def play_episode(self) -> dict[str, Any] | None:
        version = self.policy.version
        record = super().play_episode()
        if record is not None:
            detail = self.client.episode(record["episode_id"])
            self.played.add(
                t=time.monotonic() - self.started,
                success=bool(record["success"]),
                family=detail["family"],
                task=detail["task"]["id"],
                steps=record["steps"],
                version=version,
            )
        return record


def serve(data: Path, args: argparse.Namespace, **extra: str) -> LiveServer:
    env = {
        "BIGWORLD_SEED": str(args.seed),
        "BIGWORLD_STEP_BUDGET": str(args.step_budget),
        "BIGWORLD_LOG_LEVEL": "warning",
        **extra,
    }
    return start_server(data, env=env)


def start_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


# --- the shared start: one prepared world, one pair of cloned models ------------------------


@dataclass(frozen=True)
class Start:
    """What every arm starts from: a copy of ``world`` (data folder, task pool included),
    the players' credentials in it, and the cloned models."""

    world: Path
    players: dict[str, str]  # family → the token of the policy agent that played it
    policy: Path
    reward: Path
    figures: dict[str, Any]


def prepare(args: argparse.Namespace, work: Path) -> Start:
    """A demonstrating agent per family and a random agent play on a preparation server
    (forge off: its pool re-draws tasks, nothing adapts); a heuristic judge (the oracle's plan
    distance, some votes flipped) judges their steps. The tiny policy is cloned from the
    demonstrator's choices (rank loss), the tiny reward model from the judge's answers. The world
    as it then stands is the start of every arm, so the arms' players meet the pool's tasks."""
    started = time.monotonic()
    world = work / "world"
    server = serve(world, args, BIGWORLD_RECORD_DISTANCE="true", BIGWORLD_FORGE_ENABLED="false")
    players = {}
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        demonstrator = (
            ExpertPolicy(BigWorldClient(server.url, admin.create_agent("prep-t", "trainer").token))
            if args.demonstrator == "oracle"
            else ExplorerPolicy(args.seed)
        )
        for family in args.families:
            players[family] = admin.create_agent(f"player-{family}", "policy").token
            _play(server.url, players[family], demonstrator, family, args.demos)
            # the judge's bad examples, from an avatar of its own: a random walk can leave a
            # neighbourhood where no task of the family can be made any more
            other = admin.create_agent(f"random-{family}", "policy").token
            _play(server.url, other, RandomPolicy(args.seed), family, args.demos // 4)
        judges = RewardRunner(
            BigWorldClient(server.url, admin.create_agent("prep-judge", "reward").token),
            HeuristicJudge(noise=args.judge_noise, seed=args.seed),
            RewardConfig(votes=VOTES),  # so the arms' judges find no past to judge
        )
        while judges.run_once():
            pass
        choices: dict[int, list[Choice]] = defaultdict(list)  # episode → demonstrated choices
        verdicts, tasks = [], defaultdict(set)
        for row in admin.episodes():
            episode = episode_from_detail(admin.episode(row["id"]), votes=VOTES, use_votes=True)
            if episode is None:
                continue
            tasks[episode.rollout.family].add(episode.rollout.task_id)
            for step in episode.steps:
                demonstrated = step.policy_version == demonstrator.version
                if demonstrated and episode.rollout.success and step.choice:
                    choices[episode.rollout.episode_id].append(step.choice)
                verdicts += [Sample(step.reward_prompt, _short(v)) for v in step.votes if v.score]
    finally:
        server.stop()
    episodes = sorted(choices)  # every tenth of the demonstrator's episodes is held out
    train = [c for i, e in enumerate(episodes) for c in choices[e] if i % 10 != 9]
    held_out = [c for i, e in enumerate(episodes) for c in choices[e] if i % 10 == 9]
    random.Random(args.seed).shuffle(train)
    spec = ModelSpec(
        hidden_size=args.hidden_size,
        intermediate_size=3 * args.hidden_size,
        num_hidden_layers=args.layers,
        seed=args.seed,
    )
    config = TrainConfig(batch_size=16, micro_batch_size=8, lr=args.bc_lr, device="cpu")
    figures: dict[str, Any] = {
        "families": args.families,
        "pool_tasks": {f: len(t) for f, t in sorted(tasks.items())},
        "demonstrated_steps": len(train),
        "heldout_steps": len(held_out),
        "verdicts": len(verdicts),
    }
    out = {}
    for kind in ("policy", "reward"):
        init_model(kind, work / f"init-{kind}", spec)
        learner = Learner(
            work / f"init-{kind}", config, lr=args.bc_lr, version="init", resolve=lambda v: None
        )
        if kind == "policy":
            figures["heldout_accuracy_before"] = round(rank_accuracy(learner, held_out), 3)
        clock, losses = time.monotonic(), []
        for k in range(args.bc_steps if kind == "policy" else args.rm_bc_steps):
            if kind == "policy":
                batch = [train[(k * 8 + i) % len(train)] for i in range(8)]
                losses.append(rank_cross_entropy(learner, batch).loss)
            else:
                batch = [verdicts[(k * 16 + i) % len(verdicts)] for i in range(16)]
                losses.append(learner.bc_update(batch).loss)
        figures[f"{kind}_bc_s"] = round(time.monotonic() - clock, 1)
        figures[f"{kind}_bc_loss"] = [round(losses[0], 4), round(losses[-1], 4)]
        if kind == "policy":
            figures["heldout_accuracy_after"] = round(rank_accuracy(learner, held_out), 3)
        out[kind] = save_checkpoint(
            learner.model, learner.tokenizer, work, f"start-{kind}", 0, {"bc_steps": len(losses)}
        )
    figures["prepare_s"] = round(time.monotonic() - started, 1)
    return Start(world, players, out["policy"], out["reward"], figures)


def _play(url: str, token: str, policy: Any, family: str, episodes: int) -> None:
    """Play ``episodes`` of ``family``, giving up after 3 s an episode (the world may have
    no task of the family left near the avatar)."""
    runner = PolicyRunner(
        BigWorldClient(url, token), policy, RunnerConfig(family=family, max_episodes=episodes)
    )
    thread = start_thread(runner.run)
    thread.join(timeout=3.0 * episodes + 30)
    runner.stop.set()
    thread.join(timeout=30)


def _json(start: Start) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(start).items()}


def _kept(folder: Path) -> Start:
    body = json.loads((folder / "start.json").read_text())
    paths = {k: Path(body[k]) for k in ("world", "policy", "reward")}
    return Start(players=body["players"], figures=body["figures"], **paths)


def _short(vote: Any) -> str:
    """The judge's verdict in about 10 tokens, so that the tiny judge's answers (at most 24
    new tokens in the arms) end with their box; the heuristic's first sentence took 33."""
    return "closer. \\boxed{1}" if vote.score > 0 else "not closer. \\boxed{-1}"


# --- one arm ---------------------------------------------------------------------------------


def run_arm(name: str, args: argparse.Namespace, work: Path, start: Start) -> dict[str, Any]:
    mode, forge = ARMS[name]
    world = work / name
    shutil.copytree(start.world, world)
    env = {"BIGWORLD_FORGE_ENABLED": str(forge).lower(), "BIGWORLD_FORGE_INTERVAL_S": "15"}
    server = serve(world, args, **env)
    played, stops, threads = Played(), [], []
    trainer: Trainer | None = None
    judges: RewardRunner | None = None
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        started = time.monotonic()
        sampling = Sampling(temperature=args.temperature, max_new_tokens=24, seed=args.seed)
        for i, (family, token) in enumerate(sorted(start.players.items())):
            model = TransformersModel(start.policy, version="init", device="cpu")
            runner = TimedRunner(
                BigWorldClient(server.url, token),
                ModelPolicy(model, "rank", Sampling(args.temperature, 1, args.seed + i)),
                RunnerConfig(family=family, poll_s=2.0),
                played=played,
                started=started,
            )
            stops.append(runner.stop)
            threads.append(start_thread(runner.run))
        if mode in ("integrated_frozen_rm", "integrated_rm"):
            token = admin.create_agent(f"{name}-judge", "reward").token
            judge = ModelJudge(
                TransformersModel(start.reward, version="init", device="cpu"), sampling
            )
            judges = RewardRunner(
                BigWorldClient(server.url, token),
                judge,
                RewardConfig(votes=VOTES, reload_poll_s=2.0),
            )
            stops.append(judges.stop)
            threads.append(start_thread(judges.run))
        if mode is not None:
            token = admin.create_agent(f"{name}-trainer", "trainer").token
            config = TrainConfig(
                mode=mode,
                votes=VOTES,
                group_by=args.group_by,
                group_size=8,
                min_samples=args.min_samples,
                batch_size=16,
                micro_batch_size=8,
                lr=args.lr,
                reward_lr=args.lr,
                poll_s=1.0,
                judgment_wait_s=60.0,
                device="cpu",
                seed=args.seed,
            )
            trainer = Trainer(
                BigWorldClient(server.url, token),
                config,
                policy_dir=start.policy,
                reward_dir=start.reward,
                out=world / "train",
            )
            stops.append(trainer.stop)
            threads.append(start_thread(lambda: trainer.run(progress=False)))
        deadline = started + args.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(1.0)
            print(
                f"\r{name}: {time.monotonic() - started:5.0f}s {_line(played.rows)}",
                end="",
                flush=True,
            )
        print()
        for stop in stops:
            stop.set()
        for thread in threads:
            thread.join(timeout=120)
        backlog = len(list(admin.episodes(needs_votes=VOTES))) if judges is not None else 0
    finally:
        server.stop()
    flow = {}  # where the arm's episodes went: judged, waiting, learned from or given up
    if judges is not None:
        flow |= {"judged_episodes": judges.judged_episodes, "unjudged_at_end": backlog}
    if trainer is not None:
        flow |= {
            "trainer_dropped": trainer.feed.dropped,
            "trainer_waiting_for_votes": len(trainer.feed.pending),
            "trainer_waiting_for_group": len(trainer.waiting),
            "trainer_scripted": trainer.scripted,
        }
    return {
        "arm": name,
        "mode": mode,
        "forge": forge,
        "episodes": played.rows,
        "updates": trainer.history if trainer is not None else [],
        "versions": sorted({r["version"] for r in played.rows}),
        "flow": flow,
    }


def _line(rows: list[dict[str, Any]]) -> str:
    wins = sum(r["success"] for r in rows)
    return f"{len(rows)} episodes, {wins} succeeded ({wins / max(1, len(rows)):.0%})"


# --- figures ---------------------------------------------------------------------------------


def summarise(result: dict[str, Any], minutes: float, buckets: int = 10) -> dict[str, Any]:
    rows = sorted(result["episodes"], key=lambda r: r["t"])
    width = minutes * 60 / buckets
    curve = []
    for b in range(buckets):
        inside = [r for r in rows if b * width <= r["t"] < (b + 1) * width]
        rate = sum(r["success"] for r in inside) / len(inside) if inside else None
        curve.append(
            {"t_end_s": round((b + 1) * width, 1), "episodes": len(inside), "success": rate}
        )
    half = len(rows) // 2
    families: dict[str, dict[str, list[int]]] = defaultdict(
        lambda: {"first": [0, 0], "second": [0, 0]}
    )
    for i, r in enumerate(rows):
        cell = families[r["family"]]["first" if i < half else "second"]
        cell[0] += r["success"]
        cell[1] += 1
    per_family = {
        f: {k: (f"{w}/{n}" if n else "-") for k, (w, n) in halves.items()}
        for f, halves in sorted(families.items())
    }
    last = result["updates"][-1] if result["updates"] else {}
    return {
        "arm": result["arm"],
        "episodes": len(rows),
        "success": sum(r["success"] for r in rows) / max(1, len(rows)),
        "first_half": _rate(rows[:half]),
        "second_half": _rate(rows[half:]),
        "curve": curve,
        "per_family": per_family,
        "updates": len(result["updates"]),
        "versions_played": result["versions"],
        "flow": result["flow"],
        "last_update": {k: round(v, 4) for k, v in last.items()},
    }


def _rate(rows: list[dict[str, Any]]) -> float | None:
    return sum(r["success"] for r in rows) / len(rows) if rows else None


def plot(summaries: list[dict[str, Any]], path: Path) -> None:
    """Success rate over wall time per arm: matplotlib when installed, else a plain PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _plain_png(summaries, path)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for s in summaries:
        points = [(c["t_end_s"] / 60, c["success"]) for c in s["curve"] if c["success"] is not None]
        ax.plot(
            *zip(*points, strict=True),
            marker="o",
            label=s["arm"],
            color=[x / 255 for x in COLOURS[s["arm"]]],
        )
    ax.set(
        xlabel="minutes",
        ylabel="success rate",
        ylim=(0, 1),
        title="bigworld: tiny policy, same seed and wall time",
    )
    ax.legend()
    fig.savefig(path, dpi=100, bbox_inches="tight")


def _plain_png(summaries: list[dict[str, Any]], path: Path, w: int = 640, h: int = 360) -> None:
    """Axes (0..1 by 0.25) and one coloured polyline per arm; the legend is in learning.json."""
    pixels = bytearray([255] * (w * h * 3))
    left, right, top, bottom = 40, w - 20, 20, h - 30

    def dot(x: int, y: int, colour: tuple[int, int, int]) -> None:
        for dx in (0, 1):
            for dy in (0, 1):
                if 0 <= x + dx < w and 0 <= y + dy < h:
                    i = ((y + dy) * w + x + dx) * 3
                    pixels[i : i + 3] = bytes(colour)

    def line(x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int]) -> None:
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for k in range(n + 1):
            dot(x0 + (x1 - x0) * k // n, y0 + (y1 - y0) * k // n, colour)

    grey = (200, 200, 200)
    for q in range(5):
        y = bottom - (bottom - top) * q // 4
        line(left, y, right, y, grey if q else (0, 0, 0))
    line(left, top, left, bottom, (0, 0, 0))
    for s in summaries:
        span = s["curve"][-1]["t_end_s"] if s["curve"] else 1
        points = [
            (
                left + int((right - left) * c["t_end_s"] / span),
                bottom - int((bottom - top) * c["success"]),
            )
            for c in s["curve"]
            if c["success"] is not None
        ]
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            line(x0, y0, x1, y1, COLOURS[s["arm"]])
        for x, y in points:
            for d in range(-2, 3):
                dot(x + d, y, COLOURS[s["arm"]])
                dot(x, y + d, COLOURS[s["arm"]])
    raw = b"".join(b"\x00" + bytes(pixels[y * w * 3 : (y + 1) * w * 3]) for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    path.write_bytes(png + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# --- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=5.0, help="wall time per arm")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--seed", type=int, default=7, help="world seed (every arm) and model seed")
    parser.add_argument(
        "--step-budget", type=int, default=40, help="steps per episode (room to explore)"
    )
    parser.add_argument(
        "--families",
        nargs="+",
        default=["examine_in_light", "pick_and_place"],
        help="task families played (one policy agent each)",
    )
    parser.add_argument(
        "--demonstrator",
        choices=("oracle", "explorer"),
        default="explorer",
        help="who plays the episodes the policy is cloned from: the oracle (sees the world) or "
        "the scripted explorer (sees only the prompt, so its choices can be learned from it)",
    )
    parser.add_argument("--demos", type=int, default=120, help="demonstrated episodes per family")
    parser.add_argument(
        "--judge-noise", type=float, default=0.1, help="heuristic judge's flip rate"
    )
    parser.add_argument("--bc-steps", type=int, default=200, help="policy warm-start steps")
    parser.add_argument("--rm-bc-steps", type=int, default=50, help="reward-model warm start")
    parser.add_argument("--bc-lr", type=float, default=1e-3)
    parser.add_argument("--lr", type=float, default=3e-4, help="RL learning rate")
    parser.add_argument(
        "--group-by",
        choices=("task", "family"),
        default="family",
        help="family: few tasks repeat within a version in minutes, so task groups rarely form",
    )
    parser.add_argument("--min-samples", type=int, default=32, help="policy samples per update")
    parser.add_argument(
        "--temperature", type=float, default=0.5, help="rank-mode sampling (1: the softmax)"
    )
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--start",
        type=Path,
        help="keep the prepared world and models here, and reuse them when already there",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "bigworld-learning"
    )
    args = parser.parse_args()
    hf_logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bigworld-learning-") as tmp:
        work = Path(tmp)
        start = _kept(args.start) if args.start and (args.start / "start.json").exists() else None
        if start is None:
            start = prepare(args, args.start or work)
            if args.start:
                (args.start / "start.json").write_text(json.dumps(_json(start)))
        print(f"start: {json.dumps(start.figures)}")
        summaries = [summarise(run_arm(arm, args, work, start), args.minutes) for arm in args.arms]
    report = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "prepare": start.figures,
        "arms": summaries,
    }
    (args.out / "learning.json").write_text(json.dumps(report, indent=2))
    plot(summaries, args.out / "learning.png")
    print(f"{'arm':<21}{'episodes':>9}{'success':>9}{'1st half':>10}{'2nd half':>10}{'updates':>9}")
    for s in summaries:
        first, second = (
            f"{x:.2f}" if x is not None else "-" for x in (s["first_half"], s["second_half"])
        )
        print(
            f"{s['arm']:<21}{s['episodes']:>9}{s['success']:>9.2f}{first:>10}{second:>10}{s['updates']:>9}"
        )
    for s in summaries:
        print(f"{s['arm']}: per family (first half → second half) {json.dumps(s['per_family'])}")
        if s["flow"]:
            print(f"{s['arm']}: episodes' flow {json.dumps(s['flow'])}")
    print(f"wrote {args.out / 'learning.json'} and {args.out / 'learning.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
