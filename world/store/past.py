"""The stored world as it was at the end of a past tick, read from the tables as they are now
and the after-images of what changed since: a read costs what changed after that tick, not a
replay of the log up to it.

An entity that no ``state`` event after tick T names is as stored; one that such an event names
is its image in the last ``state`` event at or before T (absent if there is none, or if that
event removed it). Regions never change once generated, and the state event of a generation
names the region: a region is there at T if it is stored and no state event after T names it,
or one up to T does. The clock is T, the dynamics versions those in force from a tick up to T,
and the thing ids and label counters stand where the last ``counters`` event up to T left them
(``World.commit`` logs one with every transaction that drew an id). A log written before those
events existed cannot say where the counters stood: :func:`past_backend` answers ``None`` then,
and the caller replays the log instead (``history.world_at``).

This is what a fork at tick T reads through to, and ``GET /v1/world?at_tick=T``'s answer.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from world.entities import Avatar, Place, Region, Thing
from world.state import Backend, crowd_of
from world.store.backend import SqlBackend, newest_event_after, read_world
from world.store.errors import StoreError
from world.store.models import EventEntityRow, EventRow
from world.values import ChangeSet, WorldMeta

_EVENTS = EventRow.__table__
_LINKS = EventEntityRow.__table__
_KINDS = ("thing", "place", "avatar", "region")  # what state events name
_CHUNK = 500  # ids per IN list


class Since:
    """What a world's log says changed after ``tick``: the images at ``tick`` of every entity
    a later ``state`` event names (None: absent then), and the regions generated since.

    Images at a past tick never change, and a log only grows, so one ``Since`` is kept up by
    :meth:`refresh`, which reads only the events appended since it last looked (the log is
    numbered in commit order on both databases). A fork keeps one for its parent, so that a
    step in it reads what its parent changed since the last step, not since the fork's tick.
    A refresh replaces the maps rather than changing them: a backend holding the earlier ones
    reads on undisturbed, and a map that names more entities than a reader's snapshot of the
    log shows is still right (each image is the entity at ``tick``)."""

    def __init__(self, tick: int) -> None:
        self.tick = tick
        self.things: dict[int, Thing | None] = {}
        self.places: dict[str, Place] = {}
        self.avatars: dict[str, Avatar | None] = {}
        self.unborn: frozenset[str] = frozenset()  # region keys
        self.meta: WorldMeta | None = None  # the world's at ``tick``, once read
        self._seen: int | None = None  # the last event id read (None: none yet)
        self._lock = threading.Lock()

    def refresh(self, session: Session) -> None:
        """Take in the state events after ``tick`` that ``session`` sees and this has not."""
        with self._lock:
            conn = session.connection()
            # The entities named since, from the events' own lists: no index of event_entities
            # by event to keep up on every step for this. The first look finds the events after
            # the tick by the tick index; later ones those after the last id seen, by the key
            # (``tick + 0``: not the tick index, whose range would hold every event since).
            state = _EVENTS.c.kind == "state"
            last = newest_event_after(session, self._seen or 0)
            if self._seen is None:
                changed = select(_EVENTS.c.entities).where(state, _EVENTS.c.tick > self.tick)
            else:
                changed = select(_EVENTS.c.entities).where(
                    state, _EVENTS.c.id > self._seen, _EVENTS.c.tick + 0 > self.tick
                )
            named: set[str] = set()
            if last is not None or self._seen is None:
                for entities in conn.execute(changed).scalars():
                    named.update(entities)
            if last is not None:
                self._seen = int(last)
            elif self._seen is None:
                self._seen = 0
            known = (self.things, self.places, self.avatars)
            fresh = sorted(
                e
                for e in named
                if e.split(":", 1)[0] in _KINDS and not _known(e, known, self.unborn)
            )
            if fresh:
                self._take(conn, fresh)

    def _take(self, conn: Any, entities: list[str]) -> None:
        state = _EVENTS.c.kind == "state"
        latest: dict[str, int] = {}
        for chunk in _chunks(entities):
            last = (
                select(_LINKS.c.entity, func.max(_EVENTS.c.id))
                .join(_EVENTS, _EVENTS.c.id == _LINKS.c.event_id)
                .where(state, _EVENTS.c.tick <= self.tick, _LINKS.c.entity.in_(chunk))
                .group_by(_LINKS.c.entity)
            )
            latest.update({entity: int(event) for entity, event in conn.execute(last)})
        payloads: dict[int, dict[str, Any]] = {}
        for ids in _chunks(sorted(set(latest.values()))):
            rows = conn.execute(
                select(_EVENTS.c.id, _EVENTS.c.payload).where(_EVENTS.c.id.in_(ids))
            )
            payloads.update({int(i): payload for i, payload in rows})
        things, places, avatars = dict(self.things), dict(self.places), dict(self.avatars)
        unborn = set(self.unborn)
        for entity in entities:
            kind, key = entity.split(":", 1)
            payload = payloads.get(latest[entity]) if entity in latest else None
            image = _image(payload, kind, key) if payload is not None else None
            if kind == "region":
                # A generation's state event names the region; one named by none up to the
                # tick was generated since (its region_generated event may carry an earlier
                # tick: a step generates before its clock advances).
                if payload is None:
                    unborn.add(key)
            elif kind == "thing":
                things[int(key)] = None if image is None else Thing.from_row(image)
            elif kind == "avatar":
                avatars[key] = None if image is None else Avatar(**image)
            elif image is not None:  # places are never removed: one changed since was there
                places[key] = Place(**image)
        self.things, self.places, self.avatars = things, places, avatars
        self.unborn = frozenset(unborn)


def _known(
    entity: str,
    maps: tuple[dict[int, Thing | None], dict[str, Place], dict[str, Avatar | None]],
    unborn: frozenset[str],
) -> bool:
    kind, key = entity.split(":", 1)
    things, places, avatars = maps
    if kind == "thing":
        return int(key) in things
    if kind == "avatar":
        return key in avatars
    if kind == "place":
        return key in places
    return key in unborn


class PastBackend:
    """A read-only :class:`world.state.Backend` over the stored world at the end of ``tick``.
    Open a ``World`` over it to read (its ``state_hash`` included); saving is refused.
    ``now`` is the world as it is (a fork's store, or by default the session's tables), and
    ``since`` what changed after ``tick``, read from ``now``'s log (kept up by the caller). Its
    images are handed out as copies: a ``World`` changes what it loads, and ``since`` is kept
    for later readers."""

    def __init__(self, tick: int, meta: WorldMeta, now: Backend, since: Since) -> None:
        self.now = now
        self.tick = tick
        self._meta = meta
        # entity -> its image at ``tick`` (None: absent then), for each entity changed since:
        # the maps as they stand now (a later refresh of ``since`` replaces, never changes, them)
        self._things = since.things
        self._places = since.places
        self._avatars = since.avatars
        self._unborn = since.unborn

    # -- Backend ---------------------------------------------------------------------------
    def load_meta(self) -> WorldMeta:
        return self._meta.copy()

    def load_region(self, rx: int, ry: int) -> Region | None:
        region = self.now.load_region(rx, ry)
        return region if region is not None and region.key not in self._unborn else None

    def load_places_in(self, rx: int, ry: int) -> list[Place]:
        if self.load_region(rx, ry) is None:
            return []
        return [
            _copy_place(self._places[p.id]) if p.id in self._places else p
            for p in self.now.load_places_in(rx, ry)
        ]

    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        wanted = set(places)
        then = [t for t in self._things.values() if t is not None and t.place in wanted]
        return self._merged(self.now.load_things_in(places), then)

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        then = [
            t
            for t in self._things.values()
            if t is not None and t.place == place and t.container == receptacle
        ]
        return self._merged(self.now.load_contents(place, receptacle), then)

    def load_inventory(self, avatar: str) -> list[Thing]:
        return self.load_inventories([avatar])[avatar]

    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        stored = self.now.load_inventories(avatars)
        then: dict[str, list[Thing]] = {avatar: [] for avatar in avatars}
        for image in self._things.values():
            if image is not None and image.holder in then:
                then[image.holder].append(image)
        return {avatar: self._merged(stored[avatar], then[avatar]) for avatar in avatars}

    def load_thing(self, thing: int) -> Thing | None:
        if thing not in self._things:
            return self.now.load_thing(thing)
        image = self._things[thing]
        return None if image is None else image.copy()

    def load_avatar(self, avatar: str) -> Avatar | None:
        if avatar not in self._avatars:
            return self.now.load_avatar(avatar)
        image = self._avatars[avatar]
        return None if image is None else _copy_avatar(image)

    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        wanted = set(places)
        stored = [a for a in self.now.load_avatars_in(places) if a.id not in self._avatars]
        then = [
            _copy_avatar(a) for a in self._avatars.values() if a is not None and a.place in wanted
        ]
        return sorted([*stored, *then], key=lambda a: a.id)

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        return crowd_of(self.load_avatars_in([place]), without, limit)

    def _merged(self, stored: Iterable[Thing], then: Iterable[Thing]) -> list[Thing]:
        """``stored`` things unchanged since the tick, and copies of the images ``then`` of
        changed ones, by id."""
        kept = [t for t in stored if t.id not in self._things]
        return sorted([*kept, *(t.copy() for t in then)], key=lambda t: t.id)

    def save(self, changes: ChangeSet) -> None:
        raise StoreError(f"the world at tick {self.tick} is read-only")

    def next_tick(self, tick: int) -> int:
        raise StoreError(f"the world at tick {self.tick} is read-only")

    def reserve_ids(self, meta: WorldMeta) -> None:
        raise StoreError(f"the world at tick {self.tick} is read-only")

    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every entity at ``tick`` in MemoryBackend's order, in one pass over the stored
        world's (regions, places, things by id, avatars) with the images merged in."""
        yield "world", self._meta.row()
        regions: set[str] = set()
        images = sorted((t.row() for t in self._things.values() if t is not None), key=_by_id)
        pending = iter(images)
        image = next(pending, None)
        avatars = {a.id: dataclasses.asdict(a) for a in self._avatars.values() if a is not None}
        for table, row in self.now.dump():
            if table == "region" and f"{row['rx']},{row['ry']}" not in self._unborn:
                regions.add(f"{row['rx']},{row['ry']}")
                yield table, row
            elif table == "place" and row["id"].split(":", 1)[0] in regions:
                place = self._places.get(row["id"])
                yield table, dataclasses.asdict(place) if place is not None else row
            elif table == "thing":
                while image is not None and image["id"] < row["id"]:
                    yield "thing", image
                    image = next(pending, None)
                if row["id"] not in self._things:
                    yield table, row
            elif table == "avatar" and row["id"] not in self._avatars:
                avatars[row["id"]] = row
        while image is not None:
            yield "thing", image
            image = next(pending, None)
        for key in sorted(avatars):
            yield "avatar", avatars[key]


