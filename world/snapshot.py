"""A planner's private copy of an avatar's neighbourhood: places, things and avatars of a
few regions, with shortest paths between places and a scratch world to rehearse plans in."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

from world import dynamics
from world.entities import Avatar, Place, Region, Thing, place_id, region_key, region_of
from world.rules import Rules
from world.state import MemoryBackend, World
from world.values import ChangeSet, WorldMeta

DIRECTIONS = {(0, 1): "north", (0, -1): "south", (1, 0): "east", (-1, 0): "west"}
MAX_BETWEEN = 36  # regions: a wider rectangle between the avatar and a task is not copied


def _between(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """The regions of the rectangle with corners ``a`` and ``b``; only ``b`` when it holds
    more than MAX_BETWEEN regions."""
    xs = range(min(a[0], b[0]), max(a[0], b[0]) + 1)
    ys = range(min(a[1], b[1]), max(a[1], b[1]) + 1)
    if len(xs) * len(ys) > MAX_BETWEEN:
        return [b]
    return [(x, y) for x in xs for y in ys]


@dataclass
class Snapshot:
    """A copy of the part of a world the planner may use; the original is never touched."""

    rules: Rules
    meta: WorldMeta
    avatar_id: str
    regions: dict[str, Region]
    places: dict[str, Place]
    things: dict[int, Thing]
    avatars: dict[str, Avatar]
    _dist: dict[str, dict[str, tuple[int, str | None, str | None]]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, world: World, avatar_id: str, extra: tuple[str, ...] = (), *, things: bool = True
    ) -> Snapshot:
        """Copy the avatar's region, its generated neighbours, the regions of ``extra`` place
        ids and the generated regions between the avatar and each of those (so that the way
        back from a wander stays in the snapshot), reading without loading anything into
        ``world``'s transaction. Without ``things``, only the place graph and the avatar
        itself: all that a plan made of moves alone needs."""
        me = world.avatar(avatar_id)
        rx, ry = region_of(me.place)
        wanted = [(rx, ry), *((rx + dx, ry + dy) for dx, dy in DIRECTIONS)]
        for x, y in map(region_of, extra):
            wanted += _between((rx, ry), (x, y))
        regions: dict[str, Region] = {}
        for x, y in dict.fromkeys(wanted):
            key = region_key(x, y)
            region = world.peek_region(x, y)
            if region is not None:
                regions[key] = region
        meta = world.meta
        copy_meta = WorldMeta(
            meta.seed, meta.tick, meta.next_thing_id, dict(meta.counters), meta.versions
        )
        places: dict[str, Place] = {}
        copied: dict[int, Thing] = {}
        avatars: dict[str, Avatar] = {}
        for region in regions.values():
            for index in range(region.n_places):
                place = world.place(place_id(region.rx, region.ry, index))
                places[place.id] = place
        if things:  # one read for every place's things, one for their avatars
            lying: dict[str, list[Thing]] = {here: [] for here in places}
            for thing in world.peek_things_in(list(places)):
                lying[str(thing.place)].append(thing)
            world.gather_crowds(list(places))
            for here in places:
                for thing in lying[here]:
                    copied[thing.id] = thing.copy()
                for avatar in world.avatars_at(here):
                    avatars[avatar.id] = replace(avatar, attrs=dict(avatar.attrs))
        avatars[me.id] = replace(me, attrs=dict(me.attrs))
        held = world.peek_inventories(list(avatars)) if things else {}
        for inventory in held.values():  # one read for every avatar's
            for thing in inventory:
                copied[thing.id] = thing.copy()
        for thing in copied.values():
            dynamics.settle(thing, world.rules, copy_meta, meta.tick)
        return cls(world.rules, copy_meta, avatar_id, regions, places, copied, avatars)

    @property
    def tick(self) -> int:
        return self.meta.tick

    @property
    def me(self) -> Avatar:
        return self.avatars[self.avatar_id]

    def scratch(self) -> World:
        """A fresh in-memory world holding copies of everything in the snapshot."""
        backend = MemoryBackend(self.meta.seed, self.rules)
        meta = WorldMeta(
            self.meta.seed,
            self.meta.tick,
            self.meta.next_thing_id,
            dict(self.meta.counters),
            self.meta.versions,
        )
        backend.regions = dict(self.regions)
        backend.save(
            ChangeSet(
                meta=meta,
                places=dict(self.places),  # shared: places are not changed by actions
                things={i: t.copy() for i, t in self.things.items()},
                avatars={a.id: replace(a, attrs=dict(a.attrs)) for a in self.avatars.values()},
            )
        )
        return World(backend, self.rules)

    # -- the place graph -----------------------------------------------------------------------
    def _enterable(self, place: Place) -> bool:
        version = self.meta.version_at(self.tick)
        if version.season(self.tick) not in self.rules.places[place.kind].seasons:
            return False
        return int(place.attrs.get("flooded_until", -1) or -1) <= self.tick

    def _bfs(self, source: str) -> dict[str, tuple[int, str | None, str | None]]:
        """place -> (distance, previous place, exit label taken into it)."""
        if source not in self._dist:
            seen: dict[str, tuple[int, str | None, str | None]] = {source: (0, None, None)}
            queue = deque([source])
            while queue:
                here = queue.popleft()
                for label, there in self.places[here].exits.items():
                    target = self.places.get(there)
                    if there in seen or target is None or not self._enterable(target):
                        continue
                    seen[there] = (seen[here][0] + 1, here, label)
                    queue.append(there)
            self._dist[source] = seen
        return self._dist[source]

    def dist(self, source: str, target: str) -> float:
        found = self._bfs(source).get(target)
        return math.inf if found is None else found[0]

    def path(self, source: str, target: str) -> list[str] | None:
        """Exit labels from ``source`` to ``target``, or None if it cannot be reached."""
        tree = self._bfs(source)
        if target not in tree:
            return None
        labels: list[str] = []
        node: str | None = target
        while node is not None and node != source:
            _, previous, label = tree[node]
            labels.append(str(label))
            node = previous
        return labels[::-1]

    # -- what lies where -----------------------------------------------------------------------
    def loose(self, type_name: str | None = None) -> list[Thing]:
        """Objects lying in receptacles (nobody holds them), optionally of one type."""
        return [
            t
            for t in self.things.values()
            if t.kind == "object"
            and t.holder is None
            and t.container is not None
            and (type_name is None or t.type == type_name)
        ]

    def held(self, avatar_id: str | None = None) -> list[Thing]:
        who = avatar_id or self.avatar_id
        return sorted((t for t in self.things.values() if t.holder == who), key=lambda t: t.id)

    def receptacles(self, station: str | None = None) -> list[Thing]:
        found = [t for t in self.things.values() if t.kind == "receptacle"]
        if station is not None:
            found = [t for t in found if self.rules.receptacles[t.type].station == station]
        return sorted(found, key=lambda t: t.id)

    def closed(self, receptacle_id: int | None) -> bool:
        thing = self.things.get(receptacle_id) if receptacle_id is not None else None
        return thing is not None and thing.attrs.get("open") is False

    def where(self, thing: Thing) -> str:
        """The place a thing is at; held things are where their holder stands."""
        if thing.holder is not None:
            return self.avatars[thing.holder].place
        assert thing.place is not None
        return thing.place

    def direction(self, place: str) -> str | None:
        """ "north" etc. when ``place`` lies in a neighbouring region of the avatar's."""
        (ax, ay), (px, py) = region_of(self.me.place), region_of(place)
        return DIRECTIONS.get((px - ax, py - ay))


def usable_tools(snap: Snapshot, tag: str, uses: int) -> list[Thing]:
    """Held or loose tools carrying ``tag`` with at least ``uses`` uses left."""
    found = []
    for tool in (*snap.held(), *snap.loose()):
        spec = snap.rules.objects[tool.type]
        left = tool.count("durability", uses)
        if tag in spec.tags and not tool.attrs.get("broken") and left >= uses:
            found.append(tool)
    return found
