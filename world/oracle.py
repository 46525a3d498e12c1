"""The oracle planner: a plan for a task from the current state, or None within a budget.

The planner never changes the world it is given. It copies the avatar's neighbourhood (its
region and the already generated regions next to it, plus the regions the task names) into a
:class:`Snapshot`, ranks candidate plans by an exact or estimated length computed from
shortest paths in the place graph, and then *builds* the best candidates by executing them on
a scratch in-memory world through the engine's own action handlers. A plan is returned only
if every action passed the engine's checks and the goal holds at the end, so a plan from here
is admissible step by step in the real world as long as nobody else changes it meanwhile.

How short the plans are, per family (``expanded`` counts candidates ranked plus actions
simulated):

- pick_and_place, clean_and_place, heat_and_place, cool_and_place, examine_in_light,
  cooperate: **shortest** over every usable object (and station, lamp, receiver) in scope;
  each candidate's length is exact apart from a possible one-action drop when hands are full,
  and the three best candidates are built and the shortest kept.
- pick_two_and_place: **shortest** over ordered pairs and the two shapes (carry both, or two
  trips), same caveat.
- gather_and_deliver: **shortest among plans that gather** the units from one resource with
  one tool (held or picked up); units lying around are not used.
- craft: **heuristic** (an upper bound on the shortest): the recipe tree is expanded with held
  units first, then either lying units or sub-recipes (both strategies are built and the
  shorter kept); sources are visited nearest-first and each craft is made as soon as its
  inputs are held at a place with its station.

Everything is planned inside the snapshot's regions; exits into regions nobody has generated
yet are never taken (their label numbers are not known before they are generated).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

from world import dynamics, engine
from world.actions import Action
from world.entities import Avatar, Place, Region, Thing, place_id, region_key, region_of
from world.rules import Rules
from world.state import ChangeSet, MemoryBackend, World, WorldMeta
from world.tasks import (
    DEFAULT_BUDGET,
    PLACE_CONDITION,
    Task,
    goal_met,
    satisfies,
)

MAX_ACTIONS = 150  # longest plan the oracle builds
BUILDS = 3  # candidates built (simulated) per task, best estimates first
STATION_FOR = {"clean_and_place": "clean", "heat_and_place": "heat", "cool_and_place": "cool"}
TAG_FOR = {
    "clean_and_place": "cleanable",
    "heat_and_place": "heatable",
    "cool_and_place": "coolable",
}
VERB_FOR = {"clean_and_place": "clean", "heat_and_place": "heat", "cool_and_place": "cool"}
DIRECTIONS = {(0, 1): "north", (0, -1): "south", (1, 0): "east", (-1, 0): "west"}
CRAFT_CLEARANCE = 3  # no craft task for an item lying within this many moves of the avatar
NOT_TARGETS = ("desk lamp", "floor lamp")  # capacity-one lamps make poor delivery targets


@dataclass(frozen=True)
class Plan:
    """Actions that achieve a task from the state it was planned in; ``expanded`` is the
    search breadth (candidates ranked plus actions simulated)."""

    actions: tuple[str, ...]
    expanded: int

    def __len__(self) -> int:
        return len(self.actions)


# -- snapshot ----------------------------------------------------------------------------------
def _copy(thing: Thing) -> Thing:
    return replace(thing, attrs=dict(thing.attrs))


@dataclass
class Snapshot:
    """A copy of the part of a world the planner may use; the original is never touched."""

    rules: Rules
    meta: WorldMeta
    avatar_id: str
    regions: dict[str, Region]
    places: dict[str, Place]
    things: dict[int, Thing]
    avatars: dict[str, Avatar]
    _dist: dict[str, dict[str, tuple[int, str | None, str | None]]] = field(default_factory=dict)

    @classmethod
    def of(cls, world: World, avatar_id: str, extra: tuple[str, ...] = ()) -> Snapshot:
        """Copy the avatar's region, its generated neighbours and the regions of ``extra``
        place ids, reading without loading anything into ``world``'s transaction."""
        me = world.avatar(avatar_id)
        rx, ry = region_of(me.place)
        wanted = [(rx, ry), *((rx + dx, ry + dy) for dx, dy in DIRECTIONS)]
        wanted += [region_of(p) for p in extra]
        regions: dict[str, Region] = {}
        for x, y in wanted:
            key = region_key(x, y)
            region = world.peek_region(x, y)
            if region is not None:
                regions[key] = region
        meta = world.meta
        copy_meta = WorldMeta(
            meta.seed, meta.tick, meta.next_thing_id, dict(meta.counters), list(meta.versions)
        )
        places: dict[str, Place] = {}
        things: dict[int, Thing] = {}
        avatars: dict[str, Avatar] = {}
        for region in regions.values():
            for index in range(region.n_places):
                place = world.place(place_id(region.rx, region.ry, index))
                places[place.id] = place
                for thing in world.peek_things_at(place.id):
                    things[thing.id] = _copy(thing)
                for avatar in world.avatars_at(place.id):
                    avatars[avatar.id] = replace(avatar, attrs=dict(avatar.attrs))
        avatars[me.id] = replace(me, attrs=dict(me.attrs))
        for avatar in avatars.values():
            for thing in world.peek_inventory(avatar.id):
                things[thing.id] = _copy(thing)
        for thing in things.values():
            dynamics.settle(thing, world.rules, copy_meta, meta.tick)
        return cls(world.rules, copy_meta, avatar_id, regions, places, things, avatars)

    @property
    def tick(self) -> int:
        return self.meta.tick

    @property
    def me(self) -> Avatar:
        return self.avatars[self.avatar_id]

    def scratch(self) -> World:
        """A fresh in-memory world holding copies of everything in the snapshot."""
        backend = MemoryBackend(self.meta.seed, self.rules)
        meta = WorldMeta(
            self.meta.seed,
            self.meta.tick,
            self.meta.next_thing_id,
            dict(self.meta.counters),
            list(self.meta.versions),
        )
        backend.regions = dict(self.regions)
        backend.places = dict(self.places)  # places are not changed by actions
        backend.save(
            ChangeSet(
                meta=meta,
                things={i: _copy(t) for i, t in self.things.items()},
                avatars={a.id: replace(a, attrs=dict(a.attrs)) for a in self.avatars.values()},
            )
        )
        return World(backend, self.rules)

    # -- the place graph -----------------------------------------------------------------------
    def _enterable(self, place: Place) -> bool:
        version = self.meta.version_at(self.tick)
        if version.season(self.tick) not in self.rules.places[place.kind].seasons:
            return False
        return int(place.attrs.get("flooded_until", -1) or -1) <= self.tick

    def _bfs(self, source: str) -> dict[str, tuple[int, str | None, str | None]]:
        """place -> (distance, previous place, exit label taken into it)."""
        if source not in self._dist:
            seen: dict[str, tuple[int, str | None, str | None]] = {source: (0, None, None)}
            queue = deque([source])
            while queue:
                here = queue.popleft()
                for label, there in self.places[here].exits.items():
                    target = self.places.get(there)
                    if there in seen or target is None or not self._enterable(target):
                        continue
                    seen[there] = (seen[here][0] + 1, here, label)
                    queue.append(there)
            self._dist[source] = seen
        return self._dist[source]

    def dist(self, source: str, target: str) -> float:
        found = self._bfs(source).get(target)
        return math.inf if found is None else found[0]

    def path(self, source: str, target: str) -> list[str] | None:
        """Exit labels from ``source`` to ``target``, or None if it cannot be reached."""
        tree = self._bfs(source)
        if target not in tree:
            return None
        labels: list[str] = []
        node: str | None = target
        while node is not None and node != source:
            _, previous, label = tree[node]
            labels.append(str(label))
            node = previous
        return labels[::-1]

    # -- what lies where -----------------------------------------------------------------------
    def loose(self, type_name: str | None = None) -> list[Thing]:
        """Objects lying in receptacles (nobody holds them), optionally of one type."""
        return [
            t
            for t in self.things.values()
            if t.kind == "object"
            and t.holder is None
            and t.container is not None
            and (type_name is None or t.type == type_name)
        ]

    def held(self, avatar_id: str | None = None) -> list[Thing]:
        who = avatar_id or self.avatar_id
        return sorted((t for t in self.things.values() if t.holder == who), key=lambda t: t.id)

    def receptacles(self, station: str | None = None) -> list[Thing]:
        found = [t for t in self.things.values() if t.kind == "receptacle"]
        if station is not None:
            found = [t for t in found if self.rules.receptacles[t.type].station == station]
        return sorted(found, key=lambda t: t.id)

    def closed(self, receptacle_id: int | None) -> bool:
        thing = self.things.get(receptacle_id) if receptacle_id is not None else None
        return thing is not None and thing.attrs.get("open") is False

    def where(self, thing: Thing) -> str:
        """The place a thing is at; held things are where their holder stands."""
        if thing.holder is not None:
            return self.avatars[thing.holder].place
        assert thing.place is not None
        return thing.place

    def direction(self, place: str) -> str | None:
        """ "north" etc. when ``place`` lies in a neighbouring region of the avatar's."""
        (ax, ay), (px, py) = region_of(self.me.place), region_of(place)
        return DIRECTIONS.get((px - ax, py - ay))


