"""The programmatic rewriter: harder or easier variants of a task, per family.

Variants change one thing about a task, along the axes its family's parameters have: each
family lists its neighbours (:meth:`world.families.family.Family.neighbours`), harder and easier
alike, and estimates their plan lengths (:meth:`~world.families.family.Family.estimate`).

Below and above them runs the curriculum (:func:`descend`, :func:`climb`): the easier
neighbour of a family's easiest task is a go_to, and the harder neighbour of a go_to at the
top hop count is a task of the family the curriculum came down from.

Neighbours come from the family's own candidates near the avatar that last rolled the task
out, so every parameter names something that exists. A cheap estimate of each variant's
plan length orders them (nearest step in the asked direction first); the oracle then plans up
to ``tries`` of them from the current state, and the variant whose real plan length is the
smallest step beyond the parent's (longer for harder, shorter for easier) wins.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from world import oracle
from world.errors import TaskError, WorldError
from world.families import DRAWN_FAMILIES, get_family
from world.families.go_to import GO_TO
from world.snapshot import Snapshot
from world.state import World
from world.tasks import Task, goal_met

HARDER, EASIER = "harder", "easier"
# What a go_to climbs back to when no family is on record: the bottom of the place ladder.
CLIMB_FAMILY = "pick_and_place"


@dataclass(frozen=True)
class Attempt:
    """One variant the oracle was asked about: its spec, estimate and plan length (None:
    no plan within the budget; 0: its goal already holds)."""

    task: Task
    estimate: float
    plan_length: int | None

    def evidence(self) -> dict[str, Any]:
        return {
            "id": self.task.id,
            "spec": self.task.spec(),
            "estimate": self.estimate,
            "plan_length": self.plan_length,
        }


def variants(snap: Snapshot, task: Task) -> list[Task]:
    """Every one-change variant of ``task`` near the snapshot's avatar (not yet checked)."""
    return _unique(task, get_family(task.family).neighbours(snap, task.params))


def _unique(task: Task, found: Iterable[dict[str, Any]]) -> list[Task]:
    out: dict[str, Task] = {}
    for spec in found:
        try:
            made = Task.from_spec(spec)
        except TaskError:
            continue
        if made.id != task.id:
            out.setdefault(made.id, made)
    return list(out.values())


def budget_step(parent: Task, variant: Task, direction: str) -> bool:
    """Whether ``variant`` is ``parent`` (a go_to) with only its budget changed, looser for
    EASIER or tighter for HARDER."""
    if parent.family != "go_to" or variant.family != "go_to":
        return False
    p, v = parent.params, variant.params
    old, new = p.get("budget", 2 * p["hops"]), v.get("budget", 2 * v["hops"])
    same = {k: x for k, x in p.items() if k != "budget"} == {
        k: x for k, x in v.items() if k != "budget"
    }
    return same and (new > old if direction == EASIER else new < old)


def estimate(snap: Snapshot, task: Task) -> float:
    """A cheap guess at the plan length, the family's own; inf if it cannot work."""
    return get_family(task.family).estimate(snap, task.params)


def propose(
    world: World,
    task: Task,
    avatar_id: str,
    direction: str,
    *,
    parent_length: float | None,
    gen: np.random.Generator,
    tries: int,
    budget: int,
    exclude: Container[str],
) -> tuple[Attempt | None, list[Attempt]]:
    """The chosen variant (or None) and every attempt the oracle made, in order.

    ``parent_length`` is the parent's plan length from here now (or its recorded difficulty);
    None falls back to the parent's own estimate. A variant qualifies if the oracle plans it
    (its goal does not already hold) and its plan is longer (harder) or shorter (easier).
    """
    try:
        snap = Snapshot.of(world, avatar_id, task.places)
    except (ValueError, WorldError):  # a task naming no real place has no variants
        return None, []
    own = estimate(snap, task)
    base = parent_length if parent_length is not None else own
    sign = 1 if direction == HARDER else -1
    scored = []
    for variant in variants(snap, task):
        if variant.id in exclude:
            continue
        if variant.family == "go_to" and task.family == "go_to":
            # A go_to keeping its target changes only its budget: only the asked way counts.
            same = variant.params["place"] == task.params["place"]
            if same and not budget_step(task, variant, direction):
                continue
        guess = estimate(snap, variant)
        step = sign * (guess - own) if math.isfinite(own) else 0.0
        if math.isinf(guess) or math.isnan(step) or step < 0:
            continue
        # Estimated steps in the asked direction first, smallest first; equal estimates last
        # (the estimate is rough: the oracle's plan length decides).
        scored.append((step == 0, step, float(gen.random()), guess, variant))
    scored.sort(key=lambda s: s[:3])
    attempts = []
    for _, _, _, guess, variant in scored[:tries]:
        length = _plan_length(world, snap, variant, avatar_id, budget)
        attempts.append(Attempt(variant, guess, length))
    fits = [
        a
        for a in attempts
        if a.plan_length
        and math.isfinite(base)
        and (a.plan_length > base if direction == HARDER else a.plan_length < base)
    ]
    if not fits:
        # A go_to with no target a hop nearer (farther) gets a looser (tighter) budget instead.
        budgets = [a for a in attempts if a.plan_length and budget_step(task, a.task, direction)]
        return (budgets[0] if budgets else None), attempts
    # The smallest step in the asked direction: a gradual curriculum.
    best = min(fits, key=lambda a: abs((a.plan_length or 0) - base))
    return best, attempts


