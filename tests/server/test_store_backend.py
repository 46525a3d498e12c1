"""The SQL store against the in-memory reference: same history, same dump, same hash."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from harness import on_driver
from sqlalchemy import func, select

from migrations import at_head, upgrade_to_head
from world import engine
from world.replay import replay
from world.snapshot import Snapshot
from world.state import ORIGIN, MemoryBackend, World
from world.store import (
    SqlBackend,
    backend,
    ensure_world,
    lock_world,
    make_engine,
    session_factory,
)
from world.store.database import is_sqlite
from world.store.history import image_at
from world.store.models import EventRow

SEED = 7
SCRIPT = [
    "look",
    "go to north road",
    "look",
    "inventory",
    "wait",
    "open cabinet 1",
    "take apple 1 from countertop 1",
]


def _choose(action: str, admissible: tuple[str, ...]) -> str:
    """The scripted action when possible here, else a possible one (so the run changes things)."""
    return action if action in admissible else admissible[min(2, len(admissible) - 1)]


def _apply(world: World, action: str | None, avatar: str) -> None:
    if action is None:
        world.add_avatar(avatar, avatar.title())
    else:
        engine.step(world, avatar, action)
    world.commit()


def _run_sql(db, avatar: str, script: list[str | None]) -> None:
    for action in script:
        if action is not None:  # look first in a throwaway transaction: looking settles things
            with db() as session:
                action = _choose(
                    action, engine.observe(World(SqlBackend(session)), avatar).admissible
                )
        with db() as session:
            _apply(World(SqlBackend(session, lock_world(session))), action, avatar)
            session.commit()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_database(request.param, tmp_path) as url:
        eng = make_engine(url)
        upgrade_to_head(eng)
        assert at_head(eng)
        factory = session_factory(eng)
        with factory() as s:
            ensure_world(s, SEED)
            s.commit()
        yield factory
        eng.dispose()


def _untimed(rows):
    return [(t, {k: v for k, v in r.items() if (t, k) != ("thing", "tick")}) for t, r in rows]


def test_sql_backend_matches_memory_backend(db) -> None:
    memory = MemoryBackend(SEED)
    inputs = [None, *SCRIPT, *SCRIPT]
    for action in inputs:
        if action is not None:
            action = _choose(action, engine.observe(World(memory.clone()), "ann").admissible)
        _apply(World(memory), action, "ann")
        with db() as session:
            meta = lock_world(session)
            _apply(World(SqlBackend(session, meta)), action, "ann")
            session.commit()
    with db() as session:
        sql_hash = World(SqlBackend(session)).state_hash()
        # Same rows, except when a thing was last settled: the in-memory backend hands out its
        # stored objects, so a read that settles without changing anything moves their tick.
        assert _untimed(SqlBackend(session).dump()) == _untimed(memory.dump())
        assert sql_hash == World(memory).state_hash()
        assert session.scalar(select(func.count()).select_from(EventRow)) == len(memory.events)
        # A planner's snapshot reads many places at once: the same copy, in the same order.
        stored = Snapshot.of(World(SqlBackend(session)), "ann")
        held = Snapshot.of(World(memory.clone()), "ann")
        assert len(stored.places) > 10 and len(stored.things) > 10
        assert list(stored.places.items()) == list(held.places.items())
        assert list(stored.things.items()) == list(held.things.items())
        assert stored.avatars == held.avatars


def test_a_crowd_is_read_alike_from_the_database_and_from_memory(db) -> None:
    """A step reads the first few of a place's crowd and their count (the index's work on
    SQL): the same avatars, in id order, and the same count as the in-memory backend."""
    memory = MemoryBackend(SEED)
    ids = [f"bee{k:02d}" for k in (5, 1, 9, 3, 7, 2, 8)]  # joined out of id order
    for avatar in ids:
        _apply(World(memory), None, avatar)
        _run_sql(db, avatar, [None])
    with db() as session:
        stored = SqlBackend(session)
        for without, limit in (("bee03", 3), ("nobody", 10), ("bee01", 0)):
            here = memory.load_crowd(ORIGIN, without, limit)
            there = stored.load_crowd(ORIGIN, without, limit)
            assert [a.id for a in there[0]] == [a.id for a in here[0]]
            assert there[1] == here[1]
        named, total = stored.load_crowd(ORIGIN, "bee03", 3)
        assert [a.id for a in named] == ["bee01", "bee02", "bee05"] and total == 6
        assert stored.load_crowd("0,0:1", "bee03", 3) == ([], 0)


def test_a_snapshot_reads_a_crowds_inventories_at_once(db, monkeypatch) -> None:
    """A planner's snapshot copies what every avatar in its places holds: one read for all
    of them (a fleet's thousand avatars at the origin cost a read each before), and the same
    copy as the in-memory backend's."""
    memory = MemoryBackend(SEED)
    crowd = [f"cat{k:02d}" for k in range(12)]
    for avatar in crowd:
        _apply(World(memory), None, avatar)
        _run_sql(db, avatar, [None])
    for action in ("open cabinet 1", "take apple 1 from countertop 1"):  # one holds something
        action = _choose(action, engine.observe(World(memory.clone()), "cat03").admissible)
        _apply(World(memory), action, "cat03")
        _run_sql(db, "cat03", [action])
    reads: list[str] = []
    on_driver(monkeypatch, lambda sql, _rows: reads.append(sql))
    with db() as session:
        stored = Snapshot.of(World(SqlBackend(session)), "cat00")
    held = Snapshot.of(World(memory.clone()), "cat00")
    assert set(crowd) <= set(stored.avatars) and stored.avatars == held.avatars
    assert list(stored.things.items()) == list(held.things.items())
    assert sum("FROM things WHERE things.holder" in sql for sql in reads) <= 2


def test_the_world_row_read_back_is_the_one_each_save_left(db) -> None:
    """A save writes the clock, the thing ids and the log's numbers, and the counters and the
    versions only where they changed: whichever it wrote, the world read back is as it left
    it. (SQLite's: PostgreSQL's clock is its log, and its row is written only with new thing
    ids or versions.)"""
    with db() as session:
        if not is_sqlite(session):
            pytest.skip("the world row keeps the clock on SQLite alone")
    changes = [
        lambda world: world.add_avatar("ann", "Ann"),
        lambda world: world.advance(),  # the clock alone
        lambda world: (world.advance(), world.create_thing("apple", place=ORIGIN)),  # counters
        lambda world: world.publish_version(replace(world.rules.dynamics, since_tick=99)),
        lambda world: world.advance(),
    ]
    for change in changes:
        with db() as session:
            world = World(SqlBackend(session, lock_world(session)))
            change(world)
            world.commit()
            session.commit()
            left = world.meta.copy()
        with db() as session:
            assert World(SqlBackend(session)).meta == left


def test_an_old_worlds_versions_are_parsed_once_and_written_only_when_published(
    db, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A world that has run for days holds thousands of rules versions (the forge publishes a
    drift every 2,000 ticks): a transaction that publishes none writes none, and each process
    parses the stored versions once for all the transactions that read them (issue 38)."""
    with db() as session:
        world = World(SqlBackend(session, lock_world(session)))
        for n in range(2_000):
            number = world.meta.versions.next_number
            world.publish_version(replace(world.dynamics, version=number, since_tick=n + 1))
        world.commit()
        session.commit()
    updates: list[str] = []
    on_driver(
        monkeypatch, lambda sql, _rows: updates.append(sql) if "UPDATE world" in sql else None
    )
    backend._versions.cache_clear()
    changes = [
        lambda world: world.advance(),  # the clock alone
        lambda world: (world.advance(), world.create_thing("apple", place=ORIGIN)),  # counters
        lambda world: world.advance(),
    ]
    for change in changes:
        with db() as session:
            world = World(SqlBackend(session, lock_world(session)))
            assert len(world.meta.versions) == 2_001
            change(world)
            world.commit()
            session.commit()
    assert backend._versions.cache_info().misses == 1
    assert updates and not any("versions" in sql for sql in updates)  # the world row alone
    with db() as session:  # a version published: written, and read back as it was left
        world = World(SqlBackend(session, lock_world(session)))
        world.publish_version(replace(world.dynamics, version=2_002, since_tick=world.tick))
        world.commit()
        session.commit()
        left = world.meta.copy()
    assert any(sql.startswith("UPDATE world_versions") for sql in updates)
    with db() as session:
        assert World(SqlBackend(session)).meta == left


def test_replay_of_the_log_gives_the_live_hash(db) -> None:
    _run_sql(db, "bob", [None, *SCRIPT])
    with db() as session:
        live = World(SqlBackend(session)).state_hash()
        events = [
            dict(r)
            for r in session.execute(select(EventRow.__table__).order_by(EventRow.id)).mappings()
        ]
    rebuilt = MemoryBackend(SEED)
    assert replay(events, rebuilt) == len(SCRIPT) + 1
    assert World(rebuilt).state_hash() == live


def test_time_travel_returns_the_image_as_of_a_tick(db) -> None:
    _run_sql(db, "cy", [None, "wait", "wait"])
    with db() as session:
        first = image_at(session=session, kind="thing", entity_id="1", at_tick=0)
        assert first is not None and first["id"] == 1 and first["as_of_tick"] == 0
        assert (
            image_at(session=session, kind="place", entity_id="0,0:0", at_tick=0)["id"] == "0,0:0"
        )
        assert image_at(session=session, kind="thing", entity_id="999999", at_tick=5) is None


def test_migrations_build_exactly_the_models(db) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    import forge.models  # noqa: F401  (the forge's tables, on the same Base)
    import server.models  # noqa: F401  (the server's tables, on the same Base)
    from world.store.models import Base

    with db() as session:
        diff = compare_metadata(MigrationContext.configure(session.connection()), Base.metadata)
    assert diff == []
