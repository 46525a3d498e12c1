"""What the writer's transactions know of regions, places and the world row without reading
them again (``world.store.known``), on SQLite and PostgreSQL: steps served from it answer as
steps that read the tables, and leave the same state; a place changed in a batch is seen by
the batch's later transactions, one rolled back is not, and one changed by another process is
seen by the next batch; a batch that fails leaves nothing known that was not committed; and a
fork's regions are its own. What a batched step sends, statement by statement, is
``test_batch_round_trips.py``'s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dbfixtures import fresh_database
from harness import ADMIN_TOKEN, Api, AppServer, Statements, db_state
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from server import worlds
from server.runtime import Runtime
from world import engine, world_events
from world.contract import MAIN_WORLD
from world.state import World
from world.store import WorldRow, lock_world, make_engine, session_factory
from world.store.backend import SqlBackend
from world.store.known import Batch, Known
from world.store.regions import Scope

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _in(runtime: Runtime, act: Callable[[World], Any]) -> Callable[[Session, WorldRow], Any]:
    """A world transaction of ``runtime`` that applies ``act`` to its world and keeps it."""

    def work(session: Session, row: WorldRow) -> Any:
        world = World(runtime.backend(session, row), runtime.rules)
        value = act(world)
        world.commit()
        session.commit()
        return value

    return work


def _batch(runtime: Runtime, works: list[Callable[[Session, WorldRow], Any]]) -> list[Any]:
    """``works`` as one batch of the writer: each one's value, or the exception it raised."""
    futures = runtime.writer.submit_many([(work, None) for work in works])
    out = []
    for future in futures:
        try:
            out.append(future.result(60))
        except Exception as exc:
            out.append(exc)
    return out


def _flooded_until(place: str) -> Callable[[World], Any]:
    return lambda world: world.place(place).attrs.get("flooded_until")


def _fleet_run(url: str, data: Path, rounds: int) -> tuple[list[Any], str]:
    """A fleet's agent with 6 open episodes steps them in batches (with a step repeated with
    another action: a 409), and two agents of one episode each step theirs in between (scoped,
    on PostgreSQL); every answer, and the world's hash at the end."""
    answers: list[Any] = []
    server = AppServer(url, data).start()
    try:
        admin = Api(server, ADMIN_TOKEN)
        fleet = admin.agent("fleet", max_open_episodes=6)
        players = [fleet] * 6 + [admin.agent(f"solo{i}") for i in range(2)]
        open_: list[tuple[int, int, list[str]]] = []  # each player's episode, step, admissible

        def begin(api: Api) -> tuple[int, int, list[str]]:
            begun = api.post("/v1/episodes", json={}).json()
            answers.append(begun)
            return begun["episode_id"], 0, begun["admissible_actions"] or ["look"]

        open_ = [begin(api) for api in players]
        turn = 0
        for _ in range(rounds):
            steps = []
            for episode, last, admissible in open_:
                turn += 1
                action = admissible[turn * 7 % len(admissible)]
                steps.append({"episode_id": episode, "step": last + 1, "action": action})
            repeat = {**steps[0], "action": "wait"}
            batched = fleet.post("/v1/steps", json=[*steps[:6], repeat]).json()["items"]
            results = [item["result"] for item in batched[:6]]
            for api, step in zip(players[6:], steps[6:], strict=True):
                single = {"step": step["step"], "action": step["action"]}
                path = f"/v1/episodes/{step['episode_id']}/steps"
                results.append(api.post(path, json=single).json())
            answers.extend([*batched, *results[6:]])
            for i, (api, step, result) in enumerate(zip(players, steps, results, strict=True)):
                if result["done"]:
                    open_[i] = begin(api)
                else:
                    open_[i] = (step["episode_id"], step["step"], result["admissible_actions"])
    finally:
        server.stop()
    return answers, db_state(url)["hash"]