def past_backend(
    session: Session, tick: int, now: Backend | None = None, since: Since | None = None
) -> PastBackend | None:
    """The world at the end of ``tick`` (at most the world's own), or ``None`` where the log
    does not say where the counters stood then (written before ``counters`` events). ``now``
    as for :class:`PastBackend`; ``since``, a :class:`Since` of ``tick`` kept from an earlier
    call over the same log, is brought up to date and reused (by default a new one is read)."""
    since = since or Since(tick)
    if since.tick != tick:
        raise ValueError(f"expected what changed since tick {tick}, got since {since.tick}")
    if since.meta is None:
        since.meta = _meta_at(session, tick)
        if since.meta is None:
            return None
    since.refresh(session)
    return PastBackend(tick, since.meta, now or SqlBackend(session), since)


def _meta_at(session: Session, tick: int) -> WorldMeta | None:
    """The world's meta at the end of ``tick``: None where no ``counters`` event says it."""
    row = read_world(session)
    conn = session.connection()
    at_or_before = _EVENTS.c.tick <= tick
    last = conn.execute(
        select(_EVENTS.c.payload)
        .where(_EVENTS.c.kind == "counters", at_or_before)
        .order_by(_EVENTS.c.id.desc())
        .limit(1)
    ).scalar()
    if last is None:
        any_state = select(_EVENTS.c.id).where(_EVENTS.c.kind == "state", at_or_before).limit(1)
        if conn.execute(any_state).first() is not None:
            return None  # things existed by then, and no counters event says how many
        last = {"next_thing_id": 1, "counters": {}}  # nothing drawn yet: as at genesis
    return WorldMeta(
        seed=row.meta.seed,
        tick=tick,
        next_thing_id=int(last["next_thing_id"]),
        counters=dict(last["counters"]),
        versions=row.meta.versions.until(tick),
    )


