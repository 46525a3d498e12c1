"""Task sampling: a task of a family for an avatar, instantiated against the current state near it.

:func:`sample_task` only returns tasks that do not already hold and that the oracle
(:mod:`world.oracle`) proves solvable; it is a pure function of (world seed, tick, avatar, key)
and the state, so replaying a log draws the same tasks.
"""

from __future__ import annotations

import numpy as np

from world import oracle, rng
from world.errors import TaskError
from world.families import DRAWN_FAMILIES, get_family
from world.oracle import DEFAULT_BUDGET
from world.snapshot import Snapshot
from world.state import World
from world.tasks import Task, goal_met


def instantiate(
    world: World,
    avatar_id: str,
    family: str,
    gen: np.random.Generator,
    *,
    budget: int = DEFAULT_BUDGET,
    hops: int = 1,
) -> Task | None:
    """A task of ``family`` for the avatar in the current state, or None if none is found.

    The task does not hold yet and the oracle has found a plan for it within ``budget``.
    ``hops`` is go_to's only: its target lies exactly that many ``go to`` moves away.
    """
    found = get_family(family)
    snap = Snapshot.of(world, avatar_id, things=found.reads_things)
    candidates = list(found.candidates(snap, hops))
    order = [int(i) for i in gen.permutation(len(candidates))]
    tries = 0
    for index in order:
        task = Task.make(family, candidates[int(index)])
        if goal_met(world, task, avatar_id):
            continue
        tries += 1
        if oracle.plan_in(snap, task, budget=budget) is not None:
            return task
        if tries >= found.tries:
            break
    return None


def sample_task(
    world: World,
    avatar_id: str,
    *,
    key: str,
    family: str | None = None,
    budget: int = DEFAULT_BUDGET,
    hops: int = 1,
) -> Task:
    """A task for the avatar, a pure function of (world seed, tick, avatar, key) and the state.

    With ``family`` None, the families of DRAWN_FAMILIES are tried in a random order. ``hops``
    applies to go_to alone (its target's distance in ``go to`` moves). Raises TaskError when
    no task of the family (or of any family) can be made here now.
    """
    if family is not None:
        get_family(family)  # an unknown family is a TaskError before anything is drawn
    if hops < 1:
        raise TaskError(f"expected hops >= 1, got {hops}")
    gen = rng.rng(world.seed, world.tick, f"avatar:{avatar_id}", f"task:{key}")
    families = (
        [family]
        if family
        else [DRAWN_FAMILIES[int(i)] for i in gen.permutation(len(DRAWN_FAMILIES))]
    )
    for name in families:
        task = instantiate(world, avatar_id, name, gen, budget=budget, hops=hops)
        if task is not None:
            return task
    raise TaskError(f"expected a solvable {family or 'task'} near avatar {avatar_id!r}, found none")