@pytest.mark.parametrize("kind", DATABASES)
def test_steps_served_from_what_the_writer_knows_answer_as_steps_that_read_the_tables(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "known").mkdir()
    (tmp_path / "read").mkdir()
    with fresh_database(kind, tmp_path / "known") as url:
        known = _fleet_run(url, tmp_path / "known-data", rounds=8)
    with monkeypatch.context() as unknowing:  # every transaction reads the tables
        unknowing.setattr(Known, "region", lambda _self, _rx, _ry: None)
        unknowing.setattr(Known, "place_rows", lambda _self, _rx, _ry: None)
        unknowing.setattr(Batch, "world_row", lambda _self: None)
        with fresh_database(kind, tmp_path / "read") as url:
            read = _fleet_run(url, tmp_path / "read-data", rounds=8)
    assert known[0] == read[0]  # every observation, admissible list, tick and error alike
    assert known[1] == read[1]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_batch_sees_its_own_place_changes_and_the_next_sees_another_process(
    runtime: Runtime, statements: Statements
) -> None:
    def floodable(world: World) -> list[str]:
        """Two outdoor places of one region, generating regions until one has them."""
        for rx in range(1, 20):
            world.region(rx, 0)
            found = [p.id for p in world_events.floodable(world, rx, 0)]
            if len(found) >= 2:
                return found
        raise AssertionError("no region with two outdoor places")

    flooded, dry = runtime.world_transaction(_in(runtime, floodable))[:2]

    def flood_then_fail(world: World) -> None:
        world_events.flood(world, dry, world.tick + 50)
        world.commit()
        raise RuntimeError("given up after writing")

    statements.on = True
    out = _batch(
        runtime,
        [
            _in(runtime, _flooded_until(flooded)),  # reads the region's places
            _in(runtime, lambda world: world_events.flood(world, flooded, world.tick + 50)),
            _in(runtime, _flooded_until(flooded)),  # the flood above, kept by the batch
            _in(runtime, flood_then_fail),
            _in(runtime, _flooded_until(dry)),  # that flood was rolled back
        ],
    )
    statements.on = False
    assert out[0] is None and out[2] == out[1]["until"]
    assert isinstance(out[3], RuntimeError) and out[4] is None
    assert statements.of("places") == 1  # read once, for the whole batch

    # Another process floods the dry place: the next batch reads the places again.
    other = make_engine(runtime.settings.resolved_database_url())
    try:
        with session_factory(other)() as session:
            world = World(SqlBackend(session, lock_world(session)), runtime.rules)
            until = world_events.flood(world, dry, world.tick + 70)["until"]
            world.commit()
            session.commit()
    finally:
        other.dispose()
    assert _batch(runtime, [_in(runtime, _flooded_until(dry))]) == [until]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_failed_batch_leaves_nothing_known_that_was_not_committed(
    runtime: Runtime, statements: Statements
) -> None:
    far = (40, 40)

    def refuse(_conn: Any) -> None:
        raise RuntimeError("the disk is gone")

    event.listen(runtime.engine, "commit", refuse)
    try:
        (failed,) = _batch(runtime, [_in(runtime, lambda world: world.region(*far))])
    finally:
        event.remove(runtime.engine, "commit", refuse)
    assert isinstance(failed, RuntimeError)
    peek = _in(runtime, lambda world: world.peek_region(*far))
    assert runtime.world_transaction(peek) is None  # not generated, and not known either

    runtime.world_transaction(_in(runtime, lambda world: world.region(*far)))
    statements.on = True
    region = runtime.world_transaction(peek)
    statements.on = False
    assert region is not None and (region.rx, region.ry) == far
    assert statements.of("regions") == 0  # committed, so known: not read again


def _fork(runtime: Runtime, name: str) -> Runtime:
    """A fork of ``runtime``'s world at its tick now, and the fork's runtime."""
    with runtime.sessions() as session:
        tick = World(SqlBackend(session), runtime.rules).tick
        worlds.create(runtime, session, MAIN_WORLD, tick, name)
    made = runtime.world(name)
    assert made is not None
    return made


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_forks_known_regions_are_its_own(runtime: Runtime) -> None:
    def peek(world_runtime: Runtime, rx: int, ry: int) -> bool:
        found = world_runtime.world_transaction(
            _in(world_runtime, lambda world: world.peek_region(rx, ry))
        )
        return found is not None

    runtime.world_transaction(_in(runtime, lambda world: world.region(0, 0)))
    first = _fork(runtime, "first")
    first.world_transaction(_in(first, lambda world: world.region(30, 30)))
    later = _in(runtime, lambda world: (engine.heartbeat(world), world.region(31, 31)))
    runtime.world_transaction(later)
    assert peek(first, 30, 30) and not peek(runtime, 30, 30)
    assert peek(runtime, 31, 31) and not peek(first, 31, 31)  # made after the fork's tick

    with runtime.sessions() as session:
        worlds.delete(runtime, session, "first")
    again = _fork(runtime, "first")  # the same name, at a tick where main holds (31, 31)
    assert not peek(again, 30, 30)  # the deleted fork's regions went with it
    assert peek(again, 31, 31)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_step_in_a_fork_reads_no_inventories_of_the_avatars_beside_it(
    runtime: Runtime, statements: Statements
) -> None:
    """A step's look reads the crowd where it stands through the fork's parent: who stands
    there, not what each of them holds (a planner's snapshot reads that, ``load_inventories``)."""

    def crowd(world: World) -> None:
        for k in range(6):
            world.add_avatar(f"cat{k}", f"cat{k}")
        world.create_thing("apple", holder="cat1")

    runtime.world_transaction(_in(runtime, crowd))
    fork = _fork(runtime, "beside")
    statements.on = True
    result = fork.world_transaction(_in(fork, lambda world: engine.step(world, "cat0", "look")))
    statements.on = False
    assert "cat1" in result.observation
    held = [sql for sql in statements.sent if "FROM things WHERE things.holder" in sql]
    assert held == [], statements.sent.most_common()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_batch_that_takes_the_world_reads_the_row_after_what_others_drew(
    runtime: Runtime,
) -> None:
    """A scoped transaction writes the world row (it creates a thing) while another process
    draws a tick; the batch's next transaction, the first to hold the whole world, starts from
    the clock as it is then, not as the scoped one left it."""
    runtime.world_transaction(_in(runtime, lambda world: world.add_avatar("ann", "ann")))
    other = make_engine(runtime.settings.resolved_database_url())
    drawn: list[int] = []

    def scoped(world: World) -> None:
        world.advance()
        world.create_thing("apple", place=world.avatar("ann").place)
        with other.connect() as conn:  # another process's transaction, elsewhere in the world
            drawn.append(conn.execute(text("SELECT nextval('bigworld_ticks')")).scalar_one())
            conn.commit()

    try:
        futures = runtime.writer.submit_many(
            [(_in(runtime, scoped), Scope("ann")), (lambda _session, row: row.meta.tick, None)]
        )
        results = [future.result(60) for future in futures]
    finally:
        other.dispose()
    assert results[1] == drawn[0]
