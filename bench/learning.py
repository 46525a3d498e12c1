"""Does a tiny policy get better in this world, on a laptop-class CPU? A learnability ladder.

Each rung is a task where learning must be possible before a harder one (what CartPole is to
an RL library):

- ``go_to``: one-hop navigation ("go to the kitchen 3", a 2-step budget); the policy starts
  untrained (a cold start: it picks nearly uniformly among the admissible actions);
- ``go_to_2``: go_to up to 2 hops (the server's ``--go-to-hops 2``), also from a cold start;
- ``go_to_4``: up to 4 hops, cold: successes are rare, so outcomes alone say little, and each
  step's progress toward the goal is what there is to learn from (the closed loop's rung);
- ``follow_4``: ``follow`` up to 4 hops, cold: the task names every move ("go to the south
  road, then the tunnel 3, then the tunnel 4"), so the observation shows each step's right
  action (from the third move on, beside the way back, which the task names too), yet a walk
  at random almost never completes four of them;
- ``trail_4``: ``trail`` up to 4 hops, cold: the observation ends with a signpost naming the
  next move from where the avatar stands ("for the kitchen 1, go to north road"), so each
  step's right action is in front of the policy whatever it did before, while a walk at random
  almost never completes four: the rung where step credit must help;
- ``waymark_4``: ``waymark`` up to 4 hops, cold: a trail whose signposted move is also listed
  first, so that each step's right action is learnable by its place in the list (the cold
  policy does not learn to read the signpost itself: ``bench/step_ceiling.py``), while a walk
  at random still almost never completes four;
- ``alfworld``: ``examine_in_light`` and ``pick_and_place``, from a policy cloned from the
  scripted explorer (the preparation below), avatars capacity-bounded by the world's rules.

Arms, each on its own server started from one prepared world (same seed, same task pool), each
given the same wall time, all from the same starting weights:

- ``frozen``: the starting policy plays, nothing learns;
- ``outcome_only``: the trainer learns from outcomes alone;
- ``integrated``: outcomes + the reward model's step votes, reward model frozen;
- ``integrated_oracle``: outcomes + step votes from the oracle (a heuristic judge without
  noise: a step is good when it shortened the oracle's plan to the goal), the upper bound of
  what step credit can give: if it does not beat ``outcome_only``, the integration is broken;
- ``integrated_rm``: the same, and the reward model learns from consistency rewards;
- ``integrated_rm_forge``: the same with the forge on (task adaptation and world dynamics);
  in the other arms the forge is off, but episode begins still re-draw the pool's tasks;
- ``outcome_only@exact``: outcome-only from exact groups (``TrainConfig.exact_groups``, G =
  ``--exact-groups``): the trainer itself forks main at its tick G times and plays one episode
  of one task of the rung's family in each, as the first player (whose avatar moves in main, so
  the starts vary as the world's do), and learns from those groups alone; the players still
  play in main with the latest version, and their episodes are the arm's figures, as in every
  arm. Beside its base arm it prints the difference of their last windows (Newcombe's 95%
  interval).

The ``alfworld`` rung's models are warm-started once before the clock runs (not counted):
demonstrating agents (one per family: the scripted explorer, which decides from the prompt
alone, or with ``--demonstrator oracle`` the oracle) and a random agent play on a preparation
server, a heuristic judge (the oracle's plan distance, with some votes flipped) judges their
steps, the tiny policy is cloned from the demonstrator's choices in its successful episodes
(rank loss; per-step accuracy measured on the held-out tenth), the tiny reward model from the
judge's answers. On the go_to, follow and trail rungs both models are untrained.

Reports, per arm: success with 95% Wilson intervals overall, per half and over the first and
last ``--window`` episodes, per family, the share of steps the oracle calls good (toward the
goal) over those windows, all of them and split one move from the goal or farther, and the
share of moves that went straight back where the last move came from (each share's difference
against the base arm), the trainer's figures, prompt tokens and candidates per
step (p50, p95), for the reward model its step accuracy (votes agreeing with the oracle's
plan distance) per version over the whole run, on the good and the bad steps apart and on the
bad steps by kind (moves the wrong way, other actions), and for each way of grouping rollouts
how often the outcome-only advantage's sign agrees with the oracle's verdict on the step (which
grouping gives the cleaner signal; ``ARM@KEY`` arms show which learns faster), and for each trained
arm where its trainer's settings put their credit, by kind of move (the winning move, moves
straight back after a wrong or a right move, others toward the goal or not). On the go_to rung it
checks the bar: the trained arm's last ``--window`` episodes reach the frozen arm's rate + 0.25
and twice its own first.
Writes ``learning.json`` (with the headline of the README's results table) and
``learning.png`` into ``--out``, by default ``docs/benchmarks`` beside the ladder's page, whose
figures are rung ``go_to``'s (pass ``--out`` elsewhere for the other rungs)::

    .venv/bin/python bench/learning.py --rung go_to --minutes 10                     # 20 minutes
    .venv/bin/python bench/learning.py --rung alfworld --minutes 5 --out /tmp/ladder  # about 40 min
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from learning_figures import (  # noqa: E402
    STEP_KINDS,
    STEP_SHARES,
    VOTES,
    cell,
    headline,
    inspect_steps,
    plot,
    pool,
    rate_difference,
    step_kind,
    summarise,
    toward_goal,
    turned_back,
    verdict,
)
from live import LiveServer, start_server  # noqa: E402
from results import provenance  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from agents.backends import Sampling, TransformersModel  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.models.tiny import KINDS, ModelSpec, init_model  # noqa: E402
from agents.policy_agent import (  # noqa: E402
    Decision,
    ExpertPolicy,
    ExplorerPolicy,
    ModelPolicy,
    PolicyRunner,
    RandomPolicy,
    RunnerConfig,
)
from agents.reward_agent import HeuristicJudge, ModelJudge, RewardConfig, RewardRunner  # noqa: E402
from agents.train.checkpoints import save_checkpoint  # noqa: E402
from agents.train.config import GROUP_KEYS, TrainConfig  # noqa: E402
from agents.train.data import (  # noqa: E402
    episode_from_detail,
    verdict_choice,
    write_labelled_steps,
)
from agents.train.exact import ExactGroups  # noqa: E402
from agents.train.learner import (  # noqa: E402
    Choice,
    Learner,
    Sample,
    rank_accuracy,
    rank_cross_entropy,
)
from agents.train.trainer import Trainer  # noqa: E402
from world.stats import standardised_difference, unpaired_difference  # noqa: E402

FAR = 3  # a start this many moves from the goal or more is among a hops-4 rung's hardest
ARMS = {  # arm → (trainer mode, None: no trainer; the forge on)
    "frozen": (None, False),
    "outcome_only": ("outcome_only", False),
    "integrated": ("integrated_frozen_rm", False),
    "integrated_oracle": ("integrated_frozen_rm", False),
    "integrated_rm": ("integrated_rm", False),
    "integrated_rm_forge": ("integrated_rm", True),
}
RUNGS = {  # rung → (families played, server settings, cold start: untrained models)
    "go_to": (["go_to"], {}, True),
    "go_to_2": (["go_to"], {"BIGWORLD_GO_TO_HOPS": "2"}, True),
    "go_to_4": (["go_to"], {"BIGWORLD_GO_TO_HOPS": "4"}, True),
    "follow_4": (["follow"], {"BIGWORLD_GO_TO_HOPS": "4"}, True),
    "trail_4": (["trail"], {"BIGWORLD_GO_TO_HOPS": "4"}, True),
    "waymark_4": (["waymark"], {"BIGWORLD_GO_TO_HOPS": "4"}, True),
    "alfworld": (["examine_in_light", "pick_and_place"], {}, False),
}
HEADLINE_ORDER = 2  # the ladder's row in the README's results table (bench/results.py)
EXACT = "exact"  # ARM@exact: that arm's trainer learns from exact groups it plays in forks
VOTED = ("integrated_frozen_rm", "integrated_rm")  # the modes that learn from step votes


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
                distance=detail.get("distance"),  # the oracle's plan length at the start
                steps=record["steps"],
                **toward_goal(detail),  # the steps the oracle calls good, near and far
                **turned_back(detail),  # the moves that went back where they came from
                version=version,
            )
        return record


def serve(data: Path, args: argparse.Namespace, **extra: str) -> LiveServer:
    env = {
        "BIGWORLD_SEED": str(args.seed),
        "BIGWORLD_STEP_BUDGET": str(args.step_budget),
        "BIGWORLD_LOG_LEVEL": "warning",
        **RUNGS[args.rung][1],
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
    players: dict[str, str]  # "family#i" → the token of the policy agent that plays it
    policy: Path
    reward: Path
    figures: dict[str, Any]
    labels: Path | None = None  # --warm-judge: the judge's labelled steps (--judge-anchor)


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
            players[f"{family}#0"] = admin.create_agent(f"player-{family}", "policy").token
            _play(server.url, players[f"{family}#0"], demonstrator, family, args.demos)
            # the judge's bad examples, from an avatar of its own: a random walk can leave a
            # neighbourhood where no task of the family can be made any more
            other = admin.create_agent(f"random-{family}", "policy").token
            _play(server.url, other, RandomPolicy(args.seed), family, args.demos // 4)
        played = list(admin.episodes())
        judges = RewardRunner(
            BigWorldClient(server.url, admin.create_agent("prep-judge", "reward").token),
            HeuristicJudge(noise=args.judge_noise, seed=args.seed),
            _every_episode(played),  # with the arms' votes, so their judges find no past to judge
        )
        while judges.run_once():
            pass
        choices: dict[int, list[Choice]] = defaultdict(list)  # episode → demonstrated choices
        verdicts, tasks = [], defaultdict(set)
        for row in played:
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
    spec = _spec(args)
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


def prepare_cold(args: argparse.Namespace, work: Path) -> Start:
    """A fresh world with ``--agents`` players per family, and untrained models."""
    world = work / "world"
    server = serve(world, args, BIGWORLD_FORGE_ENABLED="false")
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        players = {
            f"{family}#{i}": admin.create_agent(f"player-{family}-{i}", "policy").token
            for family in args.families
            for i in range(args.agents)
        }
    finally:
        server.stop()
    models = {kind: init_model(kind, work / f"start-{kind}", _spec(args)) for kind in KINDS}
    figures: dict[str, Any] = {"families": args.families, "cold_start": True}
    figures["agents"] = len(players)
    labels = None
    if args.warm_judge:
        models["reward"], labels, judged = warm_judge(args, work, models["reward"])
        figures |= judged
    return Start(world, players, models["policy"], models["reward"], figures, labels)


class Stumbling:
    """The oracle's action with probability ``p``, else one at random: the states and the
    mix of good and bad steps of a policy partly trained (a walk at random seldom gets far
    enough along a task's way to show the steps that come later)."""

    has_weights = False

    def __init__(self, expert: ExpertPolicy, p: float, seed: int) -> None:
        self.expert, self.p = expert, p
        self.random = RandomPolicy(seed)
        self.rng = random.Random(seed)
        self.version = f"stumbling-{p}"

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        if self.rng.random() < self.p:
            return self.expert.decide(episode_id, prompt, admissible)
        return self.random.decide(episode_id, prompt, admissible)

    def reload(self, path: Path, version: str) -> None:
        """Scripted: no weights."""


def warm_judge(
    args: argparse.Namespace, work: Path, init: Path
) -> tuple[Path, Path, dict[str, Any]]:
    """A cold rung's judge, warm-started on the oracle's verdicts (``--warm-judge``). In a
    world of its own (same seed: the arms' world is untouched) the scripted explorer, a random
    agent and, with ``--judge-stumbling P``, an agent that takes the oracle's action with
    probability P (else one at random) play the rung's families; the oracle's plan distance
    labels every step (a heuristic judge without noise); the tiny reward model learns to rank
    the oracle's verdict first (rank loss, as the arms' judge scores its two verdicts) on nine
    tenths of the episodes. Its step accuracy on the other tenth is reported before and after,
    overall, on the good and the bad steps apart, and on the bad steps by ``step_kind`` (moves
    the wrong way, other actions), beside the share of good steps there (what always answering
    "good" scores). Returns the judge's checkpoint, its training steps (labelled, for
    ``--judge-anchor``) and its figures."""
    started = time.monotonic()
    env = {"BIGWORLD_RECORD_DISTANCE": "true", "BIGWORLD_FORGE_ENABLED": "false"}
    server = serve(work / "judge-world", args, **env)
    labelled: dict[int, list[tuple[Choice, str]]] = {}  # each step and its step_kind
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        players: list[Any] = [ExplorerPolicy(args.seed), RandomPolicy(args.seed)]
        if args.judge_stumbling:
            hints = BigWorldClient(server.url, admin.create_agent("judge-hints", "trainer").token)
            players.append(Stumbling(ExpertPolicy(hints), args.judge_stumbling, args.seed))
        for family in args.families:
            for i, policy in enumerate(players):
                token = admin.create_agent(f"judge-demo-{family}-{i}", "policy").token
                _play(server.url, token, policy, family, args.demos)
        oracle = BigWorldClient(server.url, admin.create_agent("judge-oracle", "reward").token)
        played = list(admin.episodes())
        judges = RewardRunner(oracle, HeuristicJudge(0.0, args.seed), _every_episode(played))
        while judges.run_once():
            pass
        for row in played:
            episode = episode_from_detail(admin.episode(row["id"]), votes=VOTES, use_votes=True)
            if episode is not None:
                labelled[episode.rollout.episode_id] = [
                    (
                        verdict_choice(step.reward_prompt, step.votes[0].score),
                        step_kind(step.observation),
                    )
                    for step in episode.steps
                    if step.votes and step.votes[0].score
                ]
    finally:
        server.stop()
    episodes = sorted(labelled)
    train = [c for i, e in enumerate(episodes) for c, _ in labelled[e] if i % 10 != 9]
    held_kinds = [(c, k) for i, e in enumerate(episodes) for c, k in labelled[e] if i % 10 == 9]
    held_out = [c for c, _ in held_kinds]
    random.Random(args.seed).shuffle(train)
    config = TrainConfig(batch_size=16, micro_batch_size=8, lr=args.bc_lr, device="cpu")
    learner = Learner(init, config, lr=args.bc_lr, version="init", resolve=lambda v: None)
    good = [c for c in held_out if c.chosen == 0]  # verdict +1, the first of VERDICTS
    parts = {"all": held_out, "good": good, "bad": [c for c in held_out if c.chosen != 0]}
    parts |= {
        f"bad_{kind}": [c for c, k in held_kinds if c.chosen != 0 and k == kind]
        for kind in STEP_KINDS
    }

    def accuracy() -> dict[str, float]:
        return {name: round(rank_accuracy(learner, steps), 3) for name, steps in parts.items()}

    before = accuracy()
    clock, losses = time.monotonic(), []
    for k in range(args.judge_bc_steps if train else 0):
        batch = [train[(k * 16 + i) % len(train)] for i in range(16)]
        losses.append(rank_cross_entropy(learner, batch).loss)
    figures = {
        "judge_labelled_steps": len(train),
        "judge_heldout_steps": len(held_out),
        "judge_heldout_good_share": round(len(good) / max(1, len(held_out)), 3),
        "judge_heldout_accuracy_before": before["all"],
        "judge_heldout_accuracy_after": (after := accuracy())["all"],
        "judge_heldout_by_step": {"before": before, "after": after},
        "judge_bc_loss": [round(losses[0], 4), round(losses[-1], 4)] if losses else [],
        "judge_bc_s": round(time.monotonic() - clock, 1),
        "judge_prepare_s": round(time.monotonic() - started, 1),
    }
    path = save_checkpoint(
        learner.model, learner.tokenizer, work, "start-judge", 0, {"bc_steps": len(losses)}
    )
    labels = work / "judge-labels.jsonl"
    write_labelled_steps(labels, train)
    return path, labels, figures


def _every_episode(played: Sequence[dict[str, Any]]) -> RewardConfig:
    """A warm start's judging, with the arms' votes: every episode of its world (``played``,
    as listed). A judge lists only the last ``backlog`` episode ids before the newest it has
    seen, and a warm start can play more than the default 1,000 (``--warm-judge
    --judge-stumbling`` with ``--demos 480``: 1,440)."""
    newest = max((int(row["id"]) for row in played), default=0)
    return RewardConfig(votes=VOTES, backlog=max(RewardConfig.backlog, newest))


def _spec(args: argparse.Namespace) -> ModelSpec:
    return ModelSpec(
        hidden_size=args.hidden_size,
        intermediate_size=3 * args.hidden_size,
        num_hidden_layers=args.layers,
        seed=args.seed,
    )


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
    labels = Path(body["labels"]) if body.get("labels") else None
    return Start(players=body["players"], figures=body["figures"], labels=labels, **paths)


def _short(vote: Any) -> str:
    """The judge's verdict in about 10 tokens, so that the tiny judge's answers (at most 24
    new tokens in the arms) end with their box; the heuristic's first sentence took 33."""
    return "closer. \\boxed{1}" if vote.score > 0 else "not closer. \\boxed{-1}"


# --- one arm ---------------------------------------------------------------------------------


def run_arm(name: str, args: argparse.Namespace, work: Path, start: Start) -> dict[str, Any]:
    hf_logging.disable_progress_bar()  # also in a spawned process of its own (--parallel)
    torch.set_num_threads(1)  # the arm's agents and trainer share the cores as threads
    base, _, group_by = name.partition("@")  # "outcome_only@task": that arm, grouped by task
    exact = group_by == EXACT
    if exact:
        group_by = "task"  # an exact group is its fork point's (the trainer says so too)
    mode, forge = ARMS[base]
    world = work / name
    shutil.copytree(start.world, world)
    env = {
        "BIGWORLD_FORGE_ENABLED": str(forge).lower(),
        "BIGWORLD_FORGE_INTERVAL_S": "15",
        "BIGWORLD_RECORD_DISTANCE": "true",  # the reward model's accuracy is measured on it
    }
    server = serve(world, args, **env)
    if multiprocessing.parent_process() is not None:
        _end_with_parent(server)
    played, stops, threads = Played(), [], []
    trainer: Trainer | None = None
    config: TrainConfig | None = None
    judges: RewardRunner | None = None
    try:
        admin = BigWorldClient(server.url, server.admin_token)
        started = time.monotonic()
        sampling = Sampling(args.judge_temperature, max_new_tokens=24, seed=args.seed)
        for i, (player, token) in enumerate(sorted(start.players.items())):
            model = TransformersModel(start.policy, version="init", device="cpu")
            runner = TimedRunner(
                BigWorldClient(server.url, token),
                ModelPolicy(model, "rank", Sampling(args.temperature, 1, args.seed + i)),
                RunnerConfig(family=player.split("#")[0], poll_s=2.0),
                played=played,
                started=started,
            )
            stops.append(runner.stop)
            threads.append(start_thread(runner.run))
        if mode in VOTED:
            token = admin.create_agent("arm-judge", "reward").token  # the arm's server is its own
            judge: Any = (
                HeuristicJudge(0.0, args.seed)
                if base == "integrated_oracle"
                else ModelJudge(
                    TransformersModel(start.reward, version="init", device="cpu"), sampling, "rank"
                )
            )
            judges = RewardRunner(
                BigWorldClient(server.url, token),
                judge,
                RewardConfig(votes=VOTES, reload_poll_s=2.0),
            )
            stops.append(judges.stop)
            threads.append(start_thread(judges.run))
        if mode is not None:
            token = admin.create_agent("arm-trainer", "trainer").token
            # the warm judge's labelled steps, where this arm trains the judge (--judge-anchor)
            anchor = start.labels if args.judge_anchor and mode == "integrated_rm" else None
            config = TrainConfig(  # the trainer's defaults but for the run's own knobs
                mode=mode,
                votes=VOTES,
                group_by=group_by or args.group_by,
                min_samples=args.min_samples,
                max_samples=args.max_samples,
                lam=args.lam,
                rank_uniform_groups=args.rank_uniform,
                uniform_share=args.uniform_share,
                per_episode=args.per_episode,
                credit_to_go=args.credit_to_go,
                lr=args.lr,
                device="cpu",
                seed=args.seed,
                exact_groups=args.exact_groups if exact else 0,
                exact_family=args.families[0] if exact and len(args.families) == 1 else None,
                reward_anchor=None if anchor is None else str(anchor),
                reward_anchor_batch=args.judge_anchor or TrainConfig.reward_anchor_batch,
                reward_anchor_steps=args.judge_anchor_steps,
            )
            player = start.players[sorted(start.players)[0]]  # exact groups start where it stands
            trainer = Trainer(
                BigWorldClient(server.url, token),
                config,
                policy_dir=start.policy,
                reward_dir=start.reward,
                out=world / "train",
                exact=ExactGroups(server.url, server.admin_token, player) if exact else None,
            )
            stops.append(trainer.stop)
            threads.append(start_thread(lambda: trainer.run(progress=False)))
        deadline = started + args.minutes * 60
        shown = started
        while time.monotonic() < deadline and not _updated(trainer, args.updates):
            time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))
            if time.monotonic() - shown >= 30.0:
                shown = time.monotonic()
                print(f"{name}: {shown - started:5.0f}s {_line(played.rows)}", flush=True)
        for stop in stops:
            stop.set()
        for thread in threads:
            thread.join(timeout=120)
        backlog = len(list(admin.episodes(needs_votes=VOTES))) if judges is not None else 0
        inspected = inspect_steps(admin, start.policy, config, judged=judges is not None)
        forged = forge_figures(admin) if forge else None
    finally:
        for stop in stops:  # an arm that failed must not leave its players stepping
            stop.set()
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
        if trainer.exact is not None:
            flow |= {k: round(v, 1) for k, v in trainer.exact.figures.as_metrics().items()}
    return {
        "arm": name,
        "mode": mode,
        "forge": forge,
        "episodes": played.rows,
        "updates": trainer.history if trainer is not None else [],
        "versions": sorted({r["version"] for r in played.rows}),
        "flow": flow,
        "forged": forged,
        **inspected,
    }


