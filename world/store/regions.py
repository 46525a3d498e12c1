"""Region-level concurrency on PostgreSQL: what a world transaction locks, and the clock and
log numbers that no longer live on the world row (design §4 "Region locks", #16 §3).

SQLite keeps its single writer (``BEGIN IMMEDIATE``) and none of this applies there. On
PostgreSQL every lock is a transaction-level advisory lock, and the writer takes a
transaction's locks on the batch's connection *before* opening the transaction's savepoint:
PostgreSQL releases advisory and row locks taken inside a savepoint when that savepoint is
rolled back, and a batch must keep the locks of the transactions it keeps. (They are taken
inside the savepoints of the batch's earlier transactions, left open, which nothing rolls back
once their own transaction has ended: ``driver.send_savepoints``.)

The locks, in the one order every transaction takes them (so no two wait on each other in a
circle): the world (shared by a transaction scoped to an avatar, exclusive by any other), the
avatar, then the regions within :data:`REACH` of the avatar's region, in key order. A
transaction that creates things also locks the world row, after those, to draw thing ids and
labels; and the batch takes :data:`LOG_KEY` last of all, to number its log in commit order.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, text

from world.entities import region_of

# A step moves at most one place (possibly into a neighbouring region) and then looks at the
# exits of where it stands, which may generate the region beyond: two regions in each
# direction cover what a step can reach. A write outside them is refused (ScopeError) and the
# writer runs that transaction again holding the whole world.
REACH = 2

_CLASS = 1 << 48  # lock keys: class in the top bits, so keys sort world < avatar < region < log
WORLD_KEY = 1 * _CLASS
LOG_KEY = 4 * _CLASS
# The forks of one PostgreSQL database live in schemas of their own, and advisory locks are the
# database's: each schema's keys are moved into a space of their own (bits 52 to 62), so that a
# fork's world lock does not wait on its parent's. Execution option of a fork's engine.
LOCK_SPACE = "bigworld_lock_space"
_SPACES = 2047
SESSION_SCOPE = "bigworld_scope"  # session.info: the Locked of a scoped transaction
SESSION_CLOCK = "bigworld_clock"  # session.info: True where ticks are drawn from the sequence
SESSION_LOG = "bigworld_log"  # session.info: event groups kept by this transaction, unnumbered
SESSION_PENDING = "bigworld_log_pending"  # ... appended since its last commit
SESSION_NOWAIT = "bigworld_nowait"  # session.info: a later transaction of a batch, never waits
SESSION_WAITED = "bigworld_waited"  # session.info: seconds it waited for the world row


@dataclass(frozen=True)
class Scope:
    """What a transaction acts on: the avatar whose step it is. A transaction without one holds
    the whole world."""

    avatar: str


@dataclass(frozen=True)
class Locked:
    """The regions a scoped transaction holds, for the write guard."""

    avatar: str
    regions: frozenset[tuple[int, int]]


class Busy(Exception):
    """A lock this transaction needs is held elsewhere, and waiting for it now could deadlock
    (the batch already holds others): the writer runs it first in the next batch."""


class ScopeError(Exception):
    """A scoped transaction wrote outside the regions it locked: the writer runs it again
    holding the whole world."""


def lock_space(schema: str) -> int:
    """What ``schema``'s lock keys are moved by (main, in no schema of its own, by nothing)."""
    return (zlib.crc32(schema.encode()) % _SPACES + 1) << 52


def spaced(conn: Connection, key: int) -> int:
    """``key`` in the lock space of ``conn``'s world."""
    return key + int(conn.get_execution_options().get(LOCK_SPACE, 0))


def avatar_key(avatar: str) -> int:
    return 2 * _CLASS + zlib.crc32(avatar.encode())


def region_lock_key(rx: int, ry: int) -> int:
    return 3 * _CLASS + ((rx & 0xFFFFFF) << 24) + (ry & 0xFFFFFF)


