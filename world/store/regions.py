"""Region-level concurrency on PostgreSQL: what a world transaction locks, and the clock and
log numbers that no longer live on the world row (design §4 "Region locks", #16 §3).

SQLite keeps its single writer (``BEGIN IMMEDIATE``) and none of this applies there. On
PostgreSQL every lock is a transaction-level advisory lock, and the writer takes a
transaction's locks on the batch's connection *before* opening the transaction's savepoint:
PostgreSQL releases advisory and row locks taken inside a savepoint when that savepoint is
rolled back, and a batch must keep the locks of the transactions it keeps.

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


_TAKE = {  # unnest keeps the array's order, and the aggregate calls the lock row by row
    True: text("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(CAST(:keys AS bigint[])) k"),
    False: text(
        "SELECT bool_and(pg_try_advisory_xact_lock(k)) FROM unnest(CAST(:keys AS bigint[])) k"
    ),
}
_PLACE = text("SELECT place FROM avatars WHERE id = :avatar")
# The world shared, then the avatar, in one round trip (select items are evaluated in order).
_WORLD_AVATAR = {
    True: text(
        "SELECT pg_advisory_xact_lock_shared(:w) IS NULL, pg_advisory_xact_lock(:a) IS NULL"
    ),
    False: text("SELECT pg_try_advisory_xact_lock_shared(:w), pg_try_advisory_xact_lock(:a)"),
}


def _take(conn: Connection, keys: Sequence[int], *, wait: bool) -> None:
    """Take ``keys`` in the order given; without ``wait``, raise Busy if one is held."""
    got = conn.execute(_TAKE[wait], {"keys": list(keys)}).scalar()
    if not wait and not got:
        raise Busy


def lock(conn: Connection, scope: Scope | None, *, wait: bool) -> Locked | None:
    """Take the locks of one transaction on the batch's connection (outside its savepoint).
    ``wait`` only for the first transaction of a batch, which holds nothing yet: the others
    try, and raise Busy rather than wait while holding what earlier ones took."""
    if scope is None:
        _take(conn, [WORLD_KEY], wait=wait)
        return None
    got = conn.execute(_WORLD_AVATAR[wait], {"w": WORLD_KEY, "a": avatar_key(scope.avatar)}).one()
    if not wait and not all(got):
        raise Busy
    place = conn.execute(_PLACE, {"avatar": scope.avatar}).scalar()
    if place is None:  # not in the world yet: it joins at the origin, a world-wide event
        raise ScopeError(f"avatar {scope.avatar!r} has no place yet")
    regions = near(*region_of(place))
    _take(conn, sorted(region_lock_key(*r) for r in regions), wait=wait)
    return Locked(scope.avatar, regions)


def check_written(locked: Locked, places: Sequence[str], avatars: Sequence[Any]) -> None:
    """Refuse a write of a place, thing or avatar outside the regions ``locked`` holds."""
    for place in places:
        if region_of(place) not in locked.regions:
            raise ScopeError(f"wrote {place!r} outside the regions locked for {locked.avatar!r}")
    for avatar in avatars:
        if region_of(avatar.place) not in locked.regions:
            raise ScopeError(f"moved avatar {avatar.id!r} outside the locked regions")


# -- the clock and the log's numbers -------------------------------------------------------
# "Now" is the last tick handed out (the sequence's last value); a transaction starts there and
# its first advance draws the next one, which another region may have drawn meanwhile: the
# action's event then logs where it started (``from_tick``), and a replay starts it there.
_NOW = "(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bigworld_ticks)"
# ``txn_seq`` is the last log transaction numbered (begins key their draw on it, with the
# avatar): the batch numbers its own at its commit, so its transactions all read the same one.
JOB_READ = text(
    f"SELECT seed, {_NOW} AS tick, next_thing_id, counters, versions, "
    "(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bigworld_txns) "
    "AS txn_seq, last_event_id FROM world_meta WHERE id = 1"
)
LOGGED_READ = text(
    "SELECT seed, coalesce((SELECT max(tick) FROM events), tick) AS tick, next_thing_id, "
    "counters, versions, txn_seq, last_event_id FROM world_meta WHERE id = 1"
)
NEXT_TICK = text("SELECT nextval('bigworld_ticks')")
RESERVE = "SELECT next_thing_id, counters FROM world_meta WHERE id = 1 FOR UPDATE"
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
    """Lock the world row to draw thing ids and labels; NOWAIT (Busy) unless ``wait``.
    Returns the row and the seconds it took."""
    from sqlalchemy.exc import OperationalError

    try:
        started = time.perf_counter()
        row = conn.execute(text(RESERVE if wait else RESERVE + " NOWAIT")).mappings().one()
        return row, time.perf_counter() - started
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise Busy from exc
        raise


def number_log(conn: Connection, groups: Sequence[int]) -> tuple[list[int], list[int]]:
    """Under :data:`LOG_KEY`, the log transaction numbers of ``len(groups)`` groups and the
    ids of their ``sum(groups)`` events, ascending: drawn while no other batch can commit, so
    the log's order is the order of commits. Returns (txns, ids); the caller holds LOG_KEY."""
    row = conn.execute(_NUMBERS, {"groups": len(groups), "events": sum(groups)}).one()
    return sorted(row[0] or []), sorted(row[1] or [])


def take_log_lock(conn: Connection) -> float:
    """Wait for :data:`LOG_KEY`; returns the seconds waited."""
    started = time.perf_counter()
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOG_KEY})
    return time.perf_counter() - started