def _image(payload: dict[str, Any], kind: str, key: str) -> dict[str, Any] | None:
    """``kind`` ``key``'s after-image in a state event's payload; None if it removed it."""
    if kind == "thing" and int(key) in payload.get("removed", ()):
        return None
    for image in payload.get(f"{kind}s", ()):
        if str(image["id"]) == key:
            return dict(image)
    return None


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _by_id(row: dict[str, Any]) -> int:
    return int(row["id"])


class Kept:
    """What has been read of one world at one past tick, kept across transactions: that world
    never changes, so an entity read once is the same for every later reader. A fork keeps one
    for its parent at its tick (``world.store.worlds.Stores.kept``), and a transaction in the
    fork that finds here all it reads of its parent opens no session of the parent's database
    and asks its log nothing (:class:`KeptPast`).

    At most ``limit`` things, places and avatars are kept; past that, everything is dropped
    and read again as needed (:meth:`put`). Maps are changed only under the lock, and readers
    in other threads see a key whole or not at all; ``meta`` is set whole, once."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self.meta: WorldMeta | None = None
        self.regions: dict[str, Region | None] = {}
        self.places_in: dict[str, tuple[Place, ...]] = {}  # by region key
        self.lying: dict[str, tuple[Thing, ...]] = {}  # the things lying in a place, by place
        self.inventories: dict[str, tuple[Thing, ...]] = {}
        self.things: dict[int, Thing | None] = {}
        self.avatars: dict[str, Avatar | None] = {}
        self.crowds: dict[str, tuple[Avatar, ...]] = {}  # the avatars standing in a place
        self._size = 0
        self._lock = threading.Lock()

    def put(self, into: dict[Any, Any], entries: dict[Any, Any], size: int) -> None:
        """Add ``entries`` (``size`` entities) to the map ``into``, first dropping everything
        kept if they would pass the limit."""
        with self._lock:
            if self._size + size > self.limit:
                maps = (self.regions, self.places_in, self.lying, self.inventories)
                for kept in (*maps, self.things, self.avatars, self.crowds):
                    kept.clear()
                self._size = 0
            into.update(entries)
            self._size += size


class KeptPast:
    """A read-only :class:`world.state.Backend` over a world at a past tick: what ``kept``
    holds, and the rest read through ``open_past()`` (a ``PastBackend``, opened at the first
    read ``kept`` cannot answer) and kept. Each entity is handed out as a copy of its own,
    the same one for the whole transaction (a ``World`` changes what it loads)."""

    def __init__(self, kept: Kept, open_past: Callable[[], Backend]) -> None:
        self.kept = kept
        self._open_past = open_past
        self._past: Backend | None = None
        self._things: dict[int, Thing] = {}
        self._places: dict[str, Place] = {}
        self._avatars: dict[str, Avatar] = {}

    @property
    def past(self) -> Backend:
        if self._past is None:
            self._past = self._open_past()
        return self._past

    # -- handing out copies ----------------------------------------------------------------
    def _thing(self, thing: Thing) -> Thing:
        if thing.id not in self._things:
            self._things[thing.id] = thing.copy()
        return self._things[thing.id]

    def _place(self, place: Place) -> Place:
        if place.id not in self._places:
            self._places[place.id] = _copy_place(place)
        return self._places[place.id]

    def _avatar(self, avatar: Avatar) -> Avatar:
        if avatar.id not in self._avatars:
            self._avatars[avatar.id] = _copy_avatar(avatar)
        return self._avatars[avatar.id]

    def _kept(
        self,
        kept: dict[Key, Value],
        key: Key,
        read: Callable[[], Value],
        size: Callable[[Value], int] = lambda _: 1,
    ) -> Value:
        """What ``kept`` holds for ``key``, or ``read()`` (which opens the parent), kept. The
        value is taken into a local first: the limit may drop it from the map meanwhile."""
        value = kept.get(key, _UNREAD)
        if value is _UNREAD:
            value = read()
            self.kept.put(kept, {key: value}, size(value))
        return value

    # -- Backend ---------------------------------------------------------------------------
    def load_meta(self) -> WorldMeta:
        if self.kept.meta is None:
            self.kept.meta = self.past.load_meta()
        return self.kept.meta.copy()

    def load_region(self, rx: int, ry: int) -> Region | None:
        region = self._kept(self.kept.regions, f"{rx},{ry}", lambda: self.past.load_region(rx, ry))
        return None if region is None else dataclasses.replace(region)

    def load_places_in(self, rx: int, ry: int) -> list[Place]:
        read = lambda: tuple(self.past.load_places_in(rx, ry))  # noqa: E731
        return [self._place(p) for p in self._kept(self.kept.places_in, f"{rx},{ry}", read, len)]

    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        found = self._in_places(self.kept.lying, places, lambda ps: self.past.load_things_in(ps))
        return [self._thing(found[i]) for i in sorted(found)]

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        """From the place's things, read whole and kept the first time: the past never
        changes, so a later goal check of a fork's step finds them kept and reads nothing."""
        return [t for t in self.load_things_in([place]) if t.container == receptacle]

    def load_inventory(self, avatar: str) -> list[Thing]:
        return self.load_inventories([avatar])[avatar]

    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        """What ``kept`` holds of each avatar's, and the rest read at once and kept."""
        held = {avatar: self.kept.inventories.get(avatar) for avatar in avatars}
        missing = [avatar for avatar, there in held.items() if there is None]
        if missing:
            fresh = {a: tuple(h) for a, h in self.past.load_inventories(missing).items()}
            self.kept.put(self.kept.inventories, fresh, sum(len(h) + 1 for h in fresh.values()))
            held.update(fresh)
        return {avatar: [self._thing(t) for t in there or ()] for avatar, there in held.items()}

    def load_thing(self, thing: int) -> Thing | None:
        image = self._kept(self.kept.things, thing, lambda: self.past.load_thing(thing))
        return None if image is None else self._thing(image)

    def load_avatar(self, avatar: str) -> Avatar | None:
        image = self._kept(self.kept.avatars, avatar, lambda: self.past.load_avatar(avatar))
        return None if image is None else self._avatar(image)

    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        found = self._in_places(self.kept.crowds, places, lambda ps: self.past.load_avatars_in(ps))
        return [self._avatar(found[key]) for key in sorted(found)]

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        return crowd_of(self.load_avatars_in([place]), without, limit)

    def _in_places(
        self,
        kept: dict[str, tuple[Placed, ...]],
        places: Sequence[str],
        read: Callable[[list[str]], Sequence[Placed]],
    ) -> dict[Any, Placed]:
        """What lies (or stands) in ``places`` by id: what ``kept`` holds, and the rest read
        with ``read`` (which opens the parent: called only for what is not kept) and kept,
        place by place (a place with nothing in it too)."""
        known = {p: kept.get(p) for p in places}
        found = {e.id: e for there in known.values() if there for e in there}
        missing = [p for p, there in known.items() if there is None]
        if missing:
            fresh = read(missing)
            by_place: dict[str, list[Placed]] = {p: [] for p in missing}
            for entity in fresh:
                by_place[str(entity.place)].append(entity)
            entries = {p: tuple(there) for p, there in by_place.items()}
            self.kept.put(kept, entries, len(fresh) + len(missing))
            found.update({e.id: e for e in fresh})
        return found

    def save(self, changes: ChangeSet) -> None:
        raise StoreError("the world at a past tick is read-only")

    def next_tick(self, tick: int) -> int:
        raise StoreError("the world at a past tick is read-only")

    def reserve_ids(self, meta: WorldMeta) -> None:
        raise StoreError("the world at a past tick is read-only")

    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return self.past.dump()


Placed = TypeVar("Placed", Thing, Avatar)
Key = TypeVar("Key")
Value = TypeVar("Value")
_UNREAD: Any = object()  # a key not kept (None is kept: absent at the tick)


def _copy_place(place: Place) -> Place:
    return Place(place.id, place.kind, place.name, dict(place.exits), place.outdoor,
                 dict(place.attrs))  # fmt: skip


def _copy_avatar(avatar: Avatar) -> Avatar:
    return Avatar(avatar.id, avatar.name, avatar.place, avatar.capacity, dict(avatar.attrs))
