"""gather_and_deliver: gather units of a resource's yield with a tool and put them into a
receptacle, often in another region.

Resources, their yields, tools and regrowth are rules data (``world/data/regions.yaml`` and
``dynamics.yaml``). Plans are **shortest among plans that gather** the units from one resource
with one tool (held or picked up); units lying around are not used.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from world.families.family import (
    NOT_TARGETS,
    Family,
    Params,
    Spec,
    place_names,
    preposition,
    units,
    where,
)
from world.rehearsal import Builder, Plan, Rehearsal, build_best, fetch_cost, open_cost
from world.snapshot import Snapshot, usable_tools
from world.state import World


@dataclass(frozen=True, eq=False)
class GatherAndDeliver(Family):
    def describe(self, p: Params) -> str:
        source = where(p["resource_place_name"], p.get("resource_direction"))
        target = where(p["place_name"], p.get("direction"))
        return (
            f"gather {p['units']} {p['yields']} from {p['resource_label']} in {source} and put "
            f"{'it' if p['units'] == 1 else 'them'} {preposition(p['receptacle_label'])} "
            f"{p['receptacle_label']} in {target}"
        )

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        inside = world.peek_contents(p["place"], p["receptacle"])
        return units(inside, p["yields"]) >= p["baseline"] + p["units"]

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        for resource in sorted(
            (t for t in snap.things.values() if t.kind == "resource"), key=lambda t: t.id
        ):
            spec = snap.rules.resources[resource.type]
            stock = resource.count("stock")
            if stock < 1 or not usable_tools(snap, spec.tool, 1):
                continue
            assert resource.place is not None
            source = {
                "resource": resource.id,
                "resource_label": resource.label,
                "resource_place": resource.place,
                "resource_place_name": snap.places[resource.place].name,
                "yields": spec.yields,
            }
            if snap.direction(resource.place):
                source["resource_direction"] = str(snap.direction(resource.place))
            for receptacle in snap.receptacles():
                if receptacle.type in NOT_TARGETS or receptacle.place is None:
                    continue
                inside = [t for t in snap.things.values() if t.container == receptacle.id]
                yield {
                    **source,
                    "receptacle": receptacle.id,
                    "receptacle_label": receptacle.label,
                    **place_names(snap, receptacle.place),
                    "units": 1 + (resource.id + receptacle.id) % min(3, stock),
                    "baseline": sum(t.quantity for t in inside if t.type == spec.yields),
                }

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        target = snap.things.get(p["receptacle"])
        if target is None:
            return None
        have = sum(
            t.quantity
            for t in snap.things.values()
            if t.container == target.id and t.type == p["yields"]
        )
        missing = p["baseline"] + p["units"] - have
        if missing <= 0:
            return Plan((), 0)
        held = sum(t.quantity for t in snap.held() if t.type == p["yields"])
        missing -= held  # units in hand count as soon as they are put in
        options: list[tuple[float, Builder]] = []
        if missing <= 0:
            cost = snap.dist(snap.me.place, p["place"]) + open_cost(snap, target.id, set()) + 1
            options.append((cost, self._builder(p, None, None, 0)))
        for resource in snap.things.values() if missing > 0 else ():
            if (
                resource.kind != "resource"
                or snap.rules.resources[resource.type].yields != p["yields"]
            ):
                continue
            if resource.count("stock") < missing:
                continue
            spec = snap.rules.resources[resource.type]
            assert resource.place is not None
            for tool in usable_tools(snap, spec.tool, missing):
                opened: set[int] = set()
                cost = (
                    fetch_cost(snap, snap.me.place, tool, opened)
                    + snap.dist(snap.where(tool), resource.place)
                    + missing
                    + snap.dist(resource.place, p["place"])
                    + open_cost(snap, target.id, opened)
                    + 1
                )
                options.append((cost, self._builder(p, resource.id, tool.id, missing)))

        return build_best(snap, self.goal_of(p), options, budget, len(options))

    def _builder(
        self, p: Params, resource_id: int | None, tool_id: int | None, count: int
    ) -> Builder:
        def build(sim: Rehearsal) -> None:
            keep = {p["yields"]}
            if resource_id is not None and tool_id is not None:
                tool = sim.fetch(tool_id, keep)
                resource = sim.world.thing(resource_id)
                assert resource.place is not None
                sim.goto(resource.place)
                for _ in range(count):
                    sim.gather(resource, tool, keep)
            stacks = sorted(
                (t for t in sim.held() if t.type == p["yields"]),
                key=lambda t: (-t.quantity, t.id),
            )
            for thing in stacks:  # biggest stacks first, and no more than the goal needs
                if self.goal(sim.world, p, sim.me):
                    break
                sim.put(thing, p["receptacle"])

        return build

    def estimate(self, snap: Snapshot, p: Params) -> float:
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

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """One unit more or fewer, or another resource or receptacle (each candidate keeps
        one of the two; across regions, too)."""
        for more in (p["units"] - 1, p["units"] + 1):
            if more >= 1:
                yield {"family": self.name, "params": {**p, "units": more}}
        yield from self.keeping(snap, p, ("resource", "receptacle"))


GATHER_AND_DELIVER = GatherAndDeliver(
    name="gather_and_deliver",
    params={
        "yields": str,
        "units": int,
        "baseline": int,
        "resource": int,
        "resource_label": str,
        "resource_place": str,
        "resource_place_name": str,
        "receptacle": int,
        "receptacle_label": str,
        "place": str,
        "place_name": str,
    },  # fmt: skip
    optional={"resource_direction": str, "direction": str},
)
