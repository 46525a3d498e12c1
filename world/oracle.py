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
- go_to: **shortest**: the breadth-first path of ``go to`` moves to the place.
- craft: **heuristic** (an upper bound on the shortest): the recipe tree is expanded with held
  units first, then either lying units or sub-recipes (both strategies are built and the
  shorter kept); sources are visited nearest-first and each craft is made as soon as its
  inputs are held at a place with its station.

Everything is planned inside the snapshot's regions; exits into regions nobody has generated
yet are never taken (their label numbers are not known before they are generated).
"""

from __future__ import annotations

from collections.abc import Callable

from world.actions import Action
from world.candidates import STATION_FOR
from world.crafting import plan_craft
from world.entities import Thing
from world.rehearsal import Builder, Goal, Plan, Rehearsal, build_best, fetch_cost, open_cost
from world.snapshot import Snapshot, usable_tools
from world.state import World
from world.tasks import PLACE_CONDITION, Task, goal_met, satisfies

DEFAULT_BUDGET = 4000  # search breadth a plan may take (candidates ranked plus actions simulated)
VERB_FOR = {"clean_and_place": "clean", "heat_and_place": "heat", "cool_and_place": "cool"}


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
                options.append((total, _place_builder(task, [obj.id], station.id)))
        else:
            total = cost + snap.dist(start, goal_place) + open_cost(snap, target.id, opened) + 1
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
                get_a = fetch_cost(snap, here, first, opened)
                carry = (
                    get_a
                    + fetch_cost(snap, a, second, set(opened))
                    + snap.dist(b, goal_place)
                    + open_cost(snap, target.id, set(opened))
                    + 2
                )
                options.append(
                    (carry, _place_builder(task, [first.id, second.id], None, together=True))
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
                options.append((trips, _place_builder(task, [first.id, second.id], None)))
    return build_best(snap, _goal(task), options, budget, len(options))


def _place_builder(
    task: Task, objects: list[int], station: int | None, together: bool = False
) -> Builder:
    p = task.params

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
    return build_best(snap, _goal(task), options, budget, len(options))


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
            fetch_cost(snap, snap.me.place, obj, set())
            + snap.dist(snap.where(obj), other.place)
            + 1
        )

        def build(sim: Rehearsal, obj_id: int = obj.id) -> None:
            thing = sim.fetch(obj_id, {p["object"]})
            sim.goto(other.place)
            sim.do(Action("give", thing.label, other.name.lower()))

        options.append((cost, build))
    return build_best(snap, _goal(task), options, budget, len(options))


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
        cost = snap.dist(snap.me.place, p["place"]) + open_cost(snap, target.id, set()) + 1
        options.append((cost, _gather_builder(task, None, None, 0)))
    for resource in snap.things.values() if missing > 0 else ():
        if resource.kind != "resource" or snap.rules.resources[resource.type].yields != p["yields"]:
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
            options.append((cost, _gather_builder(task, resource.id, tool.id, missing)))
    return build_best(snap, _goal(task), options, budget, len(options))


def _gather_builder(
    task: Task, resource_id: int | None, tool_id: int | None, count: int
) -> Builder:
    p = task.params

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
            (t for t in sim.held() if t.type == p["yields"]), key=lambda t: (-t.quantity, t.id)
        )
        for thing in stacks:  # biggest stacks first, and no more than the goal needs
            if goal_met(sim.world, task, sim.me):
                break
            sim.put(thing, p["receptacle"])

    return build


def _go_to(snap: Snapshot, task: Task, budget: int) -> Plan | None:
    """The shortest path of ``go to`` moves (the snapshot's breadth-first search)."""
    place = task.params["place"]

    def build(sim: Rehearsal) -> None:
        sim.goto(place)

    return build_best(snap, _goal(task), [(snap.dist(snap.me.place, place), build)], budget, 1)


PLANNERS: dict[str, Callable[[Snapshot, Task, int], Plan | None]] = {
    **{family: _place_one for family in PLACE_CONDITION},
    "examine_in_light": _examine,
    "craft": lambda snap, task, budget: plan_craft(snap, task.params["item"], _goal(task), budget),
    "gather_and_deliver": _gather,
    "cooperate": _cooperate,
    "go_to": _go_to,
}


def _goal(task: Task) -> Goal:
    return lambda world, avatar_id: goal_met(world, task, avatar_id)


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