def near(rx: int, ry: int, reach: int = REACH) -> frozenset[tuple[int, int]]:
    """Regions within ``reach`` steps (Manhattan) of (rx, ry)."""
    return frozenset(
        (rx + dx, ry + dy)
        for dx in range(-reach, reach + 1)
        for dy in range(-reach, reach + 1)
        if abs(dx) + abs(dy) <= reach
    )


# Locks as (key, shared) pairs taken in array order. Trying stops at the first that is taken
# elsewhere (LIMIT 1 over the unnest, which the executor reads in order), so a transaction
# that must then wait holds only keys before the one it waits for, and the order holds.
_TRY = text(
    "SELECT i FROM unnest(CAST(:keys AS bigint[]), CAST(:shared AS boolean[])) "
    "WITH ORDINALITY AS t(k, s, i) WHERE NOT CASE WHEN s THEN "
    "pg_try_advisory_xact_lock_shared(k) ELSE pg_try_advisory_xact_lock(k) END LIMIT 1"
)
_WAIT = text(
    "SELECT count(CASE WHEN s THEN pg_advisory_xact_lock_shared(k) "
    "ELSE pg_advisory_xact_lock(k) END IS NULL) "
    "FROM unnest(CAST(:keys AS bigint[]), CAST(:shared AS boolean[])) AS t(k, s)"
)
_PLACE = text("SELECT place FROM avatars WHERE id = :avatar")


def _take(conn: Connection, keys: Sequence[tuple[int, bool]], *, wait: bool) -> float:
    """Take ``keys`` (key, shared) in the order given: tried first, and where one is taken
    elsewhere, waited for (``wait``) or refused with Busy. Returns the seconds waited, 0 when
    nothing was taken elsewhere: what ``/metrics`` counts as lock wait."""
    space = spaced(conn, 0)
    keys = [(k + space, s) for k, s in keys]
    params = {"keys": [k for k, _ in keys], "shared": [s for _, s in keys]}
    taken = conn.execute(_TRY, params).scalar()
    if taken is None:
        return 0.0
    if not wait:
        raise Busy
    rest = keys[int(taken) - 1 :]
    started = time.perf_counter()
    conn.execute(_WAIT, {"keys": [k for k, _ in rest], "shared": [s for _, s in rest]})
    return time.perf_counter() - started


def lock(conn: Connection, scope: Scope | None, *, wait: bool) -> tuple[Locked | None, float]:
    """Take the locks of one transaction on the batch's connection (outside its savepoint);
    returns what it holds and the seconds it waited. ``wait`` only for the first transaction
    of a batch, which holds nothing yet: the others try, and raise Busy rather than wait
    while holding what earlier ones took."""
    if scope is None:
        return None, _take(conn, [(WORLD_KEY, False)], wait=wait)
    waited = _take(conn, [(WORLD_KEY, True), (avatar_key(scope.avatar), False)], wait=wait)
    place = conn.execute(_PLACE, {"avatar": scope.avatar}).scalar()
    if place is None:  # not in the world yet: it joins at the origin, a world-wide event
        raise ScopeError(f"avatar {scope.avatar!r} has no place yet")
    regions = near(*region_of(place))
    keys = [(k, False) for k in sorted(region_lock_key(*r) for r in regions)]
    waited += _take(conn, keys, wait=wait)
    return Locked(scope.avatar, regions), waited


def check_written(locked: Locked, places: Sequence[str], avatars: Sequence[Any]) -> None:
    """Refuse a write of a place, thing or avatar outside the regions ``locked`` holds."""
    for place in places:
        if region_of(place) not in locked.regions:
            raise ScopeError(f"wrote {place!r} outside the regions locked for {locked.avatar!r}")
    for avatar in avatars:
        if region_of(avatar.place) not in locked.regions:
            raise ScopeError(f"moved avatar {avatar.id!r} outside the locked regions")


