"""The task pool and the draw at episode begin.

The pool holds active, pending and retired tasks with their lineage. An episode begin that
names no task draws from it: every ``probe_every``-th draw takes a task of the fixed probe set
(to measure forgetting); otherwise, with probability ``fresh_probability``, a fresh task is
sampled for the pool; otherwise pending variants get their trial rollouts first, then active
tasks are drawn with weights that prefer an informative accuracy (inside (α_low, α_high)) or
one not yet measured. Tasks repeat across episodes: the trainer groups rollouts by task id.

Once the forge's curriculum has led the pool down to go_to (a live go_to variant the forge
made: see :func:`rung`), a draw without a family follows it: besides probes and pending trials
it considers only go_to tasks, and where none is usable from the avatar's place the server
samples a fresh go_to near the avatar at the rung's hops. A go_to is a fixed target and avatars
move, so without this a learner led down to go_to would rarely get to play it.

The order of candidates is a pure function of (world seed, draw number, task ids) and the
pool; the server checks candidates with the oracle in that order (from the drawing avatar's
current state) and takes the first it can solve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forge.config import ForgeConfig
from world import rng
from world.entities import region_of
from world.tasks import Task

PROBE, FRESH, POOL = "probe", "fresh", "pool"


@dataclass(frozen=True)
class PoolTask:
    """A task in the pool, as the draw and the forge cycle see it."""

    id: str
    family: str
    params: dict[str, Any]
    status: str = "active"  # active | pending | retired
    origin: str = "sampled"  # sampled | requested | probe | harder | easier
    probe: bool = False
    parent_id: str | None = None
    accuracy: float | None = None  # measured at the last cycle over the window
    rollouts: int = 0  # ended rollouts in that window
    difficulty: int | None = None  # oracle plan length when admitted
    begun: int = 0  # episodes begun (open or ended): pending tasks' trials handed out
    baseline: float | None = None  # pending: the parent's accuracy when this was proposed
    last_proposal_cycle: int | None = None  # active: the cycle of its last proposal
    created_tick: int = 0  # the tick it joined the pool

    @property
    def task(self) -> Task:
        return Task.from_spec({"family": self.family, "params": self.params})


@dataclass(frozen=True)
class Rung:
    """The go_to rung the forge's curriculum has led the pool to."""

    hops: int
    from_family: str | None  # the family the curriculum came down from, if on record
    task_id: str  # the go_to variant that defines it


CURRICULUM_ORIGINS = ("easier", "harder")  # variants the forge made (a sample is no rung)


def rung(pool: Sequence[PoolTask]) -> Rung | None:
    """The pool's current go_to rung: the newest go_to variant the forge made (origin easier
    or harder) that its trial accepted (active), else the newest one still on trial
    (pending); None when the curriculum has not led the pool to go_to. Newest is the latest
    ``created_tick``, ties broken by id, so the answer is a pure function of the pool."""
    made = [
        t
        for t in pool
        if t.family == "go_to"
        and t.origin in CURRICULUM_ORIGINS
        and t.status in ("active", "pending")
        and not t.probe
    ]
    if not made:
        return None
    newest = max(made, key=lambda t: (t.status == "active", t.created_tick, t.id))
    return Rung(
        hops=int(newest.params["hops"]),
        from_family=newest.params.get("from_family"),
        task_id=newest.id,
    )


def on_rung(task: PoolTask, current: Rung | None) -> bool:
    """Whether a draw that follows the curriculum's rung ``current`` may hand out ``task``:
    any task without a rung; with one, probes, pending trials and go_to tasks only."""
    return current is None or task.probe or task.status == "pending" or task.family == "go_to"


def draw_mode(config: ForgeConfig, *, seed: int, draw: int, have_probes: bool) -> str:
    """What draw number ``draw`` (1, 2, ...) takes: a probe, a fresh sample or the pool."""
    if have_probes and config.probe_every and draw % config.probe_every == 0:
        return PROBE
    if rng.uniform(seed, draw, "forge", "draw:fresh") < config.fresh_probability:
        return FRESH
    return POOL


def weight(task: PoolTask, config: ForgeConfig) -> float:
    """How much the draw prefers an active task: informative > unmeasured > settled."""
    if task.accuracy is None or task.rollouts < config.min_rollouts:
        return config.weight_unmeasured
    if config.alpha_low < task.accuracy < config.alpha_high:
        return config.weight_informative
    return config.weight_settled


def candidates(
    pool: Sequence[PoolTask],
    mode: str,
    config: ForgeConfig,
    *,
    seed: int,
    draw: int,
    current: Rung | None = None,
) -> list[PoolTask]:
    """Pool tasks to try, best first, for a draw of ``mode`` (PROBE or POOL); with the
    curriculum's rung ``current``, only tasks :func:`on_rung` admits."""
    pool = [t for t in pool if on_rung(t, current)]
    if mode == PROBE:
        probes = [t for t in pool if t.probe and t.status == "active"]
        return sorted(probes, key=lambda t: (t.begun, _key(seed, draw, t.id)))
    pending = sorted(
        (t for t in pool if t.status == "pending" and t.begun < config.trial_size),
        key=lambda t: (t.begun, t.id),
    )
    active = [t for t in pool if t.status == "active" and not t.probe]
    # Weighted sampling without replacement (Efraimidis–Spirakis): the largest u ** (1 / w).
    active.sort(key=lambda t: -(_key(seed, draw, t.id) ** (1.0 / weight(t, config))))
    return pending + active


def near(task: PoolTask, avatar_place: str) -> bool:
    """Whether the places a task names lie in the avatar's region or one next to it (the
    oracle plans only there); tasks without places (craft, cooperate) always qualify. A task
    that spells out its way from a ``start`` (follow) qualifies only there."""
    if task.params.get("start", avatar_place) != avatar_place:
        return False
    ax, ay = region_of(avatar_place)
    for key in ("place", "resource_place"):
        if key in task.params:
            try:
                px, py = region_of(task.params[key])
            except ValueError:  # not a place id: nothing to plan
                return False
            if abs(px - ax) + abs(py - ay) > 1:
                return False
    return True


def _key(seed: int, draw: int, task_id: str) -> float:
    return max(rng.uniform(seed, draw, f"task:{task_id}", "draw"), 1e-12)
