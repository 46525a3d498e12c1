"""go_to: walk to a named place. The bottom rung of the forge's curriculum.

A go_to is never drawn for "any family": it is asked for by name, or proposed by the forge when
a family is hopeless (its easiest task steps down to a go_to carrying ``from_family``, which it
climbs back to once mastered). Its difficulty is ``hops``, the number of ``go to`` moves to the
target, and its own step budget (2 × hops unless the forge loosened or tightened it).

Plans are **shortest**: the breadth-first path of ``go to`` moves to the place.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from world.families.family import Family, Params, Spec, avatar_or_none, place_names, where
from world.rehearsal import Plan, Rehearsal, build_best
from world.snapshot import Snapshot
from world.state import World


@dataclass(frozen=True, eq=False)
class GoTo(Family):
    def describe(self, p: Params) -> str:
        return f"go to {where(p['place_name'], p.get('direction'))}"

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        avatar = avatar_or_none(world, avatar_id)
        return avatar is not None and avatar.place == p["place"]

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        """Places exactly ``hops`` moves away whose last move is ``go to`` their own name (a
        road is labelled by its direction, not by the hub it leads to), so that the move that
        finishes a one-hop go_to is word for word among the admissible actions."""
        here = snap.me.place
        for place in sorted(snap.places):
            path = snap.path(here, place)
            if path is None or len(path) != hops or path[-1] != snap.places[place].name:
                continue
            yield {**place_names(snap, place), "hops": hops, "budget": 2 * hops}

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        place = p["place"]

        def build(sim: Rehearsal) -> None:
            sim.goto(place)

        return build_best(
            snap, self.goal_of(p), [(snap.dist(snap.me.place, place), build)], budget, 1
        )

    def estimate(self, snap: Snapshot, p: Params) -> float:
        # A rung's difficulty is its hops: the forge hands it out only within them.
        reachable = math.isfinite(snap.dist(snap.me.place, p["place"]))
        return float(p["hops"]) if reachable else math.inf

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Targets a hop nearer or farther (with their default budgets), and the same target
        with the budget doubled or halved (never below the hops)."""
        keep = {"from_family": p["from_family"]} if "from_family" in p else {}
        for hops in (p["hops"] - 1, p["hops"] + 1):
            if hops >= 1:
                for c in self.candidates(snap, hops):
                    yield {"family": self.name, "params": {**c, **keep}}
        budget = p.get("budget", 2 * p["hops"])
        for other in (2 * budget, max(p["hops"], budget // 2)):
            if other != budget:
                yield {"family": self.name, "params": {**p, "budget": other}}


GO_TO = GoTo(
    name="go_to",
    params={"place": str, "place_name": str, "hops": int},
    # budget: the task's own step budget; from_family: the family a forge curriculum came
    # down from, which it climbs back to once this rung is mastered.
    optional={"direction": str, "budget": int, "from_family": str},
    drawn=False,
    hopped=True,
    reads_things=False,
)
