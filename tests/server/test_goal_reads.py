"""What a goal check of a place or gather task reads from the store, on SQLite and PostgreSQL:
the target receptacle's rows alone, in one statement, however many things lie around it in
its place (issue 38: reading them all cost a tenth of a batched step's time in the writer);
nothing where the transaction holds the place, nor in a step, which reads them with its
episode; and the verdict is the one that filtering the place's things gives, with things put
in, taken out or consumed earlier in the transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest
from harness import on_driver
from sqlalchemy.orm import Session

from server import episodes
from server.accounts import register_agent
from server.credentials import Caller
from server.runtime import Runtime
from world.schemas import StepIn
from world.state import ORIGIN, World
from world.store import WorldRow
from world.tasks import Task, goal_met

T = TypeVar("T")

KITCHEN = "0,0:2"  # region (0, 0) is always a village: kitchen 1 lies off living room 1
CLUTTER = 60  # apples on the kitchen's floor, beside the receptacle the goal looks in


def _in(runtime: Runtime, act: Callable[[World], T]) -> T:
    """``act`` on the world in one of ``runtime``'s world transactions (the writer's, as a
    step's), kept if it commits the world."""

    def work(session: Session, row: WorldRow) -> T:
        value = act(World(runtime.backend(session, row), runtime.rules))
        session.commit()
        return value

    return runtime.world_transaction(work)


class Reads:
    """The statements sent on the driver's cursor while ``on``, with the rows each returned."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, int]] = []
        self.on = False
        on_driver(monkeypatch, self._record)

    def _record(self, sql: str, rows: int) -> None:
        if self.on:
            self.sent.append((sql, rows))

    def during(self, check: Callable[[], bool]) -> tuple[bool, list[tuple[str, int]]]:
        self.sent, self.on = [], True
        try:
            return check(), self.sent
        finally:
            self.on = False


def _tasks(countertop: int) -> list[Task]:
    """Two tasks whose goal holds with two apples on the kitchen's countertop 1."""
    target = {
        "receptacle": countertop,
        "receptacle_label": "countertop 1",
        "place": KITCHEN,
        "place_name": "kitchen 1",
    }
    gather = {
        "yields": "apple",
        "units": 1,
        "baseline": 1,
        "resource": 2,  # the square's well: the goal reads only the receptacle
        "resource_label": "well 1",
        "resource_place": ORIGIN,
        "resource_place_name": "square 1",
    }
    return [
        Task.make("pick_two_and_place", {"object": "apple", **target}),
        Task.make("gather_and_deliver", {**gather, **target}),
    ]


def _verdict_from_the_whole_place(world: World, task: Task) -> bool:
    """The goal as it was checked before issue 38: the place's things, filtered."""
    p = task.params
    inside = [t for t in world.peek_things_at(KITCHEN) if t.container == p["receptacle"]]
    return sum(t.quantity for t in inside if t.type == "apple") >= 2


def _lay_out(world: World, avatar: str, stands: str, clutter: int) -> tuple[int, int]:
    """An avatar standing in ``stands`` and holding an apple, one apple on the kitchen's
    countertop 1 and ``clutter`` on its floor 1: the countertop's id and the held apple's."""
    world.add_avatar(avatar, avatar.title(), stands)
    found = {t.label: t for t in world.things_at(KITCHEN)}
    countertop, floor = found["countertop 1"], found["floor 1"]
    world.create_thing("apple", place=KITCHEN, container=countertop.id)
    for _ in range(clutter):
        world.create_thing("apple", place=KITCHEN, container=floor.id)
    carried = world.create_thing("apple", holder=avatar).id
    world.commit()
    return countertop.id, carried


