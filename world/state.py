"""The world as one transaction sees it: lazily loaded entities over a pluggable backend.

A :class:`World` is opened over a :class:`Backend` for one step (or one read). It loads only
what the step asks for, settles each entity's lazy dynamics as it is loaded, records what
changed, and hands a :class:`ChangeSet` to the backend on :meth:`World.commit`. The in-memory
backend here serves tests, scripted agents and the oracle; ``world.store`` maps the same
protocol onto SQLAlchemy.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from world import dynamics, worldgen
from world.entities import Avatar, Place, Region, Thing, region_key, region_of
from world.errors import UnknownEntityError
from world.rules import Rules, RulesVersion, Versions, default_rules
from world.values import ChangeSet, Event, WorldMeta

ORIGIN = "0,0:0"  # where new avatars appear: the hub of region (0, 0)


class Backend(Protocol):
    """Where a world's state lives. Loaders return ``None``/empty for what does not exist."""

    def load_meta(self) -> WorldMeta: ...
    def load_region(self, rx: int, ry: int) -> Region | None: ...
    def load_places_in(self, rx: int, ry: int) -> list[Place]: ...
    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        """Everything lying in any of ``places``."""
        ...

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        """What lies inside one receptacle in ``place``: those of :meth:`load_things_in`'s
        things whose ``container`` is ``receptacle`` (a goal check reads no more)."""
        ...

    def load_inventory(self, avatar: str) -> list[Thing]: ...
    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        """What each of ``avatars`` holds (one read for all: a snapshot copies a crowd's)."""
        ...

    def load_thing(self, thing: int) -> Thing | None: ...
    def load_avatar(self, avatar: str) -> Avatar | None: ...
    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        """The avatars standing in any of ``places``."""
        ...

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        """The first ``limit`` avatars by id standing in ``place`` but ``without``, and how
        many stand there but it (:func:`crowd_of` over :meth:`load_avatars_in` does)."""
        ...

    def save(self, changes: ChangeSet) -> None: ...
    def next_tick(self, tick: int) -> int:
        """The tick an advance to ``tick`` reaches: ``tick`` itself, or later where the store
        hands ticks out to transactions running side by side (PostgreSQL)."""
        ...

    def reserve_ids(self, meta: WorldMeta) -> None:
        """Before each new thing: at the transaction's first, bring ``meta``'s thing id and
        label counters up to date and hold them for the rest of the transaction; after that,
        nothing."""
        ...

    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every stored entity as (table, canonical row), in a canonical order."""
        ...


def canonical_hash(rows: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """SHA-256 over canonical JSON rows: equal states hash equal, whatever stores them."""
    digest = hashlib.sha256()
    for table, row in rows:
        digest.update(table.encode())
        digest.update(json.dumps(row, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()


class World:
    """One transaction's view of the world. Not thread-safe; open one per step."""

    def __init__(self, backend: Backend, rules: Rules | None = None) -> None:
        self.backend = backend
        self.rules = rules or default_rules()
        self.meta = backend.load_meta()
        self._regions: dict[str, Region] = {}
        self._absent_regions: set[str] = set()  # peeked and not generated (peek_region)
        self._places: dict[str, Place] = {}
        self._stored_places: dict[str, dict[str, Place]] = {}  # by region: one read for all
        self._things: dict[int, Thing] = {}
        self._avatars: dict[str, Avatar] = {}
        self._loaded_places: set[str] = set()  # places whose things are all loaded
        self._loaded_inventories: set[str] = set()
        self._loaded_crowds: set[str] = set()  # places whose avatars are all loaded
        self._changes = ChangeSet(meta=self.meta)
        self._allocated = False  # drew a thing id since the last commit

    # -- clock and rules -------------------------------------------------------------------
    @property
    def seed(self) -> int:
        return self.meta.seed

    @property
    def tick(self) -> int:
        return self.meta.tick

    @property
    def dynamics(self) -> RulesVersion:
        """The dynamics parameters in force now."""
        return self.meta.version_at(self.meta.tick)

    @property
    def season(self) -> str:
        return self.dynamics.season(self.tick)

    def advance(self, ticks: int = 1) -> int:
        """Move the logical clock forward and bring every loaded thing up to the new tick,
        so that what this transaction shows next is what the next one would see."""
        self.meta.tick = self.backend.next_tick(self.meta.tick + ticks)
        for thing in self._things.values():
            if dynamics.settle(thing, self.rules, self.meta, self.meta.tick):
                self.touch(thing)
        return self.meta.tick

    def publish_version(self, version: RulesVersion) -> None:
        """Put new dynamics parameters in force from ``version.since_tick`` (>= now).

        Versions stay ordered by ``since_tick`` (a stable sort: of two published for one tick,
        the later is in force), so a version published now after one dated in the future
        does not override it from then on."""
        self.meta.versions = self.meta.versions.published(version)

    # -- space -----------------------------------------------------------------------------
    def region(self, rx: int, ry: int) -> Region:
        """The region at (rx, ry), generated and recorded the first time anything looks."""
        region = self.peek_region(rx, ry) or self._generate(rx, ry)
        self._regions[region_key(rx, ry)] = region
        return region

    def _generate(self, rx: int, ry: int) -> Region:
        made = worldgen.generate_region(self.rules, self.seed, rx, ry, self.tick, self._allocate)
        self._changes.regions.append(made.region)
        for place in made.places:
            self._places[place.id] = place
            self._changes.places[place.id] = place
            self._loaded_places.add(place.id)
            self._loaded_crowds.add(place.id)
        for thing in made.things:
            self._things[thing.id] = thing
            self._changes.things[thing.id] = thing
        self.emit(
            "region_generated",
            None,
            [f"region:{made.region.key}"],
            {"kind": made.region.kind, "places": len(made.places), "things": len(made.things)},
        )
        return made.region

    def _allocate(self, type_name: str, numbered: bool = True) -> tuple[int, int]:
        """A fresh thing id and, when ``numbered``, a fresh world-wide label number."""
        self.backend.reserve_ids(self.meta)  # once per transaction: later calls do nothing
        self._allocated = True
        thing_id = self.meta.next_thing_id
        self.meta.next_thing_id += 1
        num = 0
        if numbered:
            num = self.meta.counters.get(type_name, 0) + 1
            self.meta.counters[type_name] = num
        return thing_id, num

    def peek_region(self, rx: int, ry: int) -> Region | None:
        """The region at (rx, ry) if it exists, without generating it. The store is asked once
        per transaction: a region never changes once generated, and one found absent stays
        absent unless :meth:`region` generates it (a begin's draw snapshots the avatar's
        neighbourhood for each candidate it checks)."""
        key = region_key(rx, ry)
        if key not in self._regions and key not in self._absent_regions:
            region = self.backend.load_region(rx, ry)
            if region is None:
                self._absent_regions.add(key)
            else:
                self._regions[key] = region
        return self._regions.get(key)

    def loaded_place(self, place_id: str) -> Place | None:
        """The place if this transaction already holds it; never loads or generates."""
        return self._places.get(place_id)

    def place(self, place_id: str) -> Place:
        place = self._places.get(place_id)
        if place is not None:
            return place
        try:
            rx, ry = region_of(place_id)
        except ValueError as exc:
            raise UnknownEntityError(f"expected a place id like '0,0:3', got {place_id!r}") from exc
        self.region(rx, ry)
        place = self._places.get(place_id) or self._places_in(rx, ry).get(place_id)
        if place is None:
            raise UnknownEntityError(f"no place {place_id!r} in this world")
        self._places[place_id] = place
        return place

    def _places_in(self, rx: int, ry: int) -> dict[str, Place]:
        """The stored places of a region, read together the first time one is asked for (a
        look lists the exits, and checks each place they lead to). Held apart from the places
        this transaction asked for, which :meth:`loaded_place` answers."""
        key = region_key(rx, ry)
        stored = self._stored_places.get(key)
        if stored is None:
            stored = self._stored_places[key] = {
                p.id: p for p in self.backend.load_places_in(rx, ry)
            }
        return stored

    # -- things ----------------------------------------------------------------------------
    def _adopt(self, things: Iterable[Thing]) -> None:
        for thing in things:
            if thing.id in self._things or thing.id in self._changes.removed:
                continue
            self._things[thing.id] = thing
            if dynamics.settle(thing, self.rules, self.meta, self.tick):
                self.touch(thing)

    def things_at(self, place_id: str) -> list[Thing]:
        """Everything lying in a place, inside receptacles or not, ordered by id."""
        if place_id not in self._loaded_places:
            self.place(place_id)
            self._adopt(self.backend.load_things_in([place_id]))
            self._loaded_places.add(place_id)
        return sorted((t for t in self._things.values() if t.place == place_id), key=_by_id)

    # Goal checks and planners read without settling or recording anything: these return what
    # the transaction holds, else what the backend stores, as it stands.
    def peek_things_at(self, place_id: str) -> list[Thing]:
        """Everything lying in a place, without loading it into the transaction."""
        return self.peek_things_in([place_id])

    def peek_things_in(self, place_ids: Sequence[str]) -> list[Thing]:
        """Everything lying in any of these places, ordered by id, without loading them into
        the transaction (one read for all of those it does not hold)."""
        wanted = set(place_ids)
        unloaded = [p for p in place_ids if p not in self._loaded_places]
        stored = self.backend.load_things_in(unloaded) if unloaded else []
        return self._peek(not unloaded, stored, lambda t: t.place in wanted)

    def peek_contents(self, place_id: str, receptacle: int) -> list[Thing]:
        """What lies inside one receptacle in a place, ordered by id, without loading it into
        the transaction: :meth:`peek_things_at`'s things in that container, read alone where
        the transaction does not hold the place (a goal check looks in one receptacle)."""
        loaded = place_id in self._loaded_places
        stored = [] if loaded else self.backend.load_contents(place_id, receptacle)
        return self._peek(loaded, stored, _inside(place_id, receptacle))

    def peek_inventory(self, avatar_id: str) -> list[Thing]:
        """What an avatar holds, without loading it into the transaction."""
        return self.peek_inventories([avatar_id])[avatar_id]

    def peek_inventories(self, avatar_ids: Sequence[str]) -> dict[str, list[Thing]]:
        """What each of these avatars holds, without loading it into the transaction (one
        read for all those whose inventories it does not hold)."""
        unloaded = [a for a in avatar_ids if a not in self._loaded_inventories]
        stored = self.backend.load_inventories(unloaded) if unloaded else {}
        held: dict[str, list[Thing]] = {}
        for avatar_id in avatar_ids:
            loaded = avatar_id in self._loaded_inventories
            held[avatar_id] = self._peek(loaded, stored.get(avatar_id, []), _held_by(avatar_id))
        return held

    def _peek(
        self, loaded: bool, stored: list[Thing], here: Callable[[Thing], bool]
    ) -> list[Thing]:
        found = {t.id: t for t in self._things.values() if here(t)}
        if not loaded:
            for thing in stored:
                current = self._things.get(thing.id, thing)
                if thing.id not in self._changes.removed and here(current):
                    found.setdefault(thing.id, current)
        return [found[i] for i in sorted(found)]

    def inventory(self, avatar_id: str) -> list[Thing]:
        self.gather_inventories([avatar_id])
        return sorted((t for t in self._things.values() if t.holder == avatar_id), key=_by_id)

    def gather_inventories(self, avatar_ids: Sequence[str]) -> None:
        """Load what these avatars hold, with one read for all those not loaded yet (a step's
        admissible list checks a give to each of the others beside its avatar)."""
        unloaded = [a for a in dict.fromkeys(avatar_ids) if a not in self._loaded_inventories]
        if not unloaded:
            return
        stored = self.backend.load_inventories(unloaded)
        for avatar_id in unloaded:  # adopted in the order asked, as one read each would
            self._adopt(stored[avatar_id])
        self._loaded_inventories.update(unloaded)

    def thing(self, thing_id: int) -> Thing:
        if thing_id not in self._things:
            found = self.backend.load_thing(thing_id)
            if found is None or thing_id in self._changes.removed:
                raise UnknownEntityError(f"no thing with id {thing_id}")
            self._adopt([found])
        return self._things[thing_id]

    def create_thing(
        self,
        type_name: str,
        *,
        place: str | None = None,
        container: int | None = None,
        holder: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> Thing:
        thing_id, num = self._allocate(type_name)
        thing = Thing(
            id=thing_id,
            type=type_name,
            kind=self.rules.kind_of(type_name),
            num=num,
            place=place,
            container=container,
            holder=holder,
            attrs=attrs if attrs is not None else dynamics.initial_attrs(self.rules, type_name),
            tick=self.tick,
        )
        self._things[thing_id] = thing
        self.touch(thing)
        return thing

    def move(
        self,
        thing: Thing,
        *,
        place: str | None = None,
        container: int | None = None,
        holder: str | None = None,
    ) -> None:
        """Put a thing in a place (optionally inside a receptacle) or into an avatar's hands."""
        thing.place, thing.container, thing.holder = place, container, holder
        self.touch(thing)

    def remove(self, thing: Thing) -> None:
        """A rule consumed this thing (eaten, crafted into something, burnt)."""
        self._things.pop(thing.id, None)
        self._changes.things.pop(thing.id, None)
        self._changes.removed.add(thing.id)

    def contents(self, receptacle: Thing) -> list[Thing]:
        assert receptacle.place is not None
        return [t for t in self.things_at(receptacle.place) if t.container == receptacle.id]

    # -- avatars ---------------------------------------------------------------------------
    def avatar(self, avatar_id: str) -> Avatar:
        avatar = self._avatars.get(avatar_id) or self.backend.load_avatar(avatar_id)
        if avatar is None:
            raise UnknownEntityError(f"no avatar {avatar_id!r}")
        self._avatars[avatar_id] = avatar
        return avatar

    def avatars_at(self, place_id: str) -> list[Avatar]:
        self.gather_crowds([place_id])
        return sorted(
            (a for a in self._avatars.values() if a.place == place_id), key=lambda a: a.id
        )

    def crowd(self, place_id: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        """The first ``limit`` avatars by id standing in ``place_id`` but ``without``, and how
        many stand there but it: from memory where the place's crowd is loaded, else with a
        read of those few alone (a step's view of a fleet's thousand avatars at the origin).
        Only ``without`` may have moved in this transaction: a step moves its actor alone."""
        if place_id in self._loaded_crowds:
            return crowd_of(self.avatars_at(place_id), without, limit)
        named, total = self.backend.load_crowd(place_id, without, limit)
        return [self._avatars.setdefault(a.id, a) for a in named], total

    def gather_crowds(self, place_ids: Sequence[str]) -> None:
        """Load the avatars standing in these places, with one read for all those not loaded
        yet (a planner's snapshot asks for every place of several regions)."""
        unloaded = [p for p in place_ids if p not in self._loaded_crowds]
        if not unloaded:
            return
        for avatar in self.backend.load_avatars_in(unloaded):
            self._avatars.setdefault(avatar.id, avatar)
        self._loaded_crowds.update(unloaded)

    def add_avatar(self, avatar_id: str, name: str, place: str = ORIGIN) -> Avatar:
        """Bring a new avatar into the world (an input: it is logged for replay)."""
        self.place(place)
        avatar = Avatar(avatar_id, name, place, capacity=self.rules.avatar_capacity)
        self._avatars[avatar_id] = avatar
        self.touch(avatar)
        self.emit(
            "avatar_joined", avatar_id, [f"avatar:{avatar_id}"], {"name": name, "place": place}
        )
        return avatar

    # -- changes ---------------------------------------------------------------------------
    def touch(self, entity: Thing | Avatar | Place) -> None:
        if isinstance(entity, Thing):
            self._changes.things[entity.id] = entity
        elif isinstance(entity, Avatar):
            self._changes.avatars[entity.id] = entity
        else:
            self._changes.places[entity.id] = entity

    def emit(
        self, kind: str, actor: str | None, entities: Iterable[str], payload: dict[str, Any]
    ) -> Event:
        event = Event(self.tick, kind, actor, tuple(entities), payload)
        self._changes.events.append(event)
        return event

    def commit(self) -> ChangeSet:
        """Close the transaction: append a ``state`` event with the after-image of every
        changed entity (the event log alone can then rebuild any entity at any tick) and hand
        the change set to the backend."""
        changes = self._changes
        if (
            changes.things
            or changes.removed
            or changes.avatars
            or changes.places
            or changes.regions
        ):
            entities = sorted(
                {
                    *(f"thing:{i}" for i in (*changes.things, *changes.removed)),
                    *(f"avatar:{a}" for a in changes.avatars),
                    *(f"place:{p}" for p in changes.places),
                    *(f"region:{region_key(*region_of(p))}" for p in changes.places),
                    *(
                        f"region:{region_key(*region_of(t.place))}"
                        for t in changes.things.values()
                        if t.place
                    ),
                }
            )
            if self._allocated:
                # The counters' after-image: where the world's ids and labels stood, for
                # reading the world at a past tick without a replay (world.store.past).
                self.emit(
                    "counters",
                    None,
                    (),
                    {
                        "next_thing_id": self.meta.next_thing_id,
                        "counters": dict(self.meta.counters),
                    },
                )
            self.emit(
                "state",
                None,
                entities,
                {
                    "things": [t.row() for t in sorted(changes.things.values(), key=_by_id)],
                    "removed": sorted(changes.removed),
                    "avatars": [
                        dataclasses.asdict(a)
                        for a in sorted(changes.avatars.values(), key=lambda a: a.id)
                    ],
                    "places": [
                        dataclasses.asdict(p)
                        for p in sorted(changes.places.values(), key=lambda p: p.id)
                    ],
                },
            )
        self.backend.save(changes)
        self._changes = ChangeSet(meta=self.meta)
        self._allocated = False  # drew a thing id since the last commit
        return changes

    def state_hash(self) -> str:
        """Canonical hash of the world's logical state (call after :meth:`commit`).

        Every thing is settled to the current tick and hashed without the tick it was last
        settled at: reads settle what they see but are not in the event log, so when a thing
        was last settled is not part of the state, only what settling it now gives."""

        def rows() -> Iterator[tuple[str, dict[str, Any]]]:
            for table, row in self.backend.dump():
                if table == "thing":
                    thing = Thing.from_row(row)
                    dynamics.settle(thing, self.rules, self.meta, self.meta.tick)
                    row = thing.row()
                    del row["tick"]
                yield table, row

        return canonical_hash(rows())


def _by_id(thing: Thing) -> int:
    return thing.id


def _held_by(avatar_id: str) -> Callable[[Thing], bool]:
    return lambda thing: thing.holder == avatar_id


def _inside(place_id: str, receptacle: int) -> Callable[[Thing], bool]:
    return lambda thing: thing.place == place_id and thing.container == receptacle


def crowd_of(avatars: Iterable[Avatar], without: str, limit: int) -> tuple[list[Avatar], int]:
    """:meth:`Backend.load_crowd` over all the avatars standing in one place."""
    others = sorted((a for a in avatars if a.id != without), key=lambda a: a.id)
    return others[:limit], len(others)


class MemoryBackend:
    """Keeps a whole world in dictionaries. Loaders hand out the stored objects themselves,
    so an in-memory world needs no copying; :meth:`clone` gives an independent copy."""

    def __init__(self, seed: int, rules: Rules | None = None) -> None:
        rules = rules or default_rules()
        self.meta = WorldMeta(seed=seed, versions=Versions([rules.dynamics]))
        self.regions: dict[str, Region] = {}
        self.places: dict[str, Place] = {}
        self.things: dict[int, Thing] = {}
        self.avatars: dict[str, Avatar] = {}
        self.events: list[Event] = []
        self._at_place: dict[str, set[int]] = {}
        self._held: dict[str, set[int]] = {}
        self._where: dict[int, tuple[str | None, str | None]] = {}
        self._in_region: dict[str, set[str]] = {}  # region key -> its place ids

    def clone(self) -> MemoryBackend:
        other = copy.copy(self)
        other.meta = self.meta.copy()
        other.places = copy.deepcopy(self.places)
        other.things = copy.deepcopy(self.things)
        other.avatars = copy.deepcopy(self.avatars)
        other.regions = dict(self.regions)
        other.events = list(self.events)
        other._at_place = {k: set(v) for k, v in self._at_place.items()}
        other._held = {k: set(v) for k, v in self._held.items()}
        other._where = dict(self._where)
        other._in_region = {k: set(v) for k, v in self._in_region.items()}
        return other

    def load_meta(self) -> WorldMeta:
        return self.meta

    def load_region(self, rx: int, ry: int) -> Region | None:
        return self.regions.get(region_key(rx, ry))

    def load_places_in(self, rx: int, ry: int) -> list[Place]:
        return [self.places[p] for p in sorted(self._in_region.get(region_key(rx, ry), ()))]

    def load_things_in(self, places: Sequence[str]) -> list[Thing]:
        return [self.things[i] for p in places for i in self._at_place.get(p, ())]

    def load_contents(self, place: str, receptacle: int) -> list[Thing]:
        return [t for t in self.load_things_in([place]) if t.container == receptacle]

    def load_inventory(self, avatar: str) -> list[Thing]:
        return [self.things[i] for i in self._held.get(avatar, ())]

    def load_inventories(self, avatars: Sequence[str]) -> dict[str, list[Thing]]:
        return {avatar: self.load_inventory(avatar) for avatar in avatars}

    def load_thing(self, thing: int) -> Thing | None:
        return self.things.get(thing)

    def load_avatar(self, avatar: str) -> Avatar | None:
        return self.avatars.get(avatar)

    def load_avatars_in(self, places: Sequence[str]) -> list[Avatar]:
        wanted = set(places)
        return [a for a in self.avatars.values() if a.place in wanted]

    def load_crowd(self, place: str, without: str, limit: int) -> tuple[list[Avatar], int]:
        return crowd_of(self.load_avatars_in([place]), without, limit)

    def next_tick(self, tick: int) -> int:
        return tick

    def reserve_ids(self, meta: WorldMeta) -> None:
        """Nothing to do: one transaction at a time holds this world."""

    def _unindex(self, thing_id: int) -> None:
        place, holder = self._where.pop(thing_id, (None, None))
        if place is not None:
            self._at_place[place].discard(thing_id)
        if holder is not None:
            self._held[holder].discard(thing_id)

    def save(self, changes: ChangeSet) -> None:
        self.meta = changes.meta
        for region in changes.regions:
            self.regions[region.key] = region
        self.places.update(changes.places)
        for place_id in changes.places:
            self._in_region.setdefault(region_key(*region_of(place_id)), set()).add(place_id)
        self.avatars.update(changes.avatars)
        for thing_id in changes.removed:
            self._unindex(thing_id)
            self.things.pop(thing_id, None)
        for thing in changes.things.values():
            self._unindex(thing.id)
            self.things[thing.id] = thing
            self._where[thing.id] = (thing.place, thing.holder)
            if thing.place is not None:
                self._at_place.setdefault(thing.place, set()).add(thing.id)
            if thing.holder is not None:
                self._held.setdefault(thing.holder, set()).add(thing.id)
        self.events.extend(changes.events)

    def dump(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "world", self.meta.row()
        for key in sorted(self.regions):
            yield "region", dataclasses.asdict(self.regions[key])
        for key in sorted(self.places):
            yield "place", dataclasses.asdict(self.places[key])
        for thing_id in sorted(self.things):
            yield "thing", self.things[thing_id].row()
        for key in sorted(self.avatars):
            yield "avatar", dataclasses.asdict(self.avatars[key])