def moves(world: World, task: Task, avatar_id: str, budget: int) -> int | None:
    """How many ``go to`` moves the oracle's plan for ``task`` takes from here now."""
    try:
        found = oracle.plan(world, task, avatar_id, budget=budget)
    except (ValueError, WorldError):
        return None
    return None if found is None else sum(a.startswith("go to ") for a in found.actions)


def descend(
    world: World,
    task: Task,
    avatar_id: str,
    *,
    hops: int,
    gen: np.random.Generator,
    tries: int,
    budget: int,
    exclude: Container[str],
) -> tuple[Attempt | None, list[Attempt]]:
    """The curriculum's step down from ``task`` (of any family but go_to): a go_to at
    ``hops`` moves from the avatar, or at fewer where none is, down to one hop. The target is
    the place ``task`` names when it lies at that distance (the first leg of the failing task),
    else one drawn by ``gen``; it carries ``from_family`` to climb back to."""
    try:
        snap = Snapshot.of(world, avatar_id, task.places)
    except (ValueError, WorldError):
        return None, []
    attempts: list[Attempt] = []
    own = task.params.get("place")
    for rung in range(max(1, hops), 0, -1):
        found = [
            Task.make("go_to", {**c, "from_family": task.family})
            for c in GO_TO.candidates(snap, rung)
        ]
        found = [t for t in found if t.id not in exclude]
        order = [int(i) for i in gen.permutation(len(found))]
        ranked = sorted(
            (found[i] for i in order), key=lambda t: t.params["place"] != own
        )  # stable: the failing task's own place first, then gen's order
        for variant in ranked[:tries]:
            length = _plan_length(world, snap, variant, avatar_id, budget)
            attempts.append(Attempt(variant, float(rung), length))
            if length:
                return attempts[-1], attempts
    return None, attempts


def climb(
    world: World,
    task: Task,
    avatar_id: str,
    *,
    gen: np.random.Generator,
    tries: int,
    budget: int,
    exclude: Container[str],
) -> tuple[Attempt | None, list[Attempt]]:
    """The curriculum's step up from a mastered go_to: the task of its ``from_family`` (else
    CLIMB_FAMILY) near the avatar with the shortest oracle plan among the ``tries`` that
    estimate shortest."""
    family = task.params.get("from_family", CLIMB_FAMILY)
    if family not in DRAWN_FAMILIES:
        return None, []
    try:
        snap = Snapshot.of(world, avatar_id)
    except (ValueError, WorldError):
        return None, []
    made: dict[str, Task] = {}
    for params in get_family(family).candidates(snap, 1):
        try:
            variant = Task.make(family, params)
        except TaskError:
            continue
        if variant.id not in exclude:
            made.setdefault(variant.id, variant)
    scored = [(estimate(snap, t), float(gen.random()), t) for t in made.values()]
    scored = sorted((s for s in scored if math.isfinite(s[0])), key=lambda s: s[:2])
    attempts = []
    for guess, _, variant in scored[:tries]:
        attempts.append(
            Attempt(variant, guess, _plan_length(world, snap, variant, avatar_id, budget))
        )
    solved = [a for a in attempts if a.plan_length]
    return (min(solved, key=lambda a: a.plan_length or 0) if solved else None), attempts


def check(world: World, task: Task, avatar_id: str, budget: int) -> int | None:
    """The oracle's plan length for ``task`` from the current state (0: goal holds already;
    None: no plan, the task names places that are no place ids of this world, or it is a
    go_to whose target lies farther than its rung's ``hops``)."""
    try:
        found = oracle.plan(world, task, avatar_id, budget=budget)
    except (ValueError, WorldError):
        return None
    return _on_rung(task, len(found)) if found is not None else None


def _on_rung(task: Task, length: int) -> int | None:
    """``length``, or None for a go_to whose target is more than ``hops`` moves away: a rung
    of the curriculum is handed out only where it is no harder than its hops say."""
    if task.family == "go_to" and length > task.params["hops"]:
        return None
    return length


def _plan_length(
    world: World, snap: Snapshot, task: Task, avatar_id: str, budget: int
) -> int | None:
    if goal_met(world, task, avatar_id):
        return 0
    found = oracle.plan_in(snap, task, budget=budget)
    return _on_rung(task, len(found)) if found is not None else None
