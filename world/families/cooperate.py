"""cooperate: bring an object of a type to another avatar and give it to them.

Plans are **shortest** over every usable object in scope: fetch it, walk to where the other
avatar stands now, give it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from world.actions import Action
from world.families.family import (
    Family,
    Params,
    Spec,
    article,
    fetch_estimate,
    objects,
    types_near,
    units,
)
from world.rehearsal import Builder, Plan, Rehearsal, build_best, fetch_cost
from world.snapshot import Snapshot
from world.state import World


@dataclass(frozen=True, eq=False)
class Cooperate(Family):
    def describe(self, p: Params) -> str:
        return f"bring {article(p['object'])} to {p['avatar_name']} and give it to them"

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        return units(world.peek_inventory(p["avatar"]), p["object"]) > p["baseline"]

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        for other in sorted(snap.avatars.values(), key=lambda a: a.id):
            if other.id == snap.avatar_id or len(snap.held(other.id)) >= snap.rules.avatar_capacity:
                continue  # nobody can hand a thing to full hands
            theirs: Counter[str] = Counter()
            for thing in snap.held(other.id):
                theirs[thing.type] += thing.quantity
            for type_name in types_near(snap):
                yield {
                    "object": type_name,
                    "avatar": other.id,
                    "avatar_name": other.name,
                    "baseline": theirs[type_name],
                }

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        other = snap.avatars.get(p["avatar"])
        if other is None or other.id == snap.avatar_id:
            return None
        options: list[tuple[float, Builder]] = []
        for obj in (*snap.held(), *snap.loose(p["object"])):
            if obj.type != p["object"]:
                continue
            cost = (
                fetch_cost(snap, snap.me.place, obj, set())
                + snap.dist(snap.where(obj), other.place)
                + 1
            )

            def build(sim: Rehearsal, obj_id: int = obj.id) -> None:
                thing = sim.fetch(obj_id, {p["object"]})
                sim.goto(other.place)
                sim.do(Action("give", thing.label, other.name.lower()))

            options.append((cost, build))

        return build_best(snap, self.goal_of(p), options, budget, len(options))

    def estimate(self, snap: Snapshot, p: Params) -> float:
        other = snap.avatars.get(p["avatar"])
        costs = (
            [fetch_estimate(snap, t, other.place) for t in objects(snap, p["object"], None)]
            if other
            else []
        )
        return min(costs) + 1 if costs else math.inf

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Another object type to hand the same avatar."""
        return self.keeping(snap, p, ("avatar",))


COOPERATE = Cooperate(
    name="cooperate",
    params={"object": str, "avatar": str, "avatar_name": str, "baseline": int},
)
