"""Forks over HTTP: make one at a tick of any world of the tree, list them, read one, delete
one (``world.store.worlds`` keeps the registry and the stores, ``world.store.fork`` reads
them). Translates store outcomes into the API's errors; routes stay thin."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from migrations import head_revision, upgrade_recorded, upgrade_to_head
from server.credentials import Caller
from server.errors import Conflict, NotFound, Unprocessable
from server.models import AgentRow
from server.runtime import Runtime
from world.contract import MAIN_WORLD, ErrorCode
from world.state import Backend, World
from world.store import SqlBackend, session_factory
from world.store.database import WRITE_OPTION
from world.store.errors import StoreError
from world.store.fork import create_fork
from world.store.history import counts, world_at
from world.store.models import EventRow, RemovedThingRow
from world.store.past import past_backend
from world.store.worlds import (
    Fork,
    add_fork,
    drop_store,
    get_fork,
    has_forks,
    lineage,
    list_forks,
    location_for,
    make_store,
    open_store,
    remove_fork,
)

_TEMPLATE_LOCK = threading.Lock()  # one template made at a time in this process
# PostgreSQL: head revision -> the script that migrating a fork's empty schema ran (None: the
# migrations cannot be replayed as a script; each schema is migrated)
_SCHEMA_SCRIPTS: dict[str, str | None] = {}


@dataclass(frozen=True)
class WorldState:
    """One world as read: its clock, rules version, season, counts and (when asked) hash."""

    seed: int
    tick: int
    season: str
    day: bool
    rules_version: int
    counts: dict[str, int]
    state_hash: str | None


def _chain(session: Session, name: str) -> list[Fork]:
    try:
        return lineage(session, name)
    except StoreError as exc:
        raise NotFound(f"no world {name!r}", code=ErrorCode.UNKNOWN_WORLD) from exc


@contextmanager
def opened(
    runtime: Runtime, session: Session, name: str
) -> Iterator[tuple[Fork | None, Backend, Session]]:
    """World ``name`` as it is now (404 ``unknown_world``), over ``session`` of the main
    world's database: its fork (None for main), its backend and the session of its store."""
    chain = _chain(session, name)
    with runtime.stores.backend(session, chain) as (now, own):
        yield (chain[-1] if chain else None), now, own


def _up_to(tick: int, at_tick: int, whose: str) -> None:
    """422 ``tick_in_future`` for a tick past ``whose`` clock, ``tick``."""
    if at_tick > tick:
        raise Unprocessable(
            f"expected a tick up to {whose}, {tick}; got {at_tick}",
            code=ErrorCode.TICK_IN_FUTURE,
            details={"tick": tick},
        )


def read(
    runtime: Runtime, session: Session, name: str, at_tick: int | None, with_hash: bool
) -> WorldState:
    """World ``name`` now, or at the end of ``at_tick`` (422 ``tick_in_future`` past its
    clock); a fork before its own tick is its parent then."""
    with opened(runtime, session, name) as (fork, now, own):
        world = World(now, runtime.rules)
        if at_tick is None:
            stored = counts(session=own) if fork is None else _counted(now)
            return _state(world, stored, with_hash)
        _up_to(world.tick, at_tick, "the world's")
        if fork is not None and at_tick < fork.at_tick:
            return read(runtime, session, fork.parent, at_tick, with_hash)
        past: Backend | None = past_backend(own, at_tick, now=now)
        if past is None:  # a log from before counters events: only the main world has one
            past = world_at(session=own, tick=at_tick, rules=runtime.rules)
        return _state(World(past, runtime.rules), _counted(past), True)


def hashed(runtime: Runtime, session: Session, name: str) -> str:
    """World ``name``'s state hash now (one read of the whole world)."""
    with opened(runtime, session, name) as (_fork, now, _own):
        return World(now, runtime.rules).state_hash()


def create(runtime: Runtime, session: Session, parent: str, at_tick: int, name: str | None) -> Fork:
    """Fork ``parent`` at the end of ``at_tick`` as ``name`` (generated when None)."""
    name = name or f"fork-{secrets.token_hex(4)}"
    if name == MAIN_WORLD or get_fork(session, name) is not None:
        raise Conflict(f"a world named {name!r} exists", code=ErrorCode.WORLD_EXISTS)
    with opened(runtime, session, parent) as (made_at, now, own):
        _up_to(World(now).tick, at_tick, f"{parent!r}'s")
        if made_at is not None and at_tick < made_at.at_tick:
            raise Unprocessable(
                f"{parent!r} starts at tick {made_at.at_tick}; fork {made_at.parent!r} for "
                f"tick {at_tick}",
                code=ErrorCode.TICK_BEFORE_FORK,
                details={"at_tick": made_at.at_tick},
            )
        past = past_backend(own, at_tick, now=now)
        if past is None:
            raise Unprocessable(
                f"the log cannot say where the world's ids stood at tick {at_tick} (it was "
                "written before counters events); fork at a later tick",
                code=ErrorCode.TICK_UNREADABLE,
            )
        location = location_for(runtime.engine, name, secrets.token_hex(4))
        fork = Fork(name, parent, at_tick, time.time(), location)
        engine = new_store(runtime.engine, fork.location)
        try:
            with session_factory(engine)() as store:
                create_fork(store, past, at_tick)
                store.commit()
        finally:
            engine.dispose()
    _writing(session)
    if parent != MAIN_WORLD and get_fork(session, parent) is None:  # deleted meanwhile
        drop_store(runtime.engine, fork.location)
        raise NotFound(f"no world {parent!r}", code=ErrorCode.UNKNOWN_WORLD)
    try:
        add_fork(session, fork)
        session.commit()
    except IntegrityError as exc:  # made at the same moment by another request
        session.rollback()
        drop_store(runtime.engine, fork.location)  # this request's own: the other's is kept
        raise Conflict(f"a world named {name!r} exists", code=ErrorCode.WORLD_EXISTS) from exc
    return fork