def budget(args: argparse.Namespace) -> str:
    """An arm's budget in words: its minutes, and its updates where ``--updates`` caps it."""
    minutes = f"{args.minutes:g} minutes"
    return minutes if args.updates is None else f"{args.updates} updates (at most {minutes})"


def _updated(trainer: Trainer | None, updates: int | None) -> bool:
    """Whether a trained arm has made its budget of updates (``--updates``)."""
    return updates is not None and trainer is not None and len(trainer.history) >= updates


def forge_figures(admin: BigWorldClient) -> dict[str, Any]:
    """What the forge did in an arm: its decisions counted by kind and verdict, and every
    pool task's origin (sampled, probe, easier, harder)."""
    decisions = Counter(f"{d['kind']} {d['verdict']}" for d in admin.decisions())
    origins = {t["id"]: t["origin"] for t in admin.tasks()}
    return {"decisions": dict(sorted(decisions.items())), "origins": origins}


def _end_with_parent(server: LiveServer) -> None:
    """In an arm's own process (``--parallel``): stop the arm's server and exit when the bench
    that spawned it is gone (killed or interrupted), so no arm outlives its run."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(2.0)
        server.stop()
        os._exit(1)

    start_thread(watch)


def run_arms(args: argparse.Namespace, work: Path, start: Start) -> dict[str, dict[str, Any]]:
    """Every arm, one after another or (``--parallel``) all at once or N at a time, each in a
    process of its own (its agents and trainer would share one interpreter lock otherwise):
    arms that run together share the machine's load as it comes, which on a shared machine is
    the fairer comparison, so order ``--arms`` with each arm beside the one it is compared
    with."""
    if args.parallel is None:
        return {arm: run_arm(arm, args, work, start) for arm in args.arms}
    spawn = multiprocessing.get_context("spawn")  # no threads or torch state forked along
    at_once = args.parallel or len(args.arms)
    results = {}
    for i in range(0, len(args.arms), at_once):  # the next N start when the last N are done
        arms = args.arms[i : i + at_once]
        with ProcessPoolExecutor(len(arms), mp_context=spawn) as processes:
            running = {arm: processes.submit(run_arm, arm, args, work, start) for arm in arms}
            results |= {arm: future.result() for arm, future in running.items()}
    return results


def compare(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each arm's last window against the one below it (run from the same starts, for the same
    wall time): an ``ARM@exact`` arm against ``ARM``, the forge's arm against
    ``integrated_rm`` (the same loop on a fixed pool) where the run has it, each arm with step
    votes against ``outcome_only`` (``frozen`` where the run has no ``outcome_only``), and
    ``outcome_only`` against ``frozen``. The difference of success rates
    with its 95% interval (Newcombe's, unpaired, over every seed's window), and what it says:
    better or worse where the interval excludes 0; with several seeds, also each seed's own
    difference."""
    by_arm = {s["arm"]: s for s in summaries}
    out = []
    for s in summaries:
        arm, _, grouping = s["arm"].partition("@")
        if grouping == EXACT:
            base = arm
        elif ARMS[arm][1] and "integrated_rm" in by_arm:
            base = "integrated_rm"
        elif ARMS[arm][0] in VOTED:
            base = "outcome_only" if "outcome_only" in by_arm else "frozen"
        elif arm == "outcome_only":
            base = "frozen"
        else:
            continue
        other = by_arm.get(base)
        if other is None or not s["last_window"] or not other["last_window"]:
            continue
        a, b = s["last_window"], other["last_window"]
        d = rate_difference(a, b)
        says = "better" if d.low > 0 else "worse" if d.high < 0 else "no difference shown"
        row = {
            "arm": s["arm"],
            "base": base,
            "difference": round(d.estimate, 4),
            "low": round(d.low, 4),
            "high": round(d.high, 4),
            "says": says,
        }
        for key in STEP_SHARES:
            # steps, not episodes: they cluster within episodes, so the interval is narrower
            # than it should be; a reading, not a verdict
            x, y = s.get(f"last_{key}"), other.get(f"last_{key}")
            if x and y:
                c = rate_difference(x, y)
                row[f"{key}_difference"] = [
                    round(c.estimate, 4),
                    round(c.low, 4),
                    round(c.high, 4),
                ]
        with contextlib.suppress(ValueError):  # no start distance met by both arms
            # a reading: the rule is the plain difference
            m = standardised_difference(_last_by_distance(s), _last_by_distance(other))
            row["standardised_difference"] = [
                round(m.estimate, 4),
                round(m.low, 4),
                round(m.high, 4),
            ]
        far = [_far(_last_by_distance(x)) for x in (s, other)]
        if far[0][1] and far[1][1]:  # a reading: the starts FAR moves or more from the goal
            f = unpaired_difference(*far[0], *far[1])
            row["far_difference"] = [round(f.estimate, 4), round(f.low, 4), round(f.high, 4)]
        if "per_seed" in s and "per_seed" in other:
            row["per_seed"] = [
                round(x["last_window"]["rate"] - y["last_window"]["rate"], 4)
                for x, y in zip(s["per_seed"], other["per_seed"], strict=True)
                if x["last_window"] and y["last_window"]
            ]
        out.append(row)
    return out


