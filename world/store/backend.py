"""``SqlBackend``: the world's Backend protocol over SQLAlchemy.

It loads only what a World asks for and saves only what a ChangeSet says changed: upserts of
the changed rows, deletes of removed things, the world row, and the events with their entity
index, all in the caller's transaction (it never commits). ``dump`` yields rows identical in
shape and order to ``MemoryBackend.dump``, so equal states hash equal whatever stores them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    Select,
    Text,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from world.entities import Avatar, Place, Region, Thing
from world.rules import RulesVersion, Versions
from world.store import regions as pg
from world.store.driver import Statement
from world.store.errors import StoreError
from world.store.known import SESSION_KNOWN, Known, Moved, place_row
from world.store.models import (
    AvatarRow,
    Base,
    PlaceRow,
    RegionRow,
    ThingRow,
)
from world.values import ChangeSet, Event, WorldMeta


class SqlBackend:
    """World storage in the session's database. Pass ``row`` when the caller already holds
    the world row (from :func:`world.store.database.lock_world`) to save a query.

    Reads go through Core ``select()`` on the tables, not the ORM identity map, so a row
    written by :meth:`save` is never shadowed by a stale object earlier in the transaction.

    Only what the World touched is saved. A read that settles a thing without changing an
    attribute moves its ``tick`` in memory only; the state hash is over the settled logical
    state, so that does not make this backend and ``MemoryBackend`` disagree.
    """

    def __init__(self, session: Session, row: WorldRow | None = None) -> None:
        self.session = session
        self._row = row
        self._reserved = False  # this transaction holds the thing counters (PostgreSQL)
        self._things: dict[int, Thing] = {}
        self._avatars: dict[str, Avatar] = {}
        self._places: dict[str, Place] = {}
        # (place, without, limit) -> load_crowd's answer: the avatars' rows cannot change
        # before this backend's next save (a step's two looks at its place ask twice)
        self._crowds: dict[tuple[str, str, int], tuple[list[Avatar], int]] = {}
        # The rows of what an avatar holds (by avatar) and of what lies where it stands (by
        # place), read with the avatar (a step looks at both next); like the crowds, good until
        # this backend's next save.
        self._held: dict[str, list[dict[str, Any]]] = {}
        self._lying: dict[str, list[dict[str, Any]]] = {}
        # An avatar's rows as read with its step's episode (records.read_step): what
        # load_avatar would read, until this backend's next save.
        self._around: dict[str, list[list[Any]]] = {}
        # The rows of what lies in a receptacle (by place and receptacle), read with its step's
        # episode where its task's goal looks into it; good until this backend's next save.
        self._contents: dict[tuple[str, int], list[dict[str, Any]]] = {}
        # what the writer's transactions know of regions and places (world.store.known), and
        # where each avatar handed out stood as read or last saved (a move leaves a place)
        self._known: Known | None = session.info.get(SESSION_KNOWN)
        self._stood: dict[str, str | None] = {}

    # Like MemoryBackend, hand out one object per entity for the backend's lifetime: a World
    # and a peek at the same thing (tasks.peek_things_at) then see the same object.
    def _hand_thing(self, row: Any) -> Thing:
        if row["id"] not in self._things:
            self._things[row["id"]] = _thing(row)
        return self._things[row["id"]]

    def _hand_avatar(self, row: Any) -> Avatar:
        if row["id"] not in self._avatars:
            self._avatars[row["id"]] = _avatar(row)
            self._stood[row["id"]] = row["place"]
        return self._avatars[row["id"]]

    def _hand_place(self, row: Any) -> Place:
        if row["id"] not in self._places:
            self._places[row["id"]] = _place(row)
        return self._places[row["id"]]

    # -- loading ---------------------------------------------------------------------------
    def _rows(self, model: type, *columns: str, **values: Any) -> list[dict[str, Any]]:
        """Rows of ``model`` whose ``columns`` equal ``values`` (on the driver's cursor)."""
        stmt = _select_by(model.__table__.name, columns)  # type: ignore[attr-defined]
        return stmt.rows(self.session.connection(), values)

    def rows_in(self, model: type, column: str, values: Sequence[Any]) -> list[dict[str, Any]]:
        """Rows of ``model`` whose ``column`` is one of ``values``: one statement (the plain
        equality's for one value: a step asks for one place at a time)."""
        if len(values) == 1:
            return self._rows(model, column, **{column: values[0]})
        stmt = _select_in(model.__table__.name, column, len(values))  # type: ignore[attr-defined]
        return stmt.rows(self.session.connection(), {f"v{i}": v for i, v in enumerate(values)})

    def _world_row(self) -> WorldRow:
        if self._row is None:
            self._row = read_world(self.session)
        return self._row

    def load_meta(self) -> WorldMeta:
        """A copy of the stored meta: a World changes its own, and only :meth:`save` makes
        those changes the row's."""
        return self._world_row().meta.copy()

    def load_region(self, rx: int, ry: int) -> Region | None:
        if self._known is not None and (known := self._known.region(rx, ry)) is not None:
            return known
        rows = self._rows(RegionRow, "rx", "ry", rx=rx, ry=ry)
        if not rows:
            return None
        region = _region(rows[0])
        if self._known is not None:
            self._known.read_region(region)
        return region

    def load_places_in(self, rx: int, ry: int) -> list[Place]:
        rows = self._known.place_rows(rx, ry) if self._known is not None else None
        if rows is None:
            rows = self._rows(PlaceRow, "rx", "ry", rx=rx, ry=ry)
            if self._known is not None:
                self._known.read_places(rx, ry, rows)
        return [self._hand_place(r) for r in rows]

    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        """What lies in ``places``: from the rows read with an avatar standing there, by this
        transaction or ahead by its batch (``world.store.known``), else in one statement."""
        for place in places:
            if place not in self._lying and self._known is not None:
                known = self._known.lying(place)
                if known is not None:
                    self._lying[place] = known
        if all(p in self._lying for p in places):
            return [self._hand_thing(r) for p in places for r in self._lying[p]]
        return [self._hand_thing(r) for r in self.rows_in(ThingRow, "place", places)]

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        """One receptacle's things: from the place's rows where they were read with the avatar,
        or the receptacle's where they were read with the step's episode, else those rows
        alone (a goal check's; the place's other things may be many)."""
        rows = self._lying.get(place, self._contents.get((place, receptacle)))
        if rows is None:
            rows = self._rows(ThingRow, "place", "container", place=place, container=receptacle)
        return [self._hand_thing(r) for r in rows if r["container"] == receptacle]

    def load_inventory(self, avatar: str) -> list[Thing]:
        return self.load_inventories([avatar])[avatar]

    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        """What each of ``avatars`` holds: those read with their avatar from that read, the
        rest in one statement."""
        held = {avatar: self._held.get(avatar, []) for avatar in avatars}
        unread = [avatar for avatar in held if avatar not in self._held]
        if unread:
            for row in self.rows_in(ThingRow, "holder", unread):
                held[row["holder"]].append(row)  # an unread one's list is new
        return {avatar: [self._hand_thing(r) for r in rows] for avatar, rows in held.items()}

    def load_thing(self, thing: int) -> Thing | None:
        rows = self._rows(ThingRow, "id", id=thing)
        return self._hand_thing(rows[0]) if rows else None

    def read_around(
        self,
        avatar: str,
        rows: list[list[Any]],
        crowd: tuple[int, list[dict[str, Any]]] | None = None,
        contents: tuple[str, int, list[dict[str, Any]]] | None = None,
    ) -> None:
        """``avatar``'s rows as :data:`AROUND_COLUMNS` gave them, ``crowd``, (limit, rows)
        as :func:`crowd_select` gave them for its place, and ``contents``, (place, receptacle,
        the rows of the things in it), read in this transaction with nothing saved since (a
        step reads them with its episode): :meth:`load_avatar`, :meth:`load_crowd` and
        :meth:`load_contents` answer from them instead of reading them again."""
        self._around[avatar] = rows
        if contents is not None:
            place, receptacle, inside = contents
            self._contents[(place, receptacle)] = inside
        place = rows[0][_AVATAR_COLUMNS.index("place")]
        if crowd is not None and place is not None:
            limit, others = crowd
            self._crowds[(place, avatar, limit)] = self._crowd_of(others, limit)

    def load_avatar(self, avatar: str) -> Avatar | None:
        """The avatar, read in one statement with what it holds and what lies where it stands
        (:meth:`load_inventory` and :meth:`load_things_in` then answer from them)."""
        found = self._around.pop(avatar, None)
        if found is None:
            found = _AVATAR_AROUND.lists(self.session.connection(), {"id": avatar})
        if not found:
            return None
        split = len(_AVATAR_COLUMNS)
        row = dict(zip(_AVATAR_COLUMNS, found[0][:split], strict=True))
        things = [
            dict(zip(_THING_COLUMNS, values[split:], strict=True))
            for values in found
            if values[split] is not None  # the thing's id: None where there is none
        ]
        self._held[avatar] = [t for t in things if t["holder"] == avatar]
        if row["place"] is not None:
            self._lying[row["place"]] = [t for t in things if t["place"] == row["place"]]
        return self._hand_avatar(row)

    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        return [self._hand_avatar(r) for r in self.rows_in(AvatarRow, "place", places)]

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        """The first ``limit`` avatars by id standing in ``place`` but ``without``, and how
        many stand there but it: as read with ``without``'s step, as the batch's reads made
        ahead know them where ``without`` is elsewhere (``world.store.known``), else in one
        statement."""
        key = (place, without, limit)
        # a place ``without`` does not stand in as stored (where a step's avatar goes)
        elsewhere = self._stood.get(without, place) != place
        if key not in self._crowds and self._known is not None and elsewhere:
            standing = self._known.standing(place)
            if standing is not None and len(standing[1]) >= min(limit, standing[0]):
                count, rows = standing
                self._crowds[key] = ([self._hand_avatar(r) for r in rows[:limit]], count)
        if key not in self._crowds:
            rows = _crowd(max(limit, 1)).rows(
                self.session.connection(), {"place": place, "me": without}
            )
            self._crowds[key] = self._crowd_of(rows, limit)
        named, total = self._crowds[key]
        return list(named), total

    def _crowd_of(self, rows: list[dict[str, Any]], limit: int) -> tuple[list[Avatar], int]:
        """:meth:`load_crowd`'s answer from the rows of ``crowd_select(..., max(limit, 1))``."""
        total = rows[0][CROWD.name] if rows else 0
        return [self._hand_avatar(r) for r in rows[:limit]], total

    # -- the clock and the counters (PostgreSQL hands them out side by side) ---------------
    def next_tick(self, tick: int) -> int:
        if not self.session.info.get(pg.SESSION_CLOCK):
            return tick
        drawn = self._known.draw() if self._known is not None else None
        if drawn is None:
            drawn = int(self.session.connection().execute(pg.NEXT_TICK).scalar_one())
            if self._known is not None:
                self._known.drew(drawn)
        return max(tick, drawn)

    def reserve_ids(self, meta: WorldMeta) -> None:
        """On PostgreSQL, lock the world row and read its thing counters (another process may
        have moved them since this transaction began); SQLite's writer already holds them."""
        if self._reserved:
            return
        conn = self.session.connection()
        if conn.dialect.name == "sqlite":
            return
        row, took = pg.reserve_ids(conn, wait=not self.session.info.get(pg.SESSION_NOWAIT))
        info = self.session.info
        info[pg.SESSION_WAITED] = info.get(pg.SESSION_WAITED, 0.0) + took
        meta.next_thing_id = row["next_thing_id"]
        meta.counters = dict(row["counters"])
        self._reserved = True

    # -- saving ----------------------------------------------------------------------------
    def save(self, changes: ChangeSet) -> None:
        """Write one transaction's changes with Core statements (upserts, one delete, the
        world row, the events and their entity index)."""
        s = self.session.connection()  # Core on the connection: no ORM layer per statement
        things = list(changes.things.values())
        avatars = list(changes.avatars.values())
        places = list(changes.places.values())
        locked = self.session.info.get(pg.SESSION_SCOPE)
        if locked is not None:
            written = [*(p.id for p in places), *(t.place for t in things if t.place)]
            pg.check_written(locked, written, avatars)
        for thing_id in changes.removed:
            self._things.pop(thing_id, None)
        self._crowds.clear()
        self._held.clear()
        self._lying.clear()
        self._around.clear()
        self._contents.clear()
        if changes.regions:
            _upsert(s, RegionRow, ["rx", "ry"]).run(
                s, [dataclasses.asdict(r) for r in changes.regions]
            )
        place_rows = [place_row(p) for p in places]
        if place_rows:
            _upsert(s, PlaceRow, ["id"]).run(s, place_rows)
        if changes.removed:
            s.execute(delete(ThingRow).where(ThingRow.id.in_(sorted(changes.removed))))
        thing_rows = [t.row() for t in things]
        avatar_rows = [dataclasses.asdict(a) for a in avatars]
        upsert_rows(s, thing_rows, avatar_rows)
        row = before = self._world_row()
        if changes.events:
            row = append_events(self.session, row, changes.events)
        saved_row = None  # the world row as this save wrote it
        published = changes.meta.versions != row.meta.versions
        if s.dialect.name == "sqlite":
            row = saved_row = dataclasses.replace(row, meta=changes.meta.copy())
            write_world(s, row.values_since(before))
        elif self._reserved or published:
            # PostgreSQL: the clock and the log's numbers live in sequences; the row is written
            # only by a transaction that drew thing ids (holding its lock) or published rules,
            # the versions only by the latter.
            row = saved_row = dataclasses.replace(row, meta=changes.meta.copy())
            values = row.values(versions=published)
            write_world(s, {k: values[k] for k in _PG_META_COLUMNS if k in values})
        self._row = row
        if self._known is not None:
            self._known.wrote(changes.regions, place_rows, saved_row)
            moved = [Moved(self._stood.get(r["id"]), r) for r in avatar_rows]
            self._known.wrote_rows(moved, [*thing_rows, *changes.removed])
        self._stood.update((a.id, a.place) for a in avatars)

    # -- dumping ---------------------------------------------------------------------------
    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every stored entity in MemoryBackend's order (strings sorted in Python, so the
        database collation cannot change the order)."""
        yield "world", self.load_meta().row()
        regions = sorted((_region(r) for r in self._rows(RegionRow)), key=lambda r: r.key)
        for region in regions:
            yield "region", dataclasses.asdict(region)
        for place in sorted((_place(r) for r in self._rows(PlaceRow)), key=lambda p: p.id):
            yield "place", dataclasses.asdict(place)
        table = ThingRow.__table__
        result = (
            self.session.connection()
            .execute(select(table).order_by(table.c.id).execution_options(yield_per=5000))
            .mappings()
        )
        for thing in result:
            yield "thing", _thing(thing).row()
        for avatar in sorted((_avatar(r) for r in self._rows(AvatarRow)), key=lambda a: a.id):
            yield "avatar", dataclasses.asdict(avatar)


@dataclass(frozen=True)
class WorldRow:
    """The ``world_meta`` row: the world's meta, and the numbering of the event log (store
    bookkeeping, not world state: the last transaction group and event id appended)."""

    meta: WorldMeta
    txn_seq: int
    last_event_id: int

    @classmethod
    def from_row(cls, row: Any) -> WorldRow:
        """The row as read, its versions as stored: JSON text (:func:`_versions`)."""
        meta = WorldMeta(
            seed=row["seed"],
            tick=row["tick"],
            next_thing_id=row["next_thing_id"],
            counters=dict(row["counters"]),
            versions=_versions(row["versions"]),
        )
        return cls(meta, txn_seq=row["txn_seq"], last_event_id=row["last_event_id"])

    def values(self, *, versions: bool = True) -> dict[str, Any]:
        """The columns to write (all but the id; the versions only where ``versions``)."""
        return {
            **self.meta.row(versions=versions),
            "txn_seq": self.txn_seq,
            "last_event_id": self.last_event_id,
        }

    def values_since(self, before: WorldRow) -> dict[str, Any]:
        """The columns to write over the row ``before``: the clock, the thing ids and the
        log's numbers; the seed and the counters too where they changed, and the versions
        where one was published. Encoding the counters and versions for every transaction
        cost about 5% of a batched step's time in the writer, and the versions grow with the
        world's age (docs/benchmarks/fleet.md)."""
        meta, then = self.meta, before.meta
        published = meta.versions != then.versions
        if published or (meta.seed, meta.counters) != (then.seed, then.counters):
            return self.values(versions=published)
        return {
            "tick": meta.tick,
            "next_thing_id": meta.next_thing_id,
            "txn_seq": self.txn_seq,
            "last_event_id": self.last_event_id,
        }


