"""Region generation: a pure function of (seed, rx, ry), local, well linked, and varied."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from world import worldgen
from world.entities import region_of
from world.rules import Rules
from world.state import MemoryBackend, World

GRID = list(itertools.product(range(-6, 7), range(-6, 7)))


def _counter_allocator():
    state = {"id": 0, "nums": Counter()}

    def allocate(type_name: str, numbered: bool = True) -> tuple[int, int]:
        state["id"] += 1
        if numbered:
            state["nums"][type_name] += 1
        return state["id"], state["nums"][type_name] if numbered else 0

    return allocate


def _shape(world: World, rx: int, ry: int) -> tuple:
    """A region's content without ids and world-wide label numbers (those depend on history)."""
    region = world.region(rx, ry)
    places = [world.place(f"{rx},{ry}:{i}") for i in range(region.n_places)]
    things = []
    for place in places:
        at = world.things_at(place.id)
        index = {t.id: n for n, t in enumerate(at)}
        things.append(
            [(t.type, t.kind, index.get(t.container), sorted(t.attrs.items())) for t in at]
        )
    return region.kind, [(p.id, p.kind, p.name, sorted(p.exits.items())) for p in places], things


def test_same_seed_and_coords_give_the_same_region(rules: Rules) -> None:
    for rx, ry in [(0, 0), (3, -2), (-17, 40)]:
        a = worldgen.generate_region(rules, 11, rx, ry, 0, _counter_allocator())
        b = worldgen.generate_region(rules, 11, rx, ry, 0, _counter_allocator())
        assert a == b


def test_a_region_is_the_same_whatever_was_generated_before() -> None:
    first = World(MemoryBackend(11))
    shape = _shape(first, 3, -2)
    second = World(MemoryBackend(11))
    for rx, ry in [(0, 0), (1, 1), (3, -1), (-5, 2)]:
        second.region(rx, ry)
    assert _shape(second, 3, -2) == shape


def test_different_seeds_give_different_worlds(rules: Rules) -> None:
    kinds = {seed: [worldgen.region_kind(rules, seed, *xy).kind for xy in GRID] for seed in (1, 2)}
    assert kinds[1] != kinds[2]
    assert _shape(World(MemoryBackend(1)), 0, 0) != _shape(World(MemoryBackend(2)), 0, 0)


def test_the_origin_is_always_a_village(rules: Rules) -> None:
    assert {worldgen.region_kind(rules, seed, 0, 0).kind for seed in range(20)} == {"village"}


def test_generating_a_region_touches_nothing_else() -> None:
    backend = MemoryBackend(5)
    world = World(backend)
    world.region(0, 0)
    world.commit()
    before = {key: dict(getattr(backend, key)) for key in ("regions", "places", "things")}
    world = World(backend)
    world.region(4, -3)
    changes = world.commit()
    assert [r.key for r in changes.regions] == ["4,-3"]
    assert changes.places and all(region_of(p) == (4, -3) for p in changes.places)
    assert changes.things and all(region_of(t.place) == (4, -3) for t in changes.things.values())
    assert not changes.removed and not changes.avatars
    for key, rows in before.items():
        stored = getattr(backend, key)
        assert all(stored[k] is v for k, v in rows.items())
    assert set(backend.regions) == {"0,0", "4,-3"}  # no neighbour was generated along


def test_looking_at_a_hub_does_not_generate_its_neighbours() -> None:
    from world import engine

    backend = MemoryBackend(5)
    world = World(backend)
    world.add_avatar("a", "Alice")
    world.commit()
    world = World(backend)
    engine.observe(world, "a")
    world.commit()
    assert set(backend.regions) == {"0,0"}


def test_every_exit_leads_to_an_existing_place_and_back() -> None:
    world = World(MemoryBackend(3))
    for rx, ry in GRID:
        region = world.region(rx, ry)
        for index in range(region.n_places):
            place = world.place(f"{rx},{ry}:{index}")
            assert place.exits, place.id
            for label, target in place.exits.items():
                other = world.place(target)  # raises if the exit leads nowhere
                if label.endswith(" road"):
                    assert target.endswith(":0") and region_of(target) != (rx, ry)
                else:
                    assert label == other.name and region_of(target) == (rx, ry)
                assert place.id in other.exits.values(), (place.id, label)


def test_every_place_is_reachable_from_its_hub() -> None:
    world = World(MemoryBackend(3))
    for rx, ry in GRID[:60]:
        region = world.region(rx, ry)
        seen, frontier = {f"{rx},{ry}:0"}, [f"{rx},{ry}:0"]
        while frontier:
            for target in world.place(frontier.pop()).exits.values():
                if region_of(target) == (rx, ry) and target not in seen:
                    seen.add(target)
                    frontier.append(target)
        assert len(seen) == region.n_places


def test_region_and_place_kinds_all_appear(rules: Rules) -> None:
    world = World(MemoryBackend(3))
    kinds = Counter(world.region(rx, ry).kind for rx, ry in GRID)
    assert set(kinds) == set(rules.regions)
    places = {world.place(p).kind for p in world._places}  # noqa: SLF001 - every generated place
    assert set(rules.places) <= places
    assert {"kitchen", "bathroom", "bedroom", "living room", "workshop"} <= places


def test_places_are_furnished_by_their_templates(rules: Rules) -> None:
    world = World(MemoryBackend(3))
    for rx, ry in GRID[:40]:
        for index in range(world.region(rx, ry).n_places):
            place = world.place(f"{rx},{ry}:{index}")
            template = rules.places[place.kind]
            at = world.things_at(place.id)
            counts = Counter(t.type for t in at if t.kind != "object")
            for type_name, (lo, hi) in {**template.receptacles, **template.resources}.items():
                assert lo <= counts[type_name] <= hi, (place.id, type_name)
            receptacles = {t.id: t for t in at if t.kind == "receptacle"}
            for thing in at:
                if thing.kind == "object":
                    assert thing.container in receptacles, thing.label
                else:
                    assert thing.container is None
            labels = [t.label for t in at]
            assert len(labels) == len(set(labels)), place.id


@pytest.mark.parametrize("seed", [0, 9])
def test_object_labels_are_unique_in_the_whole_world(seed: int) -> None:
    world = World(MemoryBackend(seed))
    labels = Counter()
    for rx, ry in GRID[:50]:
        for index in range(world.region(rx, ry).n_places):
            labels.update(
                t.label for t in world.things_at(f"{rx},{ry}:{index}") if t.kind == "object"
            )
    assert labels and labels.most_common(1)[0][1] == 1
