"""What can a step signal teach the cold tiny policy, at most? Trail decisions, perfect rewards.

Records decisions of ``trail`` walks in a world in memory, each as the policy agent sees it:
its prompt (``policy_prompt``, with the recent steps) and its candidates (``rank_completion``
of every admissible action), the signposted move being the right answer. A walk follows the
signpost on ``--follow`` of its steps and takes an admissible action at random otherwise, so
that it also stands where wrong moves lead. Then a fresh tiny policy (the learning bench's
cold start) trains on them on-policy through the trainer's own learner (``Learner.ppo_update``
with ``TrainConfig``'s defaults): each update it samples its answer to ``--per-update`` new
decisions at its temperature and earns +1 for the signposted move and -1 for anything else,
standardised over the update. That is a step signal that is never wrong and reaches every
decision, which no arm's trainer gets (an arm's votes reach it through its groups, mixed with
outcomes), so the policy's held-out p(right) here bounds what step credit can teach it in as
many decisions.

Reports held-out p(right) as the updates go, by kind of decision (``winning``: the signposted
move reaches the goal; ``back``: it goes back where the last move came from; ``onward``: the
rest), and against a rule that reads no signpost: take the first ``go to`` listed. The
``--order`` of the listed actions is the world's, shuffled for each decision, or the world's
with the signposted move put first (a rule the policy can learn by position alone, as the
``waymark`` family lists it). Writes its figures into ``step-ceiling.json`` in ``--out``
(default ``docs/benchmarks``) under ``runs``, one run per order (a run replaces its order's)::

    .venv/bin/python bench/step_ceiling.py                     # some 5 minutes on 2 cores
    .venv/bin/python bench/step_ceiling.py --order shuffled
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from results import provenance  # noqa: E402

from agents.models.tiny import (  # noqa: E402
    ModelSpec,
    candidate_scores,
    encode_candidates,
    init_model,
)
from agents.prompts import Turn, policy_prompt, rank_completion  # noqa: E402
from agents.train.config import TrainConfig  # noqa: E402
from agents.train.learner import Learner, Sample  # noqa: E402
from agents.train.rewards import EPS, standardise  # noqa: E402
from world import episodes  # noqa: E402
from world.episodes import Episode  # noqa: E402
from world.errors import TaskError  # noqa: E402
from world.families.trail import WAYMARK  # noqa: E402
from world.sampling import sample_task  # noqa: E402
from world.state import ORIGIN, MemoryBackend, World  # noqa: E402

ORDERS = ("world", "shuffled", "signposted-first")
KINDS = ("winning", "back", "onward")
AVATAR = "a"
MOVE = "go to "


@dataclass(frozen=True)
class Decision:
    prompt: str
    candidates: tuple[str, ...]
    right: int  # the signposted move's index
    first_move: int  # the index of the first "go to" listed
    kind: str  # KINDS


class Walks:
    """A world in memory, one committed transaction per call, as the server runs them."""

    def __init__(self, seed: int, radius: int = 2) -> None:
        self.backend = MemoryBackend(seed)
        with self.tx() as world:
            world.add_avatar(AVATAR, "Alice", ORIGIN)
            for x in range(-radius, radius + 1):
                for y in range(-radius, radius + 1):
                    world.region(x, y)

    @contextmanager
    def tx(self) -> Iterator[World]:
        """One transaction: a fresh World over the backend, committed on leaving."""
        world = World(self.backend)
        yield world
        world.commit()


def record(seed: int, n: int, follow: float, order: str) -> list[Decision]:
    """``n`` decisions of trail walks in a world of ``seed``, listed in ``order``."""
    walks, rng, out, key = Walks(seed), random.Random(seed), [], 0
    while len(out) < n:
        key += 1
        hops = rng.randint(1, 4)
        try:
            with walks.tx() as world:
                task = sample_task(world, AVATAR, key=f"t{key}", family="trail", hops=hops)
        except TaskError:  # no trail of that length near the avatar: draw another
            continue
        with walks.tx() as world:
            begun = episodes.begin(world, AVATAR, task, key=None, family="trail", draw="fresh")
        observation = begun.text.partition(episodes.TASK_PROMPT)[0]
        admissible, history = list(begun.admissible), []
        episode = Episode(key, AVATAR, task.id, "trail", budget=2 * hops, last_step=0)
        came_from: str | None = None
        for index in range(1, episode.budget + 1):
            with walks.tx() as world:
                move = WAYMARK.guide(world, task.params, AVATAR).lead  # the signposted move
                here = world.avatar(AVATAR).place
                target = world.place(here).exits.get((move or "").removeprefix(MOVE))
                goal = target is not None and world.place(target).name == task.params["place_name"]
            if move is None or move not in admissible:
                break
            shown = list(admissible)
            if order == "shuffled":
                rng.shuffle(shown)
            elif order == "signposted-first":
                shown.insert(0, shown.pop(shown.index(move)))
            kind = "winning" if goal else "back" if target == came_from else "onward"
            out.append(
                Decision(
                    policy_prompt(task.text, history, observation, shown),
                    tuple(rank_completion(k + 1, a) for k, a in enumerate(shown)),
                    shown.index(move),
                    next(k for k, a in enumerate(shown) if a.startswith(MOVE)),
                    kind,
                )
            )
            action = move if rng.random() < follow else rng.choice(admissible)
            with walks.tx() as world:
                taken = episodes.advance(world, episode, task, action, index)
                moved_to = world.avatar(AVATAR).place
            if taken.done:
                break
            came_from = here if moved_to != here else came_from
            history.append(Turn(action, taken.result.observation))
            episode, observation = taken.episode, taken.result.observation
            admissible = list(taken.result.admissible)
    return out[:n]


class Policy:
    """The cold tiny policy under training, and its sampling distribution."""

    def __init__(self, folder: Path, config: TrainConfig, temperature: float) -> None:
        self.temperature = temperature
        self.learner = Learner(
            folder, config, lr=config.lr, version="0", resolve=lambda v: folder, reference="0"
        )

    @torch.no_grad()
    def probs(self, d: Decision) -> np.ndarray:
        learner = self.learner
        scores = candidate_scores(
            learner.model, *encode_candidates(learner.tokenizer, d.prompt, d.candidates)
        )
        return torch.softmax(scores.double() / self.temperature, 0).numpy()

    def update(self, decisions: list[Decision], rng: np.random.Generator) -> dict[str, float]:
        """One on-policy update from perfect rewards; the share answered right."""
        chosen = [int(rng.choice(len(p), p=p / p.sum())) for p in map(self.probs, decisions)]
        rewards = [1.0 if k == d.right else -1.0 for k, d in zip(chosen, decisions, strict=True)]
        version = self.learner.version
        samples = [
            Sample(d.prompt, d.candidates[k], a, version, self.temperature, d.candidates, k)
            for d, k, a in zip(decisions, chosen, standardise(rewards), strict=True)
            if abs(a) > EPS
        ]
        started = time.perf_counter()
        stats = self.learner.ppo_update(samples)
        self.learner.version = str(int(version) + 1)  # the next samples are the new weights'
        return {
            "right": sum(r > 0 for r in rewards) / len(rewards),
            "update_s": time.perf_counter() - started,
            "kl": stats.kl,
        }

    def measure(self, decisions: list[Decision]) -> dict[str, Any]:
        """Mean p(right) and p(first go to) over ``decisions``, overall and by kind."""
        probs = [self.probs(d) for d in decisions]

        def over(kind: str | None) -> dict[str, float] | None:
            picked = [
                (d, p) for d, p in zip(decisions, probs, strict=True) if kind in (None, d.kind)
            ]
            if not picked:
                return None
            return {
                "p_right": round(float(np.mean([p[d.right] for d, p in picked])), 4),
                "p_first_move": round(float(np.mean([p[d.first_move] for d, p in picked])), 4),
                "first_move_right": round(
                    float(np.mean([d.first_move == d.right for d, _ in picked])), 4
                ),
                "n": len(picked),
            }

        return {"all": over(None)} | {kind: over(kind) for kind in KINDS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", choices=ORDERS, default="world")
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--per-update", type=int, default=64, help="decisions an update samples")
    parser.add_argument("--held-out", type=int, default=150, help="decisions from another world")
    parser.add_argument("--follow", type=float, default=0.4, help="walks follow signposts so often")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--every", type=int, default=5, help="measure after this many updates")
    parser.add_argument("--seed", type=int, default=0, help="the weights' and the sampling's")
    parser.add_argument("--world-seed", type=int, default=11, help="held out: this + 1")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the learning bench's agents and trainer
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    train = record(args.world_seed, args.updates * args.per_update, args.follow, args.order)
    held = record(args.world_seed + 1, args.held_out, args.follow, args.order)
    spec = ModelSpec(
        hidden_size=args.hidden_size,
        intermediate_size=3 * args.hidden_size,
        num_hidden_layers=args.layers,
        seed=args.seed,
    )
    config = TrainConfig(device="cpu", lr=args.lr, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    curve = []
    with tempfile.TemporaryDirectory() as tmp:
        policy = Policy(init_model("policy", Path(tmp) / "policy", spec), config, args.temperature)
        curve.append({"updates": 0, "decisions": 0, "held_out": policy.measure(held)})
        for u in range(1, args.updates + 1):
            batch = train[(u - 1) * args.per_update : u * args.per_update]
            figures = policy.update(batch, rng)
            if u % args.every == 0 or u == args.updates:
                point = {"updates": u, "decisions": u * args.per_update}
                point |= {k: round(v, 3) for k, v in figures.items()}
                point["held_out"] = policy.measure(held)
                curve.append(point)
                every = point["held_out"]["all"]
                print(
                    f"update {u:3d} ({u * args.per_update} decisions): held-out p(right) "
                    f"{every['p_right']:.3f}, p(first go to) {every['p_first_move']:.3f}, "
                    f"update {figures['update_s']:.1f} s",
                    flush=True,
                )
    end = curve[-1]["held_out"]
    result = provenance() | {
        "args": {k: str(v) for k, v in vars(args).items()},
        "train_decisions": len(train),
        "train_kinds": {kind: sum(d.kind == kind for d in train) for kind in KINDS},
        "first_move_right_train": round(
            float(np.mean([d.first_move == d.right for d in train])), 4
        ),
        "curve": curve,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(
        f"held out after {args.updates} updates: p(right) {end['all']['p_right']:.3f} "
        f"(winning {end['winning']['p_right']:.3f}, back {end['back']['p_right']:.3f}, onward "
        f"{end['onward']['p_right']:.3f}); the first go to listed is right on "
        f"{end['all']['first_move_right']:.3f} of them, and gets {end['all']['p_first_move']:.3f}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "step-ceiling.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    runs = kept.get("runs", {}) | {args.order: result}
    path.write_text(json.dumps(provenance() | {"runs": runs}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