# -- building plans by simulation --------------------------------------------------------------
class _Fail(Exception):
    """A candidate plan cannot be built (an action was rejected or the plan grew too long)."""


class _Sim:
    """Executes a candidate plan on a scratch world with the engine's handlers, recording it."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.world = snap.scratch()
        self.me = snap.avatar_id
        self.actions: list[str] = []

    @property
    def here(self) -> str:
        return self.world.avatar(self.me).place

    def held(self) -> list[Thing]:
        return self.world.inventory(self.me)

    def free(self) -> int:
        return self.world.avatar(self.me).capacity - len(self.held())

    def view(self) -> engine.View:
        """What the avatar sees now, with its lazy dynamics settled to now: the real engine
        opens a fresh transaction per step, so spoilage and cooling show up step by step."""
        world = self.world
        view = engine.View(world, world.avatar(self.me))
        for thing in (*view.things, *view.held):
            dynamics.settle(thing, world.rules, world.meta, world.tick)
        return view

    def admissible(self, action: Action) -> bool:
        """Whether ``action`` is in the admissible list an observation now would show."""
        view = self.view()
        try:
            engine.HANDLERS[action.verb](view, action, False)
        except engine.Rejected:
            return False
        return True

    def do(self, action: Action) -> None:
        """Step ``action``: it must be admissible now *and* accepted one tick later, when the
        engine applies it (the two differ at dusk, dawn and season ends)."""
        if len(self.actions) >= MAX_ACTIONS:
            raise _Fail("plan too long")
        if not self.admissible(action):
            raise _Fail(f"{action.text}: not admissible")
        world = self.world
        world.advance()  # the engine's step advances the clock before applying
        view = self.view()
        try:
            engine.HANDLERS[action.verb](view, action, True)
        except engine.Rejected as reason:
            raise _Fail(f"{action.text}: {reason}") from None
        self.actions.append(action.text)

    def gather(self, resource: Thing, tool: Thing, keep: set[str]) -> None:
        """Gather one unit, making room first and waiting for daylight where it is needed."""
        rules = self.snap.rules
        yields = rules.resources[resource.type].yields
        limit = rules.objects[yields].stack
        if not any(t.type == yields and t.quantity < limit for t in self.held()):
            self.make_room(keep | {tool.type, yields})
        action = Action("gather", resource.label, tool.label)
        for _ in range(self.world.dynamics.day_length):
            if self.admissible(action):
                break
            self.do(Action("wait"))  # night: fishing needs daylight
        self.do(action)

    def goto(self, place: str) -> None:
        labels = self.snap.path(self.here, place)
        if labels is None:
            raise _Fail(f"cannot reach {place}")
        for label in labels:
            self.do(Action("go", label))

    def open(self, receptacle: Thing) -> None:
        if receptacle.attrs.get("open") is False:
            self.do(Action("open", receptacle.label))

    def make_room(self, keep: set[str], slots: int = 1) -> None:
        """Put down held things whose type is not in ``keep`` until ``slots`` are free."""
        while self.free() < slots:
            spare = [t for t in self.held() if t.type not in keep]
            if not spare:
                raise _Fail("hands full of needed things")
            room = [
                r
                for r in self.world.things_at(self.here)
                if r.kind == "receptacle"
                and len(self.world.contents(r)) < self.snap.rules.receptacles[r.type].capacity
            ]
            if not room:
                raise _Fail("nowhere to put things down")
            room.sort(key=lambda r: (r.attrs.get("open") is False, r.id))
            self.put(spare[0], room[0].id)

    def fetch(self, thing_id: int, keep: set[str]) -> Thing:
        thing = self.world.thing(thing_id)
        if thing.holder == self.me:
            return thing
        if thing.holder is not None or thing.place is None or thing.container is None:
            raise _Fail(f"{thing.label} is out of reach")
        self.goto(thing.place)
        container = self.world.thing(thing.container)
        self.open(container)
        self.make_room(keep | {thing.type})
        self.do(Action("take", thing.label, container.label))
        return thing

    def put(self, thing: Thing, receptacle_id: int) -> None:
        receptacle = self.world.thing(receptacle_id)
        assert receptacle.place is not None
        self.goto(receptacle.place)
        self.open(receptacle)
        prep = self.snap.rules.receptacles[receptacle.type].preposition
        self.do(Action("put", thing.label, f"{prep} {receptacle.label}"))


Builder = Callable[[_Sim], None]


def _build(
    snap: Snapshot, task: Task, options: list[tuple[float, Builder]], budget: int, expanded: int
) -> Plan | None:
    """Build the best few options by estimate; return the shortest that reaches the goal."""
    options = sorted((o for o in options if o[0] < math.inf), key=lambda o: o[0])
    best: list[str] | None = None
    built = 0
    for estimate, builder in options:
        if built >= BUILDS or expanded >= budget or (best is not None and estimate >= len(best)):
            break
        sim = _Sim(snap)
        built += 1
        try:
            builder(sim)
        except _Fail:
            continue
        finally:
            expanded += len(sim.actions)
        if goal_met(sim.world, task, snap.avatar_id) and (
            best is None or len(sim.actions) < len(best)
        ):
            best = list(sim.actions)
    return None if best is None else Plan(tuple(best), expanded)


def _open_cost(snap: Snapshot, receptacle_id: int | None, opened: set[int]) -> int:
    if receptacle_id is None or receptacle_id in opened or not snap.closed(receptacle_id):
        return 0
    opened.add(receptacle_id)
    return 1


def _fetch_cost(snap: Snapshot, start: str, thing: Thing, opened: set[int]) -> float:
    """Actions to get from ``start`` to holding ``thing`` (0 if the avatar holds it)."""
    if thing.holder == snap.avatar_id:
        return 0
    return snap.dist(start, snap.where(thing)) + _open_cost(snap, thing.container, opened) + 1


# -- one plan per family -----------------------------------------------------------------------
def _place_one(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    p, family = task.params, task.family
    condition = PLACE_CONDITION[family]
    target = snap.things.get(p["receptacle"])
    if target is None:
        return None
    inside = [t for t in snap.things.values() if t.container == target.id]
    done = [t for t in inside if t.type == p["object"] and satisfies(t, condition, snap.tick)]
    need = (2 if family == "pick_two_and_place" else 1) - len(done)
    pool = [
        t
        for t in (*snap.held(), *snap.loose(p["object"]))
        if t.type == p["object"] and t.container != target.id
    ]
    here, goal_place = snap.me.place, p["place"]
    stations = snap.receptacles(STATION_FOR[family]) if family in STATION_FOR else []
    options: list[tuple[float, Builder]] = []

    def deliver_one(obj: Thing) -> None:
        start = snap.where(obj)
        opened: set[int] = set()
        cost = _fetch_cost(snap, here, obj, opened)
        if condition is not None and not satisfies(obj, condition, snap.tick):
            for station in stations:
                assert station.place is not None
                total = (
                    cost
                    + snap.dist(start, station.place)
                    + 1
                    + snap.dist(station.place, goal_place)
                    + _open_cost(snap, target.id, set(opened))
                    + 1
                )
                options.append((total, _place_builder(task, [obj.id], station.id)))
        else:
            total = cost + snap.dist(start, goal_place) + _open_cost(snap, target.id, opened) + 1
            options.append((total, _place_builder(task, [obj.id], None)))

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
                get_a = _fetch_cost(snap, here, first, opened)
                carry = (
                    get_a
                    + _fetch_cost(snap, a, second, set(opened))
                    + snap.dist(b, goal_place)
                    + _open_cost(snap, target.id, set(opened))
                    + 2
                )
                options.append(
                    (carry, _place_builder(task, [first.id, second.id], None, together=True))
                )
                trips = (
                    get_a
                    + snap.dist(a, goal_place)
                    + _open_cost(snap, target.id, opened)
                    + 1
                    + snap.dist(goal_place, b)
                    + _open_cost(snap, second.container, opened)
                    + 1
                    + snap.dist(b, goal_place)
                    + 1
                )
                options.append((trips, _place_builder(task, [first.id, second.id], None)))
    return _build(snap, task, options, budget, len(options))


def _place_builder(
    task: Task, objects: list[int], station: int | None, together: bool = False
) -> Builder:
    p = task.params

    def build(sim: _Sim) -> None:
        keep = {p["object"]}
        if together:
            things = [sim.fetch(i, keep) for i in objects]
            for thing in things:
                sim.put(thing, p["receptacle"])
            return
        for thing_id in objects:
            thing = sim.fetch(thing_id, keep)
            if station is not None:
                tool = sim.world.thing(station)
                assert tool.place is not None
                sim.goto(tool.place)
                sim.do(Action(VERB_FOR[task.family], thing.label, tool.label))
            sim.put(thing, p["receptacle"])

    return build


def _examine(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    p = task.params
    lamp = snap.things.get(p["lamp"])
    if lamp is None:
        return None
    switch = 0 if lamp.attrs.get("on") else 1
    options: list[tuple[float, Builder]] = []
    for obj in (*snap.held(), *snap.loose(p["object"])):
        if obj.type != p["object"]:
            continue
        cost = (
            _fetch_cost(snap, snap.me.place, obj, set())
            + snap.dist(snap.where(obj), p["place"])
            + switch
        )

        def build(sim: _Sim, obj_id: int = obj.id) -> None:
            sim.fetch(obj_id, {p["object"]})
            sim.goto(p["place"])
            light = sim.world.thing(p["lamp"])
            if not light.attrs.get("on"):
                sim.do(Action("use", light.label))

        options.append((cost, build))
    return _build(snap, task, options, budget, len(options))


def _cooperate(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    p = task.params
    other = snap.avatars.get(p["avatar"])
    if other is None or other.id == snap.avatar_id:
        return None
    options: list[tuple[float, Builder]] = []
    for obj in (*snap.held(), *snap.loose(p["object"])):
        if obj.type != p["object"]:
            continue
        cost = (
            _fetch_cost(snap, snap.me.place, obj, set())
            + snap.dist(snap.where(obj), other.place)
            + 1
        )

        def build(sim: _Sim, obj_id: int = obj.id) -> None:
            thing = sim.fetch(obj_id, {p["object"]})
            sim.goto(other.place)
            sim.do(Action("give", thing.label, other.name.lower()))

        options.append((cost, build))
    return _build(snap, task, options, budget, len(options))


def _tools(snap: Snapshot, tag: str, uses: int) -> list[Thing]:
    """Held or loose tools carrying ``tag`` with at least ``uses`` uses left."""
    found = []
    for tool in (*snap.held(), *snap.loose()):
        spec = snap.rules.objects[tool.type]
        left = int(cast(int, tool.attrs.get("durability", uses)))
        if tag in spec.tags and not tool.attrs.get("broken") and left >= uses:
            found.append(tool)
    return found


def _gather(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    p = task.params
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
        cost = snap.dist(snap.me.place, p["place"]) + _open_cost(snap, target.id, set()) + 1
        options.append((cost, _gather_builder(task, None, None, 0)))
    for resource in snap.things.values() if missing > 0 else ():
        if resource.kind != "resource" or snap.rules.resources[resource.type].yields != p["yields"]:
            continue
        if resource.count("stock") < missing:
            continue
        spec = snap.rules.resources[resource.type]
        assert resource.place is not None
        for tool in _tools(snap, spec.tool, missing):
            opened: set[int] = set()
            cost = (
                _fetch_cost(snap, snap.me.place, tool, opened)
                + snap.dist(snap.where(tool), resource.place)
                + missing
                + snap.dist(resource.place, p["place"])
                + _open_cost(snap, target.id, opened)
                + 1
            )
            options.append((cost, _gather_builder(task, resource.id, tool.id, missing)))
    return _build(snap, task, options, budget, len(options))


def _gather_builder(
    task: Task, resource_id: int | None, tool_id: int | None, count: int
) -> Builder:
    p = task.params

    def build(sim: _Sim) -> None:
        keep = {p["yields"]}
        if resource_id is not None and tool_id is not None:
            tool = sim.fetch(tool_id, keep)
            resource = sim.world.thing(resource_id)
            assert resource.place is not None
            sim.goto(resource.place)
            for _ in range(count):
                sim.gather(resource, tool, keep)
        stacks = sorted(
            (t for t in sim.held() if t.type == p["yields"]), key=lambda t: (-t.quantity, t.id)
        )
        for thing in stacks:  # biggest stacks first, and no more than the goal needs
            if goal_met(sim.world, task, sim.me):
                break
            sim.put(thing, p["receptacle"])

    return build


# -- crafting ----------------------------------------------------------------------------------
@dataclass
class _Needs:
    """A recipe tree expanded into sources to visit and crafts to make."""

    takes: list[int] = field(default_factory=list)  # loose things to pick up
    gathers: list[tuple[int, int, str]] = field(default_factory=list)  # (resource, units, tool tag)
    tools: list[int] = field(default_factory=list)  # tools to pick up for gathering
    crafts: Counter[str] = field(default_factory=Counter)


def _expand(snap: Snapshot, item: str, prefer_loose: bool) -> _Needs | None:
    rules = snap.rules
    here = snap.me.place
    have: Counter[str] = Counter()
    for thing in snap.held():
        if not dynamics.is_rotten(thing):
            have[thing.type] += thing.quantity
    loose: dict[str, list[Thing]] = {}
    for thing in snap.loose():
        if not dynamics.is_rotten(thing):
            loose.setdefault(thing.type, []).append(thing)
    for things in loose.values():
        things.sort(key=lambda t: (snap.dist(here, snap.where(t)), t.id))
    left = {t.id: t.count("stock") for t in snap.things.values() if t.kind == "resource"}
    needs = _Needs()
    held_tags = {
        tag for t in snap.held() if not t.attrs.get("broken") for tag in rules.objects[t.type].tags
    }

    def need(type_name: str, units: int, top: bool = False) -> bool:
        if not top:
            use = min(have[type_name], units)
            have[type_name] -= use
            units -= use
        recipe = rules.recipes.get(type_name)
        if units > 0 and not top and (recipe is None or prefer_loose):
            while units > 0 and loose.get(type_name):
                thing = loose[type_name].pop(0)
                needs.takes.append(thing.id)
                units -= thing.quantity
            if units < 0:
                have[type_name] += -units
                units = 0
        if units <= 0:
            return True
        if recipe is not None:
            times = -(-units // recipe.count)
            needs.crafts[type_name] += times
            have[type_name] += times * recipe.count - units
            return all(need(name, k * times) for name, k in sorted(recipe.inputs.items()))
        return gather(type_name, units)

    def gather(type_name: str, units: int) -> bool:
        sources = sorted(
            (
                t
                for t in snap.things.values()
                if t.kind == "resource"
                and rules.resources[t.type].yields == type_name
                and left[t.id] >= units
            ),
            key=lambda t: (snap.dist(here, snap.where(t)), t.id),
        )
        for resource in sources:
            tag = rules.resources[resource.type].tool
            if tag not in held_tags:
                tools = [
                    t
                    for t in _tools(snap, tag, units)
                    if t.holder is None and t.id not in needs.tools
                ]
                if not tools:
                    continue
                tools.sort(key=lambda t: (snap.dist(here, snap.where(t)), t.id))
                needs.tools.append(tools[0].id)
                held_tags.add(tag)
            left[resource.id] -= units
            needs.gathers.append((resource.id, units, tag))
            return True
        return False

    return needs if need(item, 1, top=True) else None


def _craft_builder(task: Task, needs: _Needs) -> Builder:
    item = task.params["item"]

    def build(sim: _Sim) -> None:
        rules, snap = sim.snap.rules, sim.snap
        keep = {item, *needs.crafts, *(snap.things[i].type for i in needs.takes)}
        keep |= {rules.resources[snap.things[r].type].yields for r, _, _ in needs.gathers}
        keep |= {snap.things[i].type for i in needs.tools}
        takes = list(needs.tools) + list(needs.takes)
        gathers = list(needs.gathers)
        pending = Counter(needs.crafts)
        order = sorted(pending, key=lambda name: (rules.recipe_depth(name), name))

        def ready(name: str) -> bool:
            held: Counter[str] = Counter()
            for thing in sim.held():
                if not dynamics.is_rotten(thing):
                    held[thing.type] += thing.quantity
            return all(held[k] >= n for k, n in rules.recipes[name].inputs.items())

        def station_here(name: str) -> bool:
            station = rules.recipes[name].station
            return station is None or any(r.type == station for r in sim.world.things_at(sim.here))

        while pending[item] > 0:
            made = True
            while made:
                made = False
                for name in order:
                    if pending[name] > 0 and ready(name) and station_here(name):
                        sim.do(Action("craft", name))
                        pending[name] -= 1
                        made = True
                        break
            if pending[item] == 0:
                break
            tag_held = {
                tag
                for t in sim.held()
                if not t.attrs.get("broken")
                for tag in rules.objects[t.type].tags
            }
            moves: list[tuple[float, int, str, Any]] = []
            for thing_id in takes:
                moves.append(
                    (snap.dist(sim.here, snap.where(snap.things[thing_id])), 0, "take", thing_id)
                )
            for gather in gathers:
                if gather[2] in tag_held:
                    moves.append(
                        (
                            snap.dist(sim.here, snap.where(snap.things[gather[0]])),
                            1,
                            "gather",
                            gather,
                        )
                    )
            for name in order:
                station = rules.recipes[name].station
                if pending[name] > 0 and station is not None and ready(name):
                    for receptacle in snap.receptacles():
                        if receptacle.type == station and receptacle.place is not None:
                            moves.append(
                                (
                                    snap.dist(sim.here, receptacle.place),
                                    2,
                                    "station",
                                    receptacle.place,
                                )
                            )
            moves = [m for m in moves if m[0] < math.inf]
            if not moves:
                raise _Fail("no way forward in the recipe tree")
            _, _, kind, what = min(moves, key=lambda m: (m[0], m[1], str(m[3])))
            if kind == "take":
                takes.remove(what)
                sim.fetch(what, keep)
            elif kind == "gather":
                gathers.remove(what)
                resource = sim.world.thing(what[0])
                assert resource.place is not None
                sim.goto(resource.place)
                tool = next(
                    t
                    for t in sim.held()
                    if what[2] in rules.objects[t.type].tags and not t.attrs.get("broken")
                )
                for _ in range(what[1]):
                    sim.gather(resource, tool, keep)
            else:
                sim.goto(what)

    return build


def _craft(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    item = task.params["item"]
    if item not in snap.rules.recipes:
        return None
    options: list[tuple[float, Builder]] = []
    for prefer_loose in (True, False):
        needs = _expand(snap, item, prefer_loose)
        if needs is not None:
            estimate = (
                len(needs.takes)
                + len(needs.tools)
                + sum(needs.crafts.values())
                + sum(g[1] for g in needs.gathers)
            )
            options.append((estimate, _craft_builder(task, needs)))
    return _build(snap, task, options, budget, len(options))


PLANNERS: dict[str, Callable[[Snapshot, Task, int], Plan | None]] = {
    **{family: _place_one for family in PLACE_CONDITION},
    "examine_in_light": _examine,
    "craft": _craft,
    "gather_and_deliver": _gather,
    "cooperate": _cooperate,
}


def _task_places(task: Task) -> tuple[str, ...]:
    p = task.params
    return tuple(p[k] for k in ("place", "resource_place") if k in p)


def plan_in(snap: Snapshot, task: Task, *, budget: int = DEFAULT_BUDGET) -> Plan | None:
    """Plan inside a snapshot (the sampler reuses one snapshot for many candidates)."""
    if snap.avatar_id not in snap.avatars:
        return None
    return PLANNERS[task.family](snap, task, budget)


def plan(world: World, task: Task, avatar_id: str, *, budget: int = DEFAULT_BUDGET) -> Plan | None:
    """A plan achieving ``task`` for the avatar from the world's current state, or None.

    Returns ``Plan((), 0)`` when the goal already holds. Never changes ``world``.
    """
    if goal_met(world, task, avatar_id):
        return Plan((), 0)
    return plan_in(Snapshot.of(world, avatar_id, _task_places(task)), task, budget=budget)


def next_action(
    world: World, task: Task, avatar_id: str, *, budget: int = DEFAULT_BUDGET
) -> str | None:
    """The first action of a fresh plan, or None when the goal holds or no plan is found."""
    found = plan(world, task, avatar_id, budget=budget)
    return found.actions[0] if found and found.actions else None


# -- candidate tasks for the sampler -----------------------------------------------------------
def candidates(snap: Snapshot, family: str) -> list[dict[str, Any]]:
    """Parameter sets of ``family`` that make sense near the avatar (not yet checked)."""
    return list(_CANDIDATES[family](snap, family))


def _names(snap: Snapshot, place: str) -> dict[str, Any]:
    names = {"place": place, "place_name": snap.places[place].name}
    direction = snap.direction(place)
    return names if direction is None else {**names, "direction": direction}


def _types_near(snap: Snapshot) -> list[str]:
    return sorted({t.type for t in (*snap.loose(), *snap.held())})


def _place_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    tag = TAG_FOR.get(family)
    types = [t for t in _types_near(snap) if tag is None or tag in snap.rules.objects[t].tags]
    if family == "pick_two_and_place":
        counts = Counter(t.type for t in (*snap.loose(), *snap.held()))
        types = [t for t in types if counts[t] >= 2]
    if family in STATION_FOR and not snap.receptacles(STATION_FOR[family]):
        return
    for receptacle in snap.receptacles():
        if receptacle.type in NOT_TARGETS or receptacle.place is None:
            continue
        for type_name in types:
            yield {
                "object": type_name,
                "receptacle": receptacle.id,
                "receptacle_label": receptacle.label,
                **_names(snap, receptacle.place),
            }


def _examine_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for lamp in snap.receptacles("light"):
        assert lamp.place is not None
        for type_name in _types_near(snap):
            yield {
                "object": type_name,
                "lamp": lamp.id,
                "lamp_label": lamp.label,
                **_names(snap, lamp.place),
            }


def _craft_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    held: Counter[str] = Counter()
    for thing in snap.held():
        held[thing.type] += thing.quantity
    # Picking up one that lies close by would do: that is not a crafting task.
    here = snap.me.place
    lying = {t.type for t in snap.loose() if snap.dist(here, snap.where(t)) <= CRAFT_CLEARANCE}
    for item in sorted(snap.rules.recipes):
        if item in lying:
            continue
        if _expand(snap, item, True) or _expand(snap, item, False):  # the tree bottoms out here
            yield {"item": item, "baseline": held[item]}


def _gather_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for resource in sorted(
        (t for t in snap.things.values() if t.kind == "resource"), key=lambda t: t.id
    ):
        spec = snap.rules.resources[resource.type]
        units = resource.count("stock")
        if units < 1 or not _tools(snap, spec.tool, 1):
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
            params = {
                **source,
                "receptacle": receptacle.id,
                "receptacle_label": receptacle.label,
                **_names(snap, receptacle.place),
                "units": 1 + (resource.id + receptacle.id) % min(3, units),
                "baseline": sum(t.quantity for t in inside if t.type == spec.yields),
            }
            yield params


def _cooperate_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for other in sorted(snap.avatars.values(), key=lambda a: a.id):
        if other.id == snap.avatar_id:
            continue
        theirs: Counter[str] = Counter()
        for thing in snap.held(other.id):
            theirs[thing.type] += thing.quantity
        for type_name in _types_near(snap):
            yield {
                "object": type_name,
                "avatar": other.id,
                "avatar_name": other.name,
                "baseline": theirs[type_name],
            }


_CANDIDATES: dict[str, Callable[[Snapshot, str], Iterator[dict[str, Any]]]] = {
    **{family: _place_candidates for family in PLACE_CONDITION},
    "examine_in_light": _examine_candidates,
    "craft": _craft_candidates,
    "gather_and_deliver": _gather_candidates,
    "cooperate": _cooperate_candidates,
}