def insert_world(session: Session, values: Mapping[str, Any]) -> None:
    """Insert the world row with ``values`` (``WorldRow.values``' columns), and its versions'
    row."""
    conn = session.connection()
    _VERSIONS_INSERT.run(conn, {"id": 1, "versions": values["versions"]})
    _META_INSERT.run(conn, {"id": 1, **{k: v for k, v in values.items() if k != "versions"}})


def write_world(conn: Connection, values: Mapping[str, Any]) -> None:
    """Write ``values`` (``WorldRow.values``' columns) to the world row, and the versions,
    where among them, to their own row."""
    versions = values.get("versions")
    if versions is not None:
        _VERSIONS_UPDATE.run(conn, {"versions": versions})
    _META_UPDATE.run(conn, {k: v for k, v in values.items() if k != "versions"})


@lru_cache(maxsize=8)
def _versions(stored: str) -> Versions:
    """The versions as stored (``world_versions``, read as JSON text with the world row:
    ``_META_READ``, ``regions.JOB_READ``), parsed once a process for each text: a world that
    has run for days holds thousands, and parsing them for every transaction grew a step's
    time with the world's age."""
    return Versions(RulesVersion.from_row(v) for v in json.loads(stored))


def read_world(session: Session, *, for_update: bool = False) -> WorldRow:
    """The world row (``StoreError`` when the world is not initialised). On PostgreSQL the
    clock is the latest tick logged (the row's ``tick`` is not kept there, ``regions``)."""
    conn = session.connection()
    row: Mapping[Any, Any] | None
    if conn.dialect.name == "sqlite":
        found = (_META_LOCK if for_update else _META_READ).rows(conn, {})
        row = found[0] if found else None
    else:
        row = conn.execute(pg.LOGGED_READ).mappings().first()
    if row is None:
        raise StoreError(
            "the world is not initialised (run `bigworld db upgrade`, start the server)"
        )
    return WorldRow.from_row(row)


