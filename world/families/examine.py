"""examine_in_light: hold an object of a type under a lamp that is on, as ALFWorld's
look-at-obj-in-light.

Plans are **shortest** over every usable object in scope: fetch it, go to the lamp, switch the
lamp on if it is off.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from world.actions import Action
from world.families.family import (
    Family,
    Params,
    Spec,
    avatar_or_none,
    fetch_estimate,
    objects,
    place_names,
    types_near,
    where,
)
from world.rehearsal import Builder, Plan, Rehearsal, build_best, fetch_cost
from world.snapshot import Snapshot
from world.state import World


@dataclass(frozen=True, eq=False)
class ExamineInLight(Family):
    def describe(self, p: Params) -> str:
        return (
            f"look at {p['object']} under the {p['lamp_label']} in "
            f"{where(p['place_name'], p.get('direction'))}"
        )

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        avatar = avatar_or_none(world, avatar_id)
        if avatar is None or avatar.place != p["place"]:
            return False
        lamp = next((t for t in world.peek_things_at(p["place"]) if t.id == p["lamp"]), None)
        held = world.peek_inventory(avatar_id)
        return bool(lamp and lamp.attrs.get("on")) and any(t.type == p["object"] for t in held)

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        for lamp in snap.receptacles("light"):
            assert lamp.place is not None
            for type_name in types_near(snap):
                yield {
                    "object": type_name,
                    "lamp": lamp.id,
                    "lamp_label": lamp.label,
                    **place_names(snap, lamp.place),
                }

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        lamp = snap.things.get(p["lamp"])
        if lamp is None:
            return None
        switch = 0 if lamp.attrs.get("on") else 1
        options: list[tuple[float, Builder]] = []
        for obj in (*snap.held(), *snap.loose(p["object"])):
            if obj.type != p["object"]:
                continue
            cost = (
                fetch_cost(snap, snap.me.place, obj, set())
                + snap.dist(snap.where(obj), p["place"])
                + switch
            )

            def build(sim: Rehearsal, obj_id: int = obj.id) -> None:
                sim.fetch(obj_id, {p["object"]})
                sim.goto(p["place"])
                light = sim.world.thing(p["lamp"])
                if not light.attrs.get("on"):
                    sim.do(Action("use", light.label))

            options.append((cost, build))

        return build_best(snap, self.goal_of(p), options, budget, len(options))

    def estimate(self, snap: Snapshot, p: Params) -> float:
        lamp = snap.things.get(p["lamp"])
        costs = [fetch_estimate(snap, t, p["place"]) for t in objects(snap, p["object"], None)]
        if lamp is None or not costs:
            return math.inf
        return min(costs) + (0 if lamp.attrs.get("on") else 1)

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Another object type or another lamp (each candidate keeps one of the two)."""
        return self.keeping(snap, p, ("object", "lamp"))


EXAMINE_IN_LIGHT = ExamineInLight(
    name="examine_in_light",
    params={"object": str, "lamp": int, "lamp_label": str, "place": str, "place_name": str},
    optional={"direction": str},
)