def _last_by_distance(summary: dict[str, Any]) -> dict[object, tuple[int, int]]:
    """An arm's last windows as (successes, episodes) by the oracle's plan length at the start,
    over its seeds (episodes with no length recorded left out)."""
    seeds = summary.get("per_seed") or [summary]
    counts: dict[object, tuple[int, int]] = {}
    for seed in seeds:
        for distance, windows in seed.get("per_distance", {}).items():
            if "last_window" in windows:
                wins, n = map(int, windows["last_window"].split("/"))
                had = counts.get(distance, (0, 0))
                counts[distance] = (had[0] + wins, had[1] + n)
    return counts


def _far(counts: dict[object, tuple[int, int]]) -> tuple[int, int]:
    """(successes, episodes) of the starts at least FAR moves from the goal."""
    far = [c for d, c in counts.items() if int(str(d)) >= FAR]
    return sum(w for w, _ in far), sum(n for _, n in far)


def _line(rows: list[dict[str, Any]]) -> str:
    wins = sum(r["success"] for r in rows)
    return f"{len(rows)} episodes, {wins} succeeded ({wins / max(1, len(rows)):.0%})"


# --- main ------------------------------------------------------------------------------------


def arguments() -> argparse.ArgumentParser:
    """The bench's arguments; ``arguments().parse_args([])`` gives every setting's default
    (``bench/trl_grpo.py`` runs this bench's arms with them)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rung", choices=list(RUNGS), default="go_to", help="the ladder's rung")
    parser.add_argument("--minutes", type=float, default=10.0, help="wall time per arm")
    parser.add_argument(
        "--updates",
        type=int,
        help="a trained arm also stops once its trainer has made this many updates (a budget "
        "that a slow machine does not cut short; --minutes still caps it)",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        metavar="ARM",
        choices=[
            *ARMS,
            *(f"{a}@{g}" for a in ARMS if a != "frozen" for g in GROUP_KEYS),
            f"outcome_only@{EXACT}",
        ],
        help=f"of {', '.join(ARMS)} (default: frozen outcome_only); ARM@KEY groups that arm's "
        f"rollouts by KEY, one of {', '.join(GROUP_KEYS)}; outcome_only@{EXACT} learns from "
        "exact groups played in forks (--exact-groups)",
    )
    parser.add_argument(
        "--exact-groups",
        type=int,
        default=4,
        help="G of the @exact arms: rollouts of one task from one state per group",
    )
    parser.add_argument("--seed", type=int, default=7, help="world seed (every arm) and model seed")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run every arm from this many starts (seeds --seed, --seed + 1, ...), one after "
        "another, and pool their figures",
    )
    parser.add_argument(
        "--step-budget",
        type=int,
        default=40,
        help="steps per episode (room to explore); a go_to task's own budget is smaller",
    )
    parser.add_argument("--agents", type=int, default=1, help="policy agents per family (cold)")
    parser.add_argument(
        "--parallel",
        type=int,
        nargs="?",
        const=0,
        metavar="N",
        help="run the arms at the same time, not in turn: N at a time in --arms order (a pair "
        "starts together and gets the same minutes; default: all of them at once)",
    )
    parser.add_argument(
        "--window", type=int, default=300, help="episodes in the first and last window"
    )
    parser.add_argument(
        "--margin", type=float, default=0.25, help="the bar: last window >= frozen + margin"
    )
    parser.add_argument(
        "--gain", type=float, default=2.0, help="the bar: last window >= gain x first window"
    )
    parser.add_argument(
        "--demonstrator",
        choices=("oracle", "explorer"),
        default="explorer",
        help="alfworld rung: who plays the episodes the policy is cloned from: the oracle "
        "(sees the world) or the scripted explorer (sees only the prompt)",
    )
    parser.add_argument("--demos", type=int, default=120, help="demonstrated episodes per family")
    parser.add_argument(
        "--judge-noise", type=float, default=0.1, help="heuristic judge's flip rate"
    )
    parser.add_argument("--bc-steps", type=int, default=200, help="policy warm-start steps")
    parser.add_argument("--rm-bc-steps", type=int, default=50, help="reward-model warm start")
    parser.add_argument(
        "--warm-judge",
        action="store_true",
        help="cold rungs: warm-start the reward model on the oracle's verdicts of the scripted "
        "explorer's and a random agent's steps (--demos episodes each, in a world of its own)",
    )
    parser.add_argument(
        "--judge-bc-steps", type=int, default=300, help="--warm-judge: its training steps"
    )
    parser.add_argument(
        "--judge-stumbling",
        type=float,
        default=0.0,
        help="--warm-judge: also the steps of an agent that takes the oracle's action with "
        "this probability, else one at random (--demos episodes; 0: none)",
    )
    parser.add_argument(
        "--judge-anchor",
        type=int,
        default=0,
        help="--warm-judge, arms that train the judge: after each consistency update it takes "
        "as many rank-loss steps (times --judge-anchor-steps), each on this many of its warm "
        "start's labelled steps (TrainConfig.reward_anchor; not the paper's objective; 0: "
        "consistency alone)",
    )
    parser.add_argument(
        "--judge-anchor-steps",
        type=int,
        default=TrainConfig.reward_anchor_steps,
        help="--judge-anchor: its rank-loss steps per consistency step",
    )
    parser.add_argument(
        "--judge-temperature",
        type=float,
        default=1.0,
        help="the reward model's votes: drawn from softmax(scores / T) of its two verdicts "
        "(above 0: consistency training learns from the spread of a step's votes)",
    )
    parser.add_argument("--bc-lr", type=float, default=1e-3)
    parser.add_argument("--lr", type=float, default=TrainConfig.lr, help="RL learning rate")
    parser.add_argument(
        "--lam", type=float, default=TrainConfig.lam, help="λ: the step votes' weight (voted arms)"
    )
    parser.add_argument(
        "--rank-uniform",
        action="store_true",
        help="voted arms: rank a group that all failed or all succeeded by its votes (runs a-g)",
    )
    parser.add_argument(
        "--uniform-share",
        type=float,
        default=TrainConfig.uniform_share,
        help="with --rank-uniform: an update's samples from those groups per sample of the "
        "groups with both outcomes, at most (0: no cap)",
    )
    parser.add_argument(
        "--credit-to-go",
        action="store_true",
        help="voted arms: a step's reward holds the votes of every later step too",
    )
    parser.add_argument(
        "--per-episode",
        action="store_true",
        help="every arm: each episode weighs the same in an update, whatever its length",
    )
    parser.add_argument(
        "--group-by",
        choices=GROUP_KEYS,
        default=TrainConfig.group_by,
        help="rollouts compared within a task, a family, or a family and start distance",
    )
    parser.add_argument(
        "--min-samples", type=int, default=TrainConfig.min_samples, help="samples per update"
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        default=TrainConfig.max_samples,
        help="most samples an update trains on (every arm); caps the optimiser steps with them",
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="the policy's rank-mode sampling"
    )
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--start",
        type=Path,
        help="keep the prepared world and models here, and reuse them when already there",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks",
        help="folder for learning.json and learning.png (default: docs/benchmarks)",
    )
    return parser


def main() -> int:
    parser = arguments()
    args = parser.parse_args()
    if args.parallel is not None and args.parallel < 0:
        parser.error("--parallel N: N arms at a time, N >= 1 (no N: all at once)")
    if args.judge_temperature <= 0:
        parser.error("--judge-temperature must be above 0: votes all alike train nothing")
    if not 0 <= args.judge_stumbling <= 1:
        parser.error("--judge-stumbling P: a probability, 0 <= P <= 1")
    if args.judge_anchor < 0 or (args.judge_anchor and not args.warm_judge):
        parser.error("--judge-anchor N: N >= 1 labelled steps an update, with --warm-judge")
    if args.judge_anchor_steps < 1:
        parser.error("--judge-anchor-steps K: K >= 1 rank-loss steps per consistency step")
    args.families, _, cold = RUNGS[args.rung]
    args.arms = args.arms or ["frozen", "outcome_only"]
    hf_logging.disable_progress_bar()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []  # per seed: the arms' summaries, in --arms order
    for seed in range(args.seed, args.seed + args.seeds):
        run = argparse.Namespace(**{**vars(args), "seed": seed})
        if args.start and args.seeds > 1:
            run.start = args.start / f"seed-{seed}"
        with tempfile.TemporaryDirectory(prefix="bigworld-learning-") as tmp:
            work = Path(tmp)
            kept = run.start and (run.start / "start.json").exists()
            start = _kept(run.start) if kept else None
            if start is None:
                start = (prepare_cold if cold else prepare)(run, run.start or work)
                if run.start:
                    (run.start / "start.json").write_text(json.dumps(_json(start)))
            print(f"seed {seed}, start: {json.dumps(start.figures)}")
            results = run_arms(run, work, start)
            runs.append([summarise(results[arm], run) for arm in args.arms])
    summaries = [pool([run[i] for run in runs]) for i in range(len(args.arms))]
    verdicts = verdict(summaries, args.window, args.margin, args.gain)
    comparisons = compare(summaries)
    report = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"Learning, rung {args.rung}: {budget(args)} an arm",
            "figure": headline(summaries, args.window, verdicts),
            "page": "docs/benchmarks/learning.md",
        },
        "args": {k: str(v) for k, v in vars(args).items()},
        "prepare": start.figures,
        "arms": summaries,
        "verdict": verdicts,
        "comparisons": comparisons,
    }
    (args.out / "learning.json").write_text(json.dumps(report, indent=2))
    title = f"bigworld, rung {args.rung}: tiny policy, same seed and wall time"
    plot(summaries, args.out / "learning.png", title)
    print(
        f"{'arm':<21}{'episodes':>9}{'success':>19}{'1st half':>19}{'2nd half':>19}"
        f"{f'first {args.window}':>19}{f'last {args.window}':>19}{'updates':>9}"
    )
    for s in summaries:
        cells = [
            cell(s[k])
            for k in ("success", "first_half", "second_half", "first_window", "last_window")
        ]
        print(f"{s['arm']:<21}{s['episodes']:>9}" + "".join(f"{c:>19}" for c in cells), end="")
        print(f"{s['updates']:>9}")
    for s in summaries:
        print(f"{s['arm']}: per family (first half → second half) {json.dumps(s['per_family'])}")
        if "per_seed" in s:
            distances = [seed["per_distance"] for seed in s["per_seed"]]
            print(f"{s['arm']}: per start distance and seed (first, last window) {distances}")
        else:
            print(f"{s['arm']}: per start distance (first, last window) {s['per_distance']}")
        print(
            f"{s['arm']}: prompt tokens {json.dumps(s['prompt_tokens'])}, "
            f"candidates {json.dumps(s['candidates'])}"
        )
        for key, (_, what) in STEP_SHARES.items():
            print(
                f"{s['arm']}: {what}, first → last window "
                f"{cell(s['first_' + key])} → {cell(s['last_' + key])}"
            )
        if s["flow"]:
            print(f"{s['arm']}: episodes' flow {json.dumps(s['flow'])}")
        if s["forge"]:
            print(f"{s['arm']}: the forge {json.dumps(s['forge'])}")
        for i, seed in enumerate(s.get("per_seed") or [s]):
            if seed["reward_accuracy"]:
                accuracy = json.dumps(
                    {v: [a, seed["reward_votes"][v]] for v, a in seed["reward_accuracy"].items()}
                )
                by_step = json.dumps(seed["reward_by_step"])
                counted = json.dumps(seed["reward_votes_by_step"])
                print(f"{s['arm']}, seed {i + 1}: the reward model's step accuracy [and votes]")
                print(f"  by version {accuracy}; by the kind of step {by_step}, votes {counted}")
        signal = {
            key: f"kept {g['kept']}, sign agrees {cell(g['agree'])}"
            for key, g in s["grouping_signal"].items()
        }
        print(f"{s['arm']}: outcome-only advantage by grouping {json.dumps(signal)}")
        for i, seed in enumerate(s.get("per_seed") or [s]):
            if seed["credit_by_move"]:
                credit = json.dumps(seed["credit_by_move"])
                print(f"{s['arm']}: credit by kind of move, seed {i + 1}: {credit}")
    for line in verdicts:
        print(line)
    for c in comparisons:
        seeds = f"; per seed {c['per_seed']}" if "per_seed" in c else ""
        for key, (_, what) in STEP_SHARES.items():
            if f"{key}_difference" in c:
                seeds += "; {}: {:+.3f} [{:+.3f}, {:+.3f}]".format(what, *c[f"{key}_difference"])
        if "standardised_difference" in c:
            seeds += "; standardised to both arms' mix of start distances: {:+.3f} [{:+.3f}, {:+.3f}]".format(
                *c["standardised_difference"]
            )
        if "far_difference" in c:
            seeds += "; starts {} or more moves away: {:+.3f} [{:+.3f}, {:+.3f}]".format(
                FAR, *c["far_difference"]
            )
        print(
            f"{c['arm']} - {c['base']}: last window {c['difference']:+.3f} "
            f"[{c['low']:+.3f}, {c['high']:+.3f}] (95%, Newcombe): {c['says']}{seeds}"
        )
    print(f"wrote {args.out / 'learning.json'} and {args.out / 'learning.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