def append_events(session: Session, row: WorldRow, events: Sequence[Event]) -> WorldRow:
    """Append events as one transaction group (the caller holds the world lock); returns the
    world row with the group's ``txn_seq`` and ``last_event_id``, for the caller to write.

    On PostgreSQL the group is numbered from sequences under the log lock: in the writer's
    batch at its commit (the group waits in the session until then, :func:`insert_log`),
    elsewhere (replays, tools) at once."""
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        txn, first = row.txn_seq + 1, row.last_event_id + 1
        insert_log(conn, [txn], list(range(first, first + len(events))), [events])
        return dataclasses.replace(row, txn_seq=txn, last_event_id=first + len(events) - 1)
    pending = session.info.get(pg.SESSION_PENDING)
    if pending is not None:
        pending.append(list(events))
        return row
    pg.take_log_lock(conn)
    txns, ids = pg.number_log(conn, [len(events)])
    insert_log(conn, txns, ids, [events])
    return row


def insert_log(
    conn: Connection, txns: Sequence[int], ids: Sequence[int], groups: Sequence[Sequence[Event]]
) -> None:
    """Insert event groups, the i-th numbered ``txns[i]``, their events taking ``ids`` in
    order, with their entity index."""
    rows: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    numbered = iter(ids)
    for txn, events in zip(txns, groups, strict=True):
        for ev in events:
            event_id = next(numbered)
            rows.append(
                {
                    "id": event_id,
                    "txn": txn,
                    "tick": ev.tick,
                    "kind": ev.kind,
                    "actor": ev.actor,
                    "entities": list(ev.entities),
                    "payload": ev.payload,
                }
            )
            links.extend({"entity": e, "event_id": event_id} for e in dict.fromkeys(ev.entities))
    if conn.dialect.name == "postgresql":
        _insert_json(conn, _EVENTS, rows)
        _insert_json(conn, _LINKS, links)
    else:
        _EVENTS_INSERT.run(conn, rows)
        _LINKS_INSERT.run(conn, links)


