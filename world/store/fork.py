"""A fork's store: a world database that holds only what the fork changed, read over its parent
as it was at the fork's tick.

A fork at tick T of a parent world starts as a database of its own with the schema and one
world row (the parent's clock, ids and counters at T, :func:`create_fork`) and nothing else:
making one costs the same whatever the parent holds. :class:`ForkBackend` reads an entity from
the fork's own rows where the fork has written it, and otherwise from the parent at T
(``world.store.past.PastBackend``); everything the fork's transactions change is written to its
own rows, and every thing it removed is a row of ``removed_things``. Nothing a
fork does writes to its parent, and the parent moving on changes nothing the fork reads: the
parent at T is the parent's rows with the images of what changed since T.

A fork of a fork reads through its parent's :class:`ForkBackend` the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from world.entities import Avatar, Place, Region, Thing
from world.state import Backend, crowd_of
from world.store.backend import SqlBackend, WorldRow, insert_world, newest_event_after
from world.store.database import is_sqlite
from world.store.models import EventRow, RemovedThingRow, ThingRow
from world.values import ChangeSet, Event, WorldMeta

_EVENTS = EventRow.__table__
_THINGS = ThingRow.__table__
_REMOVED = RemovedThingRow.__table__


class Written:
    """What a fork has written: the things and avatars its ``state`` events name, the regions
    they name, and where its things and avatars have stood (places, and holders for things),
    kept up from its log (:meth:`refresh`, the events since the last look) and by this process's
    saves (:meth:`add`, before they commit). A read of anything not here is its parent's, with
    no query of the fork's own tables; what is here may be the fork's (a save rolled back
    leaves a name here and no row: the tables then say). Sets are replaced, never changed, so
    readers in other threads see one or the other."""

    def __init__(self) -> None:
        self.things: frozenset[int] = frozenset()
        self.avatars: frozenset[str] = frozenset()
        self.regions: frozenset[str] = frozenset()  # keys "rx,ry"
        self.spots: frozenset[str] = frozenset()  # places and holders of the fork's things
        self.crowds: frozenset[str] = frozenset()  # places of the fork's avatars
        self._seen = 0  # the last event id of the fork's log read
        self._lock = threading.Lock()

    def refresh(self, session: Session) -> None:
        with self._lock:
            last = newest_event_after(session, self._seen)
            if last is None:
                return
            conn = session.connection()
            state = select(_EVENTS.c.entities, _EVENTS.c.payload).where(
                _EVENTS.c.id > self._seen, _EVENTS.c.kind == "state"
            )
            for entities, payload in conn.execute(state):
                self._take(entities, payload.get("things", ()), payload.get("avatars", ()))
            self._seen = max(self._seen, int(last))

    def add(self, changes: ChangeSet) -> None:
        with self._lock:
            named = [f"thing:{i}" for i in (*changes.things, *changes.removed)]
            named += [f"avatar:{a}" for a in changes.avatars]
            named += [f"region:{r.key}" for r in changes.regions]
            named += [f"region:{place.split(':', 1)[0]}" for place in changes.places]
            things = [{"place": t.place, "holder": t.holder} for t in changes.things.values()]
            avatars = [{"place": a.place} for a in changes.avatars.values()]
            self._take(named, things, avatars)

    def _take(
        self,
        entities: Iterable[str],
        things: Iterable[dict[str, Any]],
        avatars: Iterable[dict[str, Any]],
    ) -> None:
        named: dict[str, set[str]] = {"thing": set(), "avatar": set(), "region": set()}
        for entity in entities:
            kind, key = entity.split(":", 1)
            if kind in named:
                named[kind].add(key)
        spots = {str(v) for t in things for k in ("place", "holder") if (v := t.get(k))}
        crowds = {str(v) for a in avatars if (v := a.get("place"))}
        # A set is replaced only where it grows: a step that writes what the fork already
        # wrote (most of them, once it has played a while) copies nothing.
        ids = {int(i) for i in named["thing"]}
        if not ids <= self.things:
            self.things = self.things | ids
        if not named["avatar"] <= self.avatars:
            self.avatars = self.avatars | named["avatar"]
        if not named["region"] <= self.regions:
            self.regions = self.regions | named["region"]
        if not spots <= self.spots:
            self.spots = self.spots | spots
        if not crowds <= self.crowds:
            self.crowds = self.crowds | crowds


class ForkBackend:
    """A :class:`world.state.Backend` over a fork's ``session`` and its ``parent`` at the
    fork's tick (a ``PastBackend``). ``written`` is what the fork wrote, kept across
    transactions by the caller (a fork's runtime); by default read from its whole log."""

    def __init__(
        self,
        session: Session,
        parent: Backend,
        row: WorldRow | None = None,
        written: Written | None = None,
    ) -> None:
        self.own = SqlBackend(session, row)
        self.parent = parent
        self.session = session
        self.written = written or Written()
        self.written.refresh(session)

    def _shadowed(self, ids: Iterable[int]) -> set[int]:
        """Which of the parent's things ``ids`` the fork has written or removed."""
        wanted = sorted(set(ids) & self.written.things)
        if not wanted:
            return set()
        own = self.own.rows_in(ThingRow, "id", wanted)
        gone = self.own.rows_in(RemovedThingRow, "id", wanted)
        return {row["id"] for row in (*own, *gone)}

    # -- loading ---------------------------------------------------------------------------
    def load_meta(self) -> WorldMeta:
        return self.own.load_meta()

    def load_region(self, rx: int, ry: int) -> Region | None:
        if f"{rx},{ry}" not in self.written.regions:
            return self.parent.load_region(rx, ry)
        return self.own.load_region(rx, ry) or self.parent.load_region(rx, ry)

    def load_places_in(self, rx: int, ry: int) -> list[Place]:
        if f"{rx},{ry}" not in self.written.regions:
            return self.parent.load_places_in(rx, ry)
        places = {p.id: p for p in self.parent.load_places_in(rx, ry)}
        places.update({p.id: p for p in self.own.load_places_in(rx, ry)})
        return [places[key] for key in sorted(places)]

    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        mine = [p for p in places if p in self.written.spots]
        own = self.own.load_things_in(mine) if mine else []
        parents = self.parent.load_things_in(places)
        return _merged(own, parents, self._shadowed(t.id for t in parents))

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        mine = place in self.written.spots
        own = self.own.load_contents(place, receptacle) if mine else []
        parents = self.parent.load_contents(place, receptacle)
        return _merged(own, parents, self._shadowed(t.id for t in parents))

    def load_inventory(self, avatar: str) -> list[Thing]:
        return self.load_inventories([avatar])[avatar]

    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        """The fork's own rows of those that have held its things, over the parent's (one
        read of each, and one look for what the fork shadows of all the parent's)."""
        mine = [avatar for avatar in avatars if avatar in self.written.spots]
        own = self.own.load_inventories(mine) if mine else {}
        parents = self.parent.load_inventories(avatars)
        shadowed = self._shadowed(t.id for held in parents.values() for t in held)
        return {a: _merged(own.get(a, []), parents[a], shadowed) for a in avatars}

    def load_thing(self, thing: int) -> Thing | None:
        if thing not in self.written.things:
            return self.parent.load_thing(thing)
        own = self.own.load_thing(thing)
        if own is not None or thing in self._shadowed([thing]):
            return own
        return self.parent.load_thing(thing)

    def load_avatar(self, avatar: str) -> Avatar | None:
        if avatar not in self.written.avatars:
            return self.parent.load_avatar(avatar)
        return self.own.load_avatar(avatar) or self.parent.load_avatar(avatar)

    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        mine = [p for p in places if p in self.written.crowds]
        own = {a.id: a for a in self.own.load_avatars_in(mine)} if mine else {}
        for avatar in self.parent.load_avatars_in(places):
            if avatar.id in own:
                continue
            if avatar.id not in self.written.avatars or self.own.load_avatar(avatar.id) is None:
                own[avatar.id] = avatar  # not moved away in the fork
        return [own[key] for key in sorted(own)]

    # -- the clock, the counters and saving: the fork's own -------------------------------

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        return crowd_of(self.load_avatars_in([place]), without, limit)

    def next_tick(self, tick: int) -> int:
        return self.own.next_tick(tick)

    def reserve_ids(self, meta: WorldMeta) -> None:
        self.own.reserve_ids(meta)

    def save(self, changes: ChangeSet) -> None:
        """The fork's own rows, and every thing removed recorded: one the parent held at the
        fork's tick may have a row of the fork's too (changed, then removed), and deleting
        that row alone would let the parent's show through. Ids the fork drew are above any
        the parent held then, so recording those hides nothing."""
        self.written.add(changes)
        self.own.save(changes)
        if changes.removed:
            rows = [{"id": i, "tick": changes.meta.tick} for i in sorted(changes.removed)]
            self.session.connection().execute(insert(RemovedThingRow), rows)

    # -- dumping ---------------------------------------------------------------------------
    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every entity of the fork in MemoryBackend's order: the parent's at the fork's tick
        with the fork's own rows over them (the parent's things streamed, the rest held)."""
        own: Rows = {"region": {}, "place": {}, "avatar": {}}
        own_things: list[dict[str, Any]] = []
        for table, row in self.own.dump():
            if table == "world":
                yield table, row
            elif table == "thing":
                own_things.append(row)
            else:
                own[table][_key(table, row)] = row
        removed = set(self.session.connection().execute(select(_REMOVED.c.id)).scalars())
        shadowed = removed | {row["id"] for row in own_things}
        inherited: Rows = {"region": {}, "place": {}, "avatar": {}}
        things = iter(own_things)
        mine = next(things, None)
        placed = False  # regions and places yielded (they come before the things)
        for table, row in self.parent.dump():
            if table in inherited:
                inherited[table][_key(table, row)] = row
            elif table == "thing":
                if not placed:
                    yield from _union("region", inherited, own)
                    yield from _union("place", inherited, own)
                    placed = True
                while mine is not None and mine["id"] < row["id"]:
                    yield "thing", mine
                    mine = next(things, None)
                if row["id"] not in shadowed:
                    yield "thing", row
        if not placed:  # a parent without things
            yield from _union("region", inherited, own)
            yield from _union("place", inherited, own)
        while mine is not None:
            yield "thing", mine
            mine = next(things, None)
        yield from _union("avatar", inherited, own)


Rows = dict[str, dict[Any, dict[str, Any]]]  # table -> key -> row


def _merged(own: list[Thing], parents: list[Thing], shadowed: set[int]) -> list[Thing]:
    """The fork's ``own`` things and its parent's it has not ``shadowed``, by id."""
    return sorted([*own, *(t for t in parents if t.id not in shadowed)], key=lambda t: t.id)


def _key(table: str, row: dict[str, Any]) -> Any:
    return (row["rx"], row["ry"]) if table == "region" else row["id"]


def _union(table: str, inherited: Rows, own: Rows) -> Iterator[tuple[str, dict[str, Any]]]:
    """The parent's rows of ``table`` with the fork's over them, in MemoryBackend's order."""
    rows = {**inherited[table], **own[table]}
    order = (lambda k: f"{k[0]},{k[1]}") if table == "region" else (lambda k: k)
    for key in sorted(rows, key=order):
        yield table, rows[key]


def create_fork(session: Session, parent: Backend, tick: int) -> WorldRow:
    """Write the world row of a new fork at ``tick`` into ``session``'s migrated, empty
    database: the parent's meta at ``tick`` (``parent`` is the parent as it was then, a
    ``PastBackend``), and a ``counters`` event at ``tick`` saying where its ids started, so
    that the fork's own past can be read too. The caller commits."""
    meta = parent.load_meta()
    meta.tick = tick
    row = WorldRow(meta, txn_seq=0, last_event_id=0)
    insert_world(session, row.values())
    if not is_sqlite(session):  # the clock's sequence resumes at the fork's tick
        session.execute(text("SELECT setval('bigworld_ticks', :next, false)"), {"next": tick + 1})
    started = Event(
        tick,
        "counters",
        None,
        (),
        {"next_thing_id": meta.next_thing_id, "counters": dict(meta.counters)},
    )
    own = SqlBackend(session, row)
    own.save(ChangeSet(meta=meta, events=[started]))
    return row
