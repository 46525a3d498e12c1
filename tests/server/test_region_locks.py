"""Region locks on PostgreSQL (``world.store.regions``, design §4): two writers over one
database, as two server processes would be, run transactions of distant regions side by side
and make those of one region take turns; and the reason their locks are taken outside the
savepoints."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from migrations import upgrade_to_head
from world.state import World
from world.store import (
    SqlBackend,
    WorldRow,
    Writer,
    ensure_world,
    lock_world,
    make_engine,
    session_factory,
)
from world.store.regions import Scope

pytestmark = pytest.mark.postgres

PLACES = {"near": "0,0:0", "close": "1,0:0", "far": "10,0:0"}


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[tuple[Engine, Engine]]:
    with fresh_database("postgres", tmp_path) as url:
        first, second = make_engine(url), make_engine(url)
        upgrade_to_head(first)
        with session_factory(first)() as session:
            ensure_world(session, 7)
            session.commit()
        with session_factory(first)() as session:
            world = World(SqlBackend(session, lock_world(session)))
            for name, place in PLACES.items():
                world.add_avatar(name, name, place)
            world.commit()
            session.commit()
        try:
            yield first, second
        finally:
            first.dispose()
            second.dispose()


def _held(writer: Writer, avatar: str) -> tuple[threading.Event, threading.Event, threading.Thread]:
    """A transaction of ``avatar`` that holds its locks until released."""
    entered, release = threading.Event(), threading.Event()

    def hold(_session: Session, _row: WorldRow) -> None:
        entered.set()
        release.wait(30)

    thread = threading.Thread(target=writer.run, args=(hold, Scope(avatar)))
    thread.start()
    assert entered.wait(30)
    return entered, release, thread


def _done_within(writer: Writer, avatar: str, seconds: float) -> bool:
    done = threading.Event()
    thread = threading.Thread(
        target=lambda: (writer.run(lambda _s, _r: None, Scope(avatar)), done.set()), daemon=True
    )
    thread.start()
    return done.wait(seconds)


def test_distant_regions_run_side_by_side_and_one_region_takes_turns(
    engines: tuple[Engine, Engine],
) -> None:
    one, two = Writer(engines[0]), Writer(engines[1])
    try:
        _entered, release, holder = _held(one, "near")
        assert _done_within(two, "far", 10), "a step ten regions away waited"
        assert not _done_within(two, "close", 1), "a step one region away did not wait"
        release.set()
        holder.join(30)
        assert _done_within(two, "close", 10)
    finally:
        one.close()
        two.close()


def test_a_savepoint_rollback_gives_up_its_advisory_locks(engines: tuple[Engine, Engine]) -> None:
    """Why the writer locks on the batch's connection before a transaction's savepoint."""
    with engines[0].connect() as conn:
        conn.begin()
        savepoint = conn.begin_nested()
        conn.execute(text("SELECT pg_advisory_xact_lock(42)"))
        savepoint.rollback()
        held = conn.execute(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )
        ).scalar()
        conn.rollback()
    assert held == 0
