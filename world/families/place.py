"""The place families: put objects of one type into a receptacle, some in a condition first.

ALFWorld's pick_and_place, clean_and_place, heat_and_place, cool_and_place and
pick_two_and_place differ only in what each object must be (clean, hot, cold or as it is), the
station that makes it so (a sink, a microwave or stove, a fridge) and how many objects go in;
they share one class, an instance each. They form a ladder for the forge: pick_and_place's
harder neighbours are the other four with the same parameters, and theirs is pick_and_place.

Plans are **shortest** over every usable object (and station) in scope; each candidate's
length is exact apart from a possible one-action drop when hands are full, and the three best
candidates are built and the shortest kept. pick_two_and_place ranges over ordered pairs and
two shapes (carry both, or two trips), with the same caveat.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from world import dynamics
from world.actions import Action
from world.entities import Thing
from world.families.family import (
    NOT_TARGETS,
    Family,
    Params,
    Spec,
    article,
    fetch_estimate,
    objects,
    place_names,
    preposition,
    types_near,
    where,
)
from world.rehearsal import Builder, Plan, Rehearsal, build_best, fetch_cost, open_cost
from world.snapshot import Snapshot
from world.state import World

# The parameters every place family has: an object type and the receptacle to put it in.
PARAMS = {
    "object": str,
    "receptacle": int,
    "receptacle_label": str,
    "place": str,
    "place_name": str,
}


def temperature(thing: Thing, tick: int) -> str:
    """The temperature a thing has at ``tick`` (what settling it then would give)."""
    temp = str(thing.attrs.get("temp", dynamics.ROOM))
    if temp in (dynamics.HOT, dynamics.COLD) and tick >= int(
        cast(int, thing.attrs.get("temp_until", tick))
    ):
        return dynamics.ROOM
    return temp


def satisfies(thing: Thing, condition: str | None, tick: int) -> bool:
    """Whether an object meets a place family's condition (None, "clean", "hot", "cold")."""
    if condition is None:
        return True
    if condition == "clean":
        return bool(thing.attrs.get("clean", True))
    return temperature(thing, tick) == condition