def _insert_json(conn: Connection, table: Any, rows: Sequence[dict[str, Any]]) -> None:
    """PostgreSQL: insert ``rows`` into ``table`` with one statement per :data:`JSON_ROWS` of
    them, sent as one JSON array (:func:`_from_json`). An ``executemany`` runs the INSERT once
    a row: a batch of 64 steps logs about 170 events and 360 entity links, and those executions
    took a fifth of the database's time a step; sent as an array a column, building the arrays
    took the server a tenth of a step (docs/benchmarks/fleet.md)."""
    insert = _json_insert(table.name)
    for start in range(0, len(rows), JSON_ROWS):
        insert.run(conn, {"rows": json.dumps(rows[start : start + JSON_ROWS])})


@cache
def _json_insert(table_name: str) -> Statement:
    return Statement(text(_from_json(table_name, "rows")))


def _from_json(table_name: str, bind: str) -> str:
    """``INSERT INTO table (columns) SELECT columns FROM json_populate_recordset(...)`` of the
    JSON array bound to ``bind``: each of its objects a row of the table's type (a JSON column
    takes its value's text)."""
    names = ", ".join(c.name for c in Base.metadata.tables[table_name].columns)
    return (
        f"INSERT INTO {table_name} ({names}) SELECT {names} "
        f"FROM json_populate_recordset(NULL::{table_name}, CAST(:{bind} AS json))"
    )