# -- the clock and the log's numbers -------------------------------------------------------
def _last(sequence: str) -> str:
    """SQL for the last value ``sequence`` handed out (its start - 1 before the first)."""
    return f"(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {sequence})"


# "Now" is the last tick handed out (the sequence's last value); a transaction starts there and
# its first advance draws the next one, which another region may have drawn meanwhile: the
# action's event then logs where it started (``from_tick``), and a replay starts it there.
_NOW = _last("bigworld_ticks")
# the versions' own row, as its stored text (world.store.backend parses each text once)
_VERSIONS_TEXT = "(SELECT versions::text FROM world_versions WHERE id = 1) AS versions"
# ``txn_seq`` is the last log transaction numbered (begins key their draw on it, with the
# avatar): the batch numbers its own at its commit, so its transactions all read the same one.
JOB_READ = text(
    f"SELECT seed, {_NOW} AS tick, next_thing_id, counters, {_VERSIONS_TEXT}, "
    f"{_last('bigworld_txns')} AS txn_seq, last_event_id FROM world_meta WHERE id = 1"
)
LOGGED_READ = text(
    "SELECT seed, coalesce((SELECT max(tick) FROM events), tick) AS tick, next_thing_id, "
    f"counters, {_VERSIONS_TEXT}, txn_seq, last_event_id FROM world_meta WHERE id = 1"
)
NEXT_TICK = text("SELECT nextval('bigworld_ticks')")
# A batch holding the whole world draws its ticks itself (world.store.known) and then moves the
# sequence past them, as many nextval calls would have.
SET_CLOCK = text("SELECT setval('bigworld_ticks', :tick)")
_RESERVE = text("SELECT next_thing_id, counters FROM world_meta WHERE id = 1 FOR UPDATE")
_RESERVE_TRY = text(
    "SELECT next_thing_id, counters FROM world_meta WHERE id = 1 FOR UPDATE SKIP LOCKED"
)
_NUMBERS = text(
    "SELECT (SELECT array_agg(nextval('bigworld_txns')) FROM generate_series(1, :groups)), "
    "(SELECT array_agg(nextval('bigworld_events')) FROM generate_series(1, :events))"
)
# After a replay onto an empty database, or a restart: the clock resumes after the log, never
# going back (another process may be drawing).
SYNC_CLOCK = text(
    "SELECT setval('bigworld_ticks', greatest("
    f"{_NOW}, coalesce((SELECT max(tick) FROM events), 0)) + 1, false)"
)


def reserve_ids(conn: Connection, *, wait: bool) -> tuple[Any, float]:
    """Lock the world row to draw thing ids and labels: tried first (SKIP LOCKED answers no
    row where another transaction holds it), then waited for (``wait``) or refused with Busy.
    Returns the row and the seconds waited (0 when it was free)."""
    row = conn.execute(_RESERVE_TRY).mappings().first()
    if row is not None:
        return row, 0.0
    if not wait:
        raise Busy
    started = time.perf_counter()
    row = conn.execute(_RESERVE).mappings().one()
    return row, time.perf_counter() - started


def number_log(conn: Connection, groups: Sequence[int]) -> tuple[list[int], list[int]]:
    """Under :data:`LOG_KEY`, the log transaction numbers of ``len(groups)`` groups and the
    ids of their ``sum(groups)`` events, ascending: drawn while no other batch can commit, so
    the log's order is the order of commits. Returns (txns, ids); the caller holds LOG_KEY."""
    row = conn.execute(_NUMBERS, {"groups": len(groups), "events": sum(groups)}).one()
    return sorted(row[0] or []), sorted(row[1] or [])


def take_log_lock(conn: Connection) -> float:
    """Take :data:`LOG_KEY`, waiting where another batch holds it; returns the seconds waited
    (0 when it was free)."""
    return _take(conn, [(LOG_KEY, False)], wait=True)
