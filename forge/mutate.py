"""The programmatic rewriter: harder or easier variants of a task, per family.

Variants change one thing about a task, along the axes each family's parameters have:

- place families (pick/clean/heat/cool-and-place, pick-two): another receptacle (farther,
  closed, in the next region) or another object type (rarer, farther away), or a step along
  the family ladder (pick-and-place ↔ clean/heat/cool-then-place, pick-two-and-place);
- examine-in-light: another object type or another lamp;
- craft: another item, with a longer or shorter recipe chain;
- gather-and-deliver: one unit more or fewer, another resource, another receptacle (across
  regions);
- cooperate: another object type to hand over.

Candidates come from the world's own candidate generator near the avatar that last rolled the
task out, so every parameter names something that exists. A cheap estimate of each variant's
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
from world.candidates import STATION_FOR, candidates
from world.entities import Thing
from world.errors import TaskError, WorldError
from world.snapshot import Snapshot
from world.state import World
from world.tasks import PLACE_CONDITION, Task, goal_met

HARDER, EASIER = "harder", "easier"
LADDER: dict[str, dict[str, tuple[str, ...]]] = {
    HARDER: {
        "pick_and_place": (
            "clean_and_place",
            "heat_and_place",
            "cool_and_place",
            "pick_two_and_place",
        )
    },
    EASIER: {
        f: ("pick_and_place",)
        for f in ("clean_and_place", "heat_and_place", "cool_and_place", "pick_two_and_place")
    },  # fmt: skip
}


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
    p, family = task.params, task.family
    found: list[dict[str, Any]] = []
    families = [family]
    shared: tuple[str, ...]
    if family in PLACE_CONDITION:
        shared = ("object", "receptacle")
        families += [*LADDER[HARDER].get(family, ()), *LADDER[EASIER].get(family, ())]
    elif family == "examine_in_light":
        shared = ("object", "lamp")
    elif family == "gather_and_deliver":
        shared = ("resource", "receptacle")
        for units in (p["units"] - 1, p["units"] + 1):
            if units >= 1:
                found.append({"family": family, "params": {**p, "units": units}})
    elif family == "cooperate":
        shared = ("avatar",)
    else:  # craft: any other item
        shared = ()
    for c in candidates(snap, family):
        if not shared or any(c.get(k) == p.get(k) for k in shared):
            found.append({"family": family, "params": c})
    for other in families[1:]:  # the ladder keeps every parameter
        found.append({"family": other, "params": p})
    out: dict[str, Task] = {}
    for spec in found:
        try:
            made = Task.from_spec(spec)
        except TaskError:
            continue
        if made.id != task.id:
            out.setdefault(made.id, made)
    return list(out.values())


def estimate(snap: Snapshot, task: Task) -> float:
    """A cheap guess at the plan length (moves, opens, station trips); inf if it cannot work."""
    p, family = task.params, task.family
    if family in PLACE_CONDITION:
        target = snap.things.get(p["receptacle"])
        if target is None:
            return math.inf
        costs = sorted(_fetch(snap, t, p["place"]) for t in _objects(snap, p["object"], target.id))
        need = 2 if family == "pick_two_and_place" else 1
        if len(costs) < need:
            return math.inf
        extra = 2.0 if family in STATION_FOR else 0.0
        return sum(costs[:need]) + need * (1 + extra) + snap.closed(target.id)
    if family == "examine_in_light":
        lamp = snap.things.get(p["lamp"])
        costs = [_fetch(snap, t, p["place"]) for t in _objects(snap, p["object"], None)]
        if lamp is None or not costs:
            return math.inf
        return min(costs) + (0 if lamp.attrs.get("on") else 1)
    if family == "craft":
        recipe = snap.rules.recipes.get(p["item"])
        if recipe is None:
            return math.inf
        return 3.0 * snap.rules.recipe_depth(p["item"]) + sum(recipe.inputs.values())
    if family == "gather_and_deliver":
        target = snap.things.get(p["receptacle"])
        if target is None or p["resource_place"] not in snap.places:
            return math.inf
        here = snap.me.place
        return (
            snap.dist(here, p["resource_place"])
            + p["units"]
            + snap.dist(p["resource_place"], p["place"])
            + snap.closed(target.id)
            + 1
        )
    other = snap.avatars.get(p["avatar"])  # cooperate
    costs = (
        [_fetch(snap, t, other.place) for t in _objects(snap, p["object"], None)] if other else []
    )
    return min(costs) + 1 if costs else math.inf


def _objects(snap: Snapshot, type_name: str, not_in: int | None) -> Iterable[Thing]:
    for thing in (*snap.held(), *snap.loose(type_name)):
        if thing.type == type_name and (not_in is None or thing.container != not_in):
            yield thing


def _fetch(snap: Snapshot, thing: Thing, goal: str) -> float:
    """Moves to reach a thing (opening its container), then carry it to ``goal``."""
    start = snap.where(thing)
    return snap.dist(snap.me.place, start) + snap.closed(thing.container) + snap.dist(start, goal)


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
        snap = Snapshot.of(world, avatar_id, _places(task))
    except (ValueError, WorldError):  # a task naming no real place has no variants
        return None, []
    own = estimate(snap, task)
    base = parent_length if parent_length is not None else own
    sign = 1 if direction == HARDER else -1
    scored = []
    for variant in variants(snap, task):
        if variant.id in exclude:
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
        return None, attempts
    # The smallest step in the asked direction: a gradual curriculum.
    best = min(fits, key=lambda a: abs((a.plan_length or 0) - base))
    return best, attempts


def check(world: World, task: Task, avatar_id: str, budget: int) -> int | None:
    """The oracle's plan length for ``task`` from the current state (0: goal holds already;
    None: no plan, or the task names places that are no place ids of this world)."""
    try:
        found = oracle.plan(world, task, avatar_id, budget=budget)
    except (ValueError, WorldError):
        return None
    return len(found) if found is not None else None


def _plan_length(
    world: World, snap: Snapshot, task: Task, avatar_id: str, budget: int
) -> int | None:
    if goal_met(world, task, avatar_id):
        return 0
    found = oracle.plan_in(snap, task, budget=budget)
    return len(found) if found is not None else None


def _places(task: Task) -> tuple[str, ...]:
    return tuple(task.params[k] for k in ("place", "resource_place") if k in task.params)