# Statements are built once and reused: building a statement and its cache key costs more
# than running it on SQLite, and a step runs about twenty.
_META = Base.metadata.tables["world_meta"]
_VERSIONS = Base.metadata.tables["world_versions"]
# with the versions' row, as its stored text (WorldRow.from_row parses it)
_STORED_VERSIONS = (
    select(type_coerce(_VERSIONS.c.versions, Text)).where(_VERSIONS.c.id == 1).scalar_subquery()
)
_META_READ_AS = [*_META.columns, Column("versions", Text)]
_META_SELECT = select(_META, _STORED_VERSIONS.label("versions")).where(_META.c.id == 1)
_META_READ = Statement(_META_SELECT, _META_READ_AS)
_META_LOCK = Statement(_META_SELECT.with_for_update(of=_META), _META_READ_AS)
_META_UPDATE = Statement(update(_META).where(_META.c.id == 1))
_VERSIONS_UPDATE = Statement(update(_VERSIONS).where(_VERSIONS.c.id == 1))
_META_INSERT = Statement(_META.insert())
_VERSIONS_INSERT = Statement(_VERSIONS.insert())
_EVENTS = Base.metadata.tables["events"]
_LINKS = Base.metadata.tables["event_entities"]
_EVENTS_INSERT = Statement(_EVENTS.insert())
_EVENT_ID = _EVENTS.c.id
_NEWEST_AFTER = Statement(
    select(_EVENT_ID).where(_EVENT_ID > bindparam("seen")).order_by(_EVENT_ID.desc()).limit(1),
    [_EVENT_ID],
)