def test_a_goal_check_reads_the_receptacles_rows_alone_and_judges_as_before(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ann stands in the square, two rooms from the kitchen.
    countertop, carried = _in(runtime, lambda world: _lay_out(world, "ann", ORIGIN, CLUTTER))
    tasks = _tasks(countertop)
    reads = Reads(monkeypatch)

    def step(world: World) -> None:
        world.avatar("ann")  # as a step reads its avatar, with what lies where it stands
        lying = world.peek_things_at(KITCHEN)
        inside = [t for t in lying if t.container == countertop]
        assert len(lying) > CLUTTER > 10 > len(inside)
        for task in tasks:
            met, sent = reads.during(lambda task=task: goal_met(world, task, "ann"))
            assert not met and met == _verdict_from_the_whole_place(world, task)
            # one read of the countertop's rows: before, all the kitchen's came back
            assert len(sent) == 1, sent
            sql, rows = sent[0]
            assert "FROM things WHERE" in sql and "things.container =" in sql, sql
            assert rows == len(inside)

        # Earlier in the same transaction: the carried apple and one from the floor put in
        # make three; then one taken out again and one eaten leave one, as the place says.
        on_floor = next(t.id for t in lying if t.type == "apple" and t.container != countertop)
        world.move(world.thing(carried), place=KITCHEN, container=countertop)
        world.move(world.thing(on_floor), place=KITCHEN, container=countertop)
        for task in tasks:
            assert goal_met(world, task, "ann")
            assert _verdict_from_the_whole_place(world, task)
        world.move(world.thing(carried), holder="ann")
        world.remove(world.thing(on_floor))
        for task in tasks:
            assert not goal_met(world, task, "ann")
            assert not _verdict_from_the_whole_place(world, task)
        world.move(world.thing(carried), place=KITCHEN, container=countertop)
        assert world.peek_contents(KITCHEN, countertop) == [
            t for t in world.peek_things_at(KITCHEN) if t.container == countertop
        ]

        # Once the transaction holds the place, the goal check reads nothing.
        world.things_at(KITCHEN)
        for task in tasks:
            met, sent = reads.during(lambda task=task: goal_met(world, task, "ann"))
            assert met and met == _verdict_from_the_whole_place(world, task)
            assert sent == []

    _in(runtime, step)  # the world is not committed: nothing changes


def test_a_goal_check_where_the_avatar_stands_reads_nothing_more(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step reads its avatar with what lies where it stands: a goal check there asks the
    store nothing more, and finds the receptacle's things among those."""
    countertop, carried = _in(runtime, lambda world: _lay_out(world, "bo", KITCHEN, 2))
    reads = Reads(monkeypatch)

    def step(world: World) -> None:
        world.avatar("bo")
        for task in _tasks(countertop):
            met, sent = reads.during(lambda task=task: goal_met(world, task, "bo"))
            assert sent == []
            assert not met and met == _verdict_from_the_whole_place(world, task)
        world.move(world.thing(carried), place=KITCHEN, container=countertop)
        for task in _tasks(countertop):
            assert goal_met(world, task, "bo") and _verdict_from_the_whole_place(world, task)

    _in(runtime, step)


def test_a_step_reads_its_goals_receptacle_with_its_episode(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step of a place or gather task, its avatar away from the receptacle, sends no read
    of the receptacle's own: its episode's read brought its rows (records.read_step), and the
    goal check judges from them as from the place's things."""

    def join(session: Session, row: WorldRow) -> Caller:
        agent, _token = register_agent(session, row, runtime.rules, "cy", "policy")
        session.commit()
        return Caller(agent.id, agent.name, agent.role, agent.avatar_id)

    cy = runtime.world_transaction(join)  # Cy stands in the square, two rooms away

    def countertop(world: World) -> int:
        return next(t.id for t in world.things_at(KITCHEN) if t.label == "countertop 1")

    receptacle = _in(runtime, countertop)

    def apples(count: int) -> Callable[[World], None]:
        def lay(world: World) -> None:
            for thing in world.contents(world.thing(receptacle)):
                world.remove(thing)
            for _ in range(count):
                world.create_thing("apple", place=KITCHEN, container=receptacle)
            world.commit()

        return lay

    reads = Reads(monkeypatch)
    _in(runtime, apples(1))
    task = _tasks(receptacle)[0]  # pick two apples and place them (the gather's well is none)
    begun = episodes.begin(runtime, cy, None, None, spec=task.spec())
    for index, met in ((1, False), (2, True)):
        if met:
            _in(runtime, apples(2))  # as another's delivery would

        def step(index: int = index) -> bool:
            body = StepIn(step=index, action="look")
            return episodes.step(runtime, cy, begun.episode_id, body).success

        success, sent = reads.during(step)
        assert success is met
        alone = [sql for sql, _ in sent if sql.startswith("SELECT things.")]
        assert not [sql for sql in alone if "things.container =" in sql], sent
        assert sum(sql.startswith("SELECT episodes.") for sql, _ in sent) == 1
