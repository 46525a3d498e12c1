"""Building plans by rehearsing them: a candidate plan is executed on a scratch world with the
engine's own action handlers, so a plan that survives is admissible step by step."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from world import dynamics, engine
from world.actions import Action
from world.entities import Thing
from world.snapshot import Snapshot
from world.state import World

MAX_ACTIONS = 150  # longest plan the oracle builds
BUILDS = 3  # candidates built (simulated) per task, best estimates first


@dataclass(frozen=True)
class Plan:
    """Actions that achieve a task from the state it was planned in; ``expanded`` is the
    search breadth (candidates ranked plus actions simulated)."""

    actions: tuple[str, ...]
    expanded: int

    def __len__(self) -> int:
        return len(self.actions)


class Impossible(Exception):
    """A candidate plan cannot be built (an action was rejected or the plan grew too long)."""


class Rehearsal:
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
        return self.snap.rules.avatar_capacity - len(self.held())

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
            raise Impossible("plan too long")
        if not self.admissible(action):
            raise Impossible(f"{action.text}: not admissible")
        world = self.world
        world.advance()  # the engine's step advances the clock before applying
        view = self.view()
        try:
            engine.HANDLERS[action.verb](view, action, True)
        except engine.Rejected as reason:
            raise Impossible(f"{action.text}: {reason}") from None
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
            raise Impossible(f"cannot reach {place}")
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
                raise Impossible("hands full of needed things")
            room = [
                r
                for r in self.world.things_at(self.here)
                if r.kind == "receptacle"
                and len(self.world.contents(r)) < self.snap.rules.receptacles[r.type].capacity
            ]
            if not room:
                raise Impossible("nowhere to put things down")
            room.sort(key=lambda r: (r.attrs.get("open") is False, r.id))
            self.put(spare[0], room[0].id)

    def fetch(self, thing_id: int, keep: set[str]) -> Thing:
        thing = self.world.thing(thing_id)
        if thing.holder == self.me:
            return thing
        if thing.holder is not None or thing.place is None or thing.container is None:
            raise Impossible(f"{thing.label} is out of reach")
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


Builder = Callable[[Rehearsal], None]
# Whether a task's goal holds in a world for an avatar: what a family's plan is built towards.
Goal = Callable[[World, str], bool]


def build_best(
    snap: Snapshot, goal: Goal, options: list[tuple[float, Builder]], budget: int, expanded: int
) -> Plan | None:
    """Build the best few options by estimate; return the shortest that reaches the goal."""
    options = sorted((o for o in options if o[0] < math.inf), key=lambda o: o[0])
    best: list[str] | None = None
    built = 0
    for estimate, builder in options:
        if built >= BUILDS or expanded >= budget or (best is not None and estimate >= len(best)):
            break
        sim = Rehearsal(snap)
        built += 1
        try:
            builder(sim)
        except Impossible:
            continue
        finally:
            expanded += len(sim.actions)
        if goal(sim.world, snap.avatar_id) and (best is None or len(sim.actions) < len(best)):
            best = list(sim.actions)
    return None if best is None else Plan(tuple(best), expanded)


def open_cost(snap: Snapshot, receptacle_id: int | None, opened: set[int]) -> int:
    if receptacle_id is None or receptacle_id in opened or not snap.closed(receptacle_id):
        return 0
    opened.add(receptacle_id)
    return 1


def fetch_cost(snap: Snapshot, start: str, thing: Thing, opened: set[int]) -> float:
    """Actions to get from ``start`` to holding ``thing`` (0 if the avatar holds it)."""
    if thing.holder == snap.avatar_id:
        return 0
    return snap.dist(start, snap.where(thing)) + open_cost(snap, thing.container, opened) + 1