def newest_event_after(session: Session, seen: int) -> int | None:
    """The id of the log's newest event if it is after ``seen``, else None: what a reader that
    keeps up with a log asks on every request, on the driver's cursor."""
    found = _NEWEST_AFTER.lists(session.connection(), {"seen": seen})
    return int(found[0][0]) if found else None


_LINKS_INSERT = Statement(_LINKS.insert())
JSON_ROWS = 10_000  # rows a JSON INSERT sends at most (its array's length)
_PG_META_COLUMNS = ("seed", "next_thing_id", "counters", "versions")


@cache
def _select_by(table_name: str, columns: tuple[str, ...]) -> Statement:
    table = Base.metadata.tables[table_name]
    where = (table.c[c] == bindparam(c) for c in columns)
    return Statement(select(table).where(*where), table.columns)


CROWD = Column("crowd", Integer)  # how many stand there

_AVATARS, _THINGS = AvatarRow.__table__, ThingRow.__table__
_AVATAR_COLUMNS = tuple(_AVATARS.columns.keys())
_THING_COLUMNS = tuple(_THINGS.columns.keys())
AVATAR_COLUMNS = tuple(_AVATARS.columns)
AROUND_COLUMNS = (*AVATAR_COLUMNS, *_THINGS.columns)


def avatar_around(avatar: Any, before: Sequence[Any] = ()) -> Select[Any]:
    """The avatar whose id is ``avatar`` (a bind, or a column of another table) with the
    things it holds and those lying where it stands: a row per thing, of
    :data:`AROUND_COLUMNS` after the columns ``before`` (a union's nulls), the thing's
    columns null where there is none (each side from its own index)."""
    return (
        select(*before, *AROUND_COLUMNS)
        .select_from(
            _AVATARS.outerjoin(
                _THINGS,
                or_(_THINGS.c.holder == _AVATARS.c.id, _THINGS.c.place == _AVATARS.c.place),
            )
        )
        .where(_AVATARS.c.id == avatar)
    )


_AVATAR_AROUND = Statement(avatar_around(bindparam("id")), AROUND_COLUMNS)