def new_store(main: Engine, location: str) -> Engine:
    """An empty store at ``location``, migrated to head. A SQLite store is a copy of a template
    migrated once per schema version (``forks/.template-<head>.db``): a copy takes
    milliseconds where running the migrations takes a quarter of a second. A PostgreSQL schema
    cannot be copied; the first of a process is migrated and the statements that did it are
    kept, and later ones run those in one round trip (Alembic's own work, loading the
    revisions and asking the catalog, is half of migrating one)."""
    if main.dialect.name != "sqlite":
        engine = make_store(main, location)
        head = head_revision()
        with _TEMPLATE_LOCK:
            if head not in _SCHEMA_SCRIPTS:
                _SCHEMA_SCRIPTS[head] = upgrade_recorded(engine)
                return engine
        script = _SCHEMA_SCRIPTS[head]
        if script is None:
            upgrade_to_head(engine)
        else:
            with engine.begin() as conn:
                conn.exec_driver_sql(script)
        return engine
    template = Path(location).parent / f".template-{head_revision()}.db"
    with _TEMPLATE_LOCK:
        if not template.is_file():
            building = template.with_name(f"{template.name}.{secrets.token_hex(4)}")
            engine = make_store(main, str(building))
            try:
                upgrade_to_head(engine)
            finally:
                engine.dispose()  # the last connection's close folds the WAL into the file
            os.replace(building, template)  # whole or absent, for other servers too
    drop_store(main, location)
    shutil.copyfile(template, location)
    return open_store(main, location)


def delete(runtime: Runtime, session: Session, name: str) -> Fork:
    """Remove fork ``name`` and its store; never main, never a fork that has forks."""
    if name == MAIN_WORLD:
        raise Conflict("the main world cannot be deleted", code=ErrorCode.WORLD_IS_MAIN)
    _writing(session)  # the checks and the removal in one write: no fork made under it meanwhile
    fork = get_fork(session, name)
    if fork is None:
        raise NotFound(f"no world {name!r}", code=ErrorCode.UNKNOWN_WORLD)
    if has_forks(session, name):
        raise Conflict(f"{name!r} has forks; delete them first", code=ErrorCode.WORLD_HAS_FORKS)
    remove_fork(session, name)
    session.commit()
    runtime.forget(name)
    drop_store(runtime.engine, fork.location)
    return fork


def _writing(session: Session) -> None:
    """End ``session``'s reads and begin a write transaction. A SQLite transaction that read
    cannot write once another has committed since it began (SQLITE_BUSY_SNAPSHOT, a 503),
    which a stepped main world does all the time."""
    session.rollback()
    session.connection(execution_options={WRITE_OPTION: True})


def enlist(runtime: Runtime, caller: Caller) -> None:
    """Give ``caller`` a row in a fork's store: its episodes, judgments and hints refer to
    one. The row carries no credential (accounts are the main world's)."""
    with runtime.sessions() as session:
        if session.get(AgentRow, caller.id) is None:
            row = AgentRow(
                id=caller.id,
                name=caller.name,
                role=caller.role,
                token_hash=f"main:{caller.id}",  # never a token's hash: not a credential here
                avatar_id=caller.avatar_id,
                created_at=time.time(),
                revoked_at=None,
            )
            session.add(row)
            try:
                session.commit()
            except IntegrityError:  # another request enlisted it first
                session.rollback()
    runtime.members.add(caller.id)


@dataclass(frozen=True)
class Listed:
    fork: Fork | None  # None: the main world
    tick: int
    rows: int  # entity rows of its own store
    events: int  # of its own log


def listing(runtime: Runtime, session: Session, after: str | None, limit: int) -> list[Listed]:
    """Main first, then the forks by name, ``limit`` of them after ``after``."""
    worlds: list[Fork | None] = [] if after is not None else [None]
    worlds += list_forks(session, after=after, limit=limit + 1 - len(worlds))
    out = []
    for fork in worlds:
        if fork is None:
            out.append(Listed(None, World(SqlBackend(session)).tick, *_size(session)))
            continue
        with session_factory(runtime.stores.engine(fork))() as own:
            out.append(Listed(fork, World(SqlBackend(own)).tick, *_size(own)))
    return out


def _size(session: Session) -> tuple[int, int]:
    rows = sum(counts(session=session).values())
    rows += session.scalar(select(func.count()).select_from(RemovedThingRow)) or 0
    return rows, session.scalar(select(func.count()).select_from(EventRow)) or 0


def _state(world: World, stored: dict[str, int], with_hash: bool) -> WorldState:
    version = world.dynamics
    return WorldState(
        seed=world.seed,
        tick=world.tick,
        season=world.season,
        day=version.is_day(world.tick),
        rules_version=version.version,
        counts=stored,
        state_hash=world.state_hash() if with_hash else None,
    )


def _counted(backend: Backend) -> dict[str, int]:
    """Regions, places, things and avatars of a world read through a backend (a read of the
    whole world: a fork holds only what it changed)."""
    found = Counter(table for table, _row in backend.dump() if table != "world")
    return {f"{table}s": found[table] for table in ("region", "place", "thing", "avatar")}