@dataclass(frozen=True, eq=False)
class PlaceFamily(Family):
    params: Mapping[str, type] = field(default_factory=lambda: PARAMS)
    # "direction" ("north", ...) says that the place lies in the region next to the avatar's.
    optional: Mapping[str, type] = field(default_factory=lambda: {"direction": str})
    text: str = ""  # the description, from {object}, {a} (the object with its article), {target}
    condition: str | None = None  # what each object must be: None, "clean", "hot" or "cold"
    verb: str | None = None  # the action (and the station's receptacle tag) that makes it so
    tag: str | None = None  # the object tag that action needs ("cleanable", ...)
    need: int = 1  # objects to put in
    harder: tuple[str, ...] = ()  # families one rung up the ladder, with the same parameters
    easier: tuple[str, ...] = ()

    def describe(self, p: Params) -> str:
        label = p["receptacle_label"]
        target = f"{preposition(label)} {label} in {where(p['place_name'], p.get('direction'))}"
        return self.text.format(object=p["object"], a=article(p["object"]), target=target)

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        inside = world.peek_contents(p["place"], p["receptacle"])
        ok = [
            t for t in inside if t.type == p["object"] and satisfies(t, self.condition, world.tick)
        ]
        return len(ok) >= self.need

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        tag = self.tag
        types = [t for t in types_near(snap) if tag is None or tag in snap.rules.objects[t].tags]
        if self.need == 2:
            counts = Counter(t.type for t in (*snap.loose(), *snap.held()))
            types = [t for t in types if counts[t] >= 2]
        if self.verb is not None and not snap.receptacles(self.verb):
            return
        for receptacle in snap.receptacles():
            if receptacle.type in NOT_TARGETS or receptacle.place is None:
                continue
            for type_name in types:
                yield {
                    "object": type_name,
                    "receptacle": receptacle.id,
                    "receptacle_label": receptacle.label,
                    **place_names(snap, receptacle.place),
                }

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        condition = self.condition
        target = snap.things.get(p["receptacle"])
        if target is None:
            return None
        inside = [t for t in snap.things.values() if t.container == target.id]
        done = [t for t in inside if t.type == p["object"] and satisfies(t, condition, snap.tick)]
        need = self.need - len(done)
        pool = [
            t
            for t in (*snap.held(), *snap.loose(p["object"]))
            if t.type == p["object"] and t.container != target.id
        ]
        here, goal_place = snap.me.place, p["place"]
        stations = snap.receptacles(self.verb) if self.verb is not None else []
        options: list[tuple[float, Builder]] = []

        def deliver_one(obj: Thing) -> None:
            start = snap.where(obj)
            opened: set[int] = set()
            cost = fetch_cost(snap, here, obj, opened)
            if condition is not None and not satisfies(obj, condition, snap.tick):
                for station in stations:
                    assert station.place is not None
                    total = (
                        cost
                        + snap.dist(start, station.place)
                        + 1
                        + snap.dist(station.place, goal_place)
                        + open_cost(snap, target.id, set(opened))
                        + 1
                    )
                    options.append((total, self._builder(p, [obj.id], station.id)))
            else:
                total = cost + snap.dist(start, goal_place) + open_cost(snap, target.id, opened) + 1
                options.append((total, self._builder(p, [obj.id], None)))

        if need == 1:
            for obj in pool:
                deliver_one(obj)
        elif need == 2:
            for first in pool:
                for second in pool:
                    if first.id == second.id:
                        continue
                    opened: set[int] = set()
                    a, b = snap.where(first), snap.where(second)
                    get_a = fetch_cost(snap, here, first, opened)
                    carry = (
                        get_a
                        + fetch_cost(snap, a, second, set(opened))
                        + snap.dist(b, goal_place)
                        + open_cost(snap, target.id, set(opened))
                        + 2
                    )
                    options.append(
                        (carry, self._builder(p, [first.id, second.id], None, together=True))
                    )
                    trips = (
                        get_a
                        + snap.dist(a, goal_place)
                        + open_cost(snap, target.id, opened)
                        + 1
                        + snap.dist(goal_place, b)
                        + open_cost(snap, second.container, opened)
                        + 1
                        + snap.dist(b, goal_place)
                        + 1
                    )
                    options.append((trips, self._builder(p, [first.id, second.id], None)))

        return build_best(snap, self.goal_of(p), options, budget, len(options))

    def _builder(
        self, p: Params, objects: list[int], station: int | None, together: bool = False
    ) -> Builder:
        def build(sim: Rehearsal) -> None:
            keep = {p["object"]}
            if together:
                things = [sim.fetch(i, keep) for i in objects]
                for thing in things:
                    sim.put(thing, p["receptacle"])
                return
            for thing_id in objects:
                thing = sim.fetch(thing_id, keep)
                if station is not None:
                    assert self.verb is not None
                    tool = sim.world.thing(station)
                    assert tool.place is not None
                    sim.goto(tool.place)
                    sim.do(Action(self.verb, thing.label, tool.label))
                sim.put(thing, p["receptacle"])

        return build

    def estimate(self, snap: Snapshot, p: Params) -> float:
        target = snap.things.get(p["receptacle"])
        if target is None:
            return math.inf
        costs = sorted(
            fetch_estimate(snap, t, p["place"]) for t in objects(snap, p["object"], target.id)
        )
        if len(costs) < self.need:
            return math.inf
        extra = 2.0 if self.verb is not None else 0.0
        return sum(costs[: self.need]) + self.need * (1 + extra) + snap.closed(target.id)

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Another object type or another receptacle (each candidate keeps one of the two), or
        a step along the ladder keeping every parameter."""
        yield from self.keeping(snap, p, ("object", "receptacle"))
        for other in (*self.harder, *self.easier):
            yield {"family": other, "params": p}


_UP = ("pick_and_place",)

PICK_AND_PLACE = PlaceFamily(
    name="pick_and_place",
    text="put {a} {target}",
    harder=("clean_and_place", "heat_and_place", "cool_and_place", "pick_two_and_place"),
)
CLEAN_AND_PLACE = PlaceFamily(
    name="clean_and_place",
    text="put a clean {object} {target}",
    condition="clean",
    verb="clean",
    tag="cleanable",
    easier=_UP,
)
HEAT_AND_PLACE = PlaceFamily(
    name="heat_and_place",
    text="heat some {object} and put it {target}",
    condition=dynamics.HOT,
    verb="heat",
    tag="heatable",
    easier=_UP,
)
COOL_AND_PLACE = PlaceFamily(
    name="cool_and_place",
    text="cool some {object} and put it {target}",
    condition=dynamics.COLD,
    verb="cool",
    tag="coolable",
    easier=_UP,
)
PICK_TWO_AND_PLACE = PlaceFamily(
    name="pick_two_and_place",
    text="put two {object} {target}",
    need=2,
    easier=_UP,
)