def crowd_select(place: Any, me: Any, limit: Any) -> Select[Any]:
    """The first ``limit`` avatars by id in ``place`` but ``me`` (binds, or expressions), each
    row with how many stand there but ``me`` (both from the index on place and id)."""
    there = (_AVATARS.c.place == place, _AVATARS.c.id != me)
    counted = select(func.count()).select_from(_AVATARS).where(*there).scalar_subquery()
    return (
        select(*_AVATARS.columns, counted.label(CROWD.name))
        .where(*there)
        .order_by(_AVATARS.c.id)
        .limit(limit)
    )


@lru_cache(maxsize=8)
def _crowd(limit: int) -> Statement:
    """:func:`crowd_select` of the binds ``place`` and ``me``."""
    return Statement(
        crowd_select(bindparam("place"), bindparam("me"), limit), (*_AVATARS.columns, CROWD)
    )


@lru_cache(maxsize=256)
def _select_in(table_name: str, column: str, count: int) -> Statement:
    """One statement per list length (``v0``...): the driver has no expanding parameters."""
    table = Base.metadata.tables[table_name]
    listed = table.c[column].in_([bindparam(f"v{i}") for i in range(count)])
    return Statement(select(table).where(listed), table.columns)


@cache
def _upsert_for(dialect: str, table_name: str, keys: tuple[str, ...]) -> Statement:
    table = Base.metadata.tables[table_name]
    stmt = (postgresql if dialect == "postgresql" else sqlite).insert(table)
    others = [c.name for c in table.columns if c.name not in keys]
    return Statement(
        stmt.on_conflict_do_update(
            index_elements=list(keys), set_={name: stmt.excluded[name] for name in others}
        )
    )


def upsert_rows(
    conn: Connection, things: Sequence[dict[str, Any]], avatars: Sequence[dict[str, Any]]
) -> None:
    """Write these things' and avatars' rows (INSERT ... ON CONFLICT (id) DO UPDATE). On
    PostgreSQL in one statement (where there are any), each table's rows sent as one JSON
    array (a round trip and an execution a step less: a step that moves writes both); on
    SQLite an ``executemany`` a table, which runs in-process."""
    if conn.dialect.name != "postgresql":
        if things:
            _upsert(conn, ThingRow, ["id"]).run(conn, things)
        if avatars:
            _upsert(conn, AvatarRow, ["id"]).run(conn, avatars)
    elif things or avatars:
        _ROWS_UPSERT.run(conn, {"things": json.dumps(things), "avatars": json.dumps(avatars)})


def _json_upsert(table_name: str) -> str:
    """:func:`_from_json` of the bind named as the table, ``ON CONFLICT (id) DO UPDATE``."""
    names = [c.name for c in Base.metadata.tables[table_name].columns if c.name != "id"]
    updated = ", ".join(f"{n} = excluded.{n}" for n in names)
    return f"{_from_json(table_name, table_name)} ON CONFLICT (id) DO UPDATE SET {updated}"


_ROWS_UPSERT = Statement(
    text(f"WITH avatar_upsert AS ({_json_upsert('avatars')}) {_json_upsert('things')}")
)


def _upsert(conn: Connection, model: type, keys: Sequence[str]) -> Statement:
    """INSERT ... ON CONFLICT (keys) DO UPDATE, in the connection's dialect."""
    return _upsert_for(conn.dialect.name, model.__table__.name, tuple(keys))  # type: ignore[attr-defined]


def _region(row: Any) -> Region:
    return Region(
        rx=row["rx"],
        ry=row["ry"],
        kind=row["kind"],
        n_places=row["n_places"],
        generated_tick=row["generated_tick"],
    )


def _place(row: Any) -> Place:
    return Place(
        id=row["id"],
        kind=row["kind"],
        name=row["name"],
        exits=dict(row["exits"]),
        outdoor=row["outdoor"],
        attrs=dict(row["attrs"]),
    )


def _thing(row: Any) -> Thing:
    return Thing(
        id=row["id"],
        type=row["type"],
        kind=row["kind"],
        num=row["num"],
        place=row["place"],
        container=row["container"],
        holder=row["holder"],
        attrs=dict(row["attrs"]),
        tick=row["tick"],
    )


def _avatar(row: Any) -> Avatar:
    return Avatar(
        id=row["id"],
        name=row["name"],
        place=row["place"],
        capacity=row["capacity"],
        attrs=dict(row["attrs"]),
    )
