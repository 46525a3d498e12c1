"""Deterministic region generation from (world seed, rx, ry).

A region is generated the first time anything looks at it. Its layout, contents and
attributes depend only on the seed and its coordinates; the ids and label numbers of its
things come from the world's counters, allocated in a fixed order, so replaying the same
inputs allocates the same ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from world import dynamics, rng
from world.entities import Place, Region, Thing, place_id, region_key
from world.rules import PlaceTemplate, RegionTemplate, Rules

ORIGIN_KIND = "village"  # region (0, 0) is always a village, so every world starts alike
ROADS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}

# (type name, whether it needs a world-wide label number) -> (thing id, label number)
Allocate = Callable[[str, bool], tuple[int, int]]


@dataclass(frozen=True)
class Generated:
    region: Region
    places: list[Place]
    things: list[Thing]


def region_kind(rules: Rules, seed: int, rx: int, ry: int) -> RegionTemplate:
    if (rx, ry) == (0, 0):
        return rules.regions[ORIGIN_KIND]
    kinds = sorted(rules.regions)
    weights = np.array([rules.regions[k].weight for k in kinds])
    draw = rng.uniform(seed, 0, f"region:{region_key(rx, ry)}", "kind") * weights.sum()
    index = int(np.searchsorted(np.cumsum(weights), draw, side="right"))
    return rules.regions[kinds[min(index, len(kinds) - 1)]]


def _between(gen: np.random.Generator, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    return int(gen.integers(lo, hi + 1))


def _layout(template: RegionTemplate, gen: np.random.Generator) -> list[tuple[str, list[int]]]:
    """Place kinds in index order, each with the indices of the places it links to."""
    nodes: list[tuple[str, list[int]]] = [(template.hub, [])]

    def link(a: int, b: int) -> None:
        nodes[a][1].append(b)
        nodes[b][1].append(a)

    for group in template.groups:
        for _ in range(_between(gen, group.count)):
            first = len(nodes)
            for offset, kind in enumerate(group.places):
                nodes.append((kind, []))
                here = first + offset
                if offset == 0:
                    link(0, here)
                elif group.shape == "star":
                    link(first, here)
                else:
                    link(here - 1, here)
            if group.close is not None:
                target = next((i for i, (k, _) in enumerate(nodes) if k == group.close), None)
                if target is not None and target != len(nodes) - 1:
                    link(len(nodes) - 1, target)
    return nodes


def generate_region(
    rules: Rules, seed: int, rx: int, ry: int, tick: int, allocate: Allocate
) -> Generated:
    """Build region (rx, ry): places linked by exits, roads to the four neighbours' hubs,
    receptacles, resources and objects."""
    template = region_kind(rules, seed, rx, ry)
    key = region_key(rx, ry)
    gen = rng.rng(seed, 0, f"region:{key}", "layout")
    nodes = _layout(template, gen)

    names: list[str] = []
    seen: dict[str, int] = {}
    for kind, _ in nodes:
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"{kind} {seen[kind]}")

    places: list[Place] = []
    for index, (kind, links) in enumerate(nodes):
        exits = {names[j]: place_id(rx, ry, j) for j in sorted(set(links))}
        if index == 0:
            for direction, (dx, dy) in ROADS.items():
                exits[f"{direction} road"] = place_id(rx + dx, ry + dy, 0)
        place_template: PlaceTemplate = rules.places[kind]
        places.append(
            Place(
                id=place_id(rx, ry, index),
                kind=kind,
                name=names[index],
                exits=exits,
                outdoor=place_template.outdoor,
            )
        )

    things: list[Thing] = []
    for place in places:
        things.extend(_furnish(rules, seed, place, tick, allocate))
    region = Region(rx=rx, ry=ry, kind=template.kind, n_places=len(places), generated_tick=tick)
    return Generated(region=region, places=places, things=things)


def _furnish(rules: Rules, seed: int, place: Place, tick: int, allocate: Allocate) -> list[Thing]:
    template = rules.places[place.kind]
    gen = rng.rng(seed, 0, f"place:{place.id}", "contents")
    made: list[Thing] = []
    fixed_nums: dict[str, int] = {}

    def make(type_name: str, container: int | None) -> Thing:
        # Receptacles and resources never move, so their label numbers count within the
        # place ("countertop 2"); portable objects need numbers unique in the whole world.
        portable = rules.kind_of(type_name) == "object"
        thing_id, num = allocate(type_name, portable)
        if not portable:
            num = fixed_nums[type_name] = fixed_nums.get(type_name, 0) + 1
        thing = Thing(
            id=thing_id,
            type=type_name,
            kind=rules.kind_of(type_name),
            num=num,
            place=place.id,
            container=container,
            attrs=dynamics.initial_attrs(rules, type_name),
            tick=tick,
        )
        made.append(thing)
        return thing

    by_type: dict[str, list[Thing]] = {}
    for type_name in sorted(template.receptacles):
        for _ in range(_between(gen, template.receptacles[type_name])):
            by_type.setdefault(type_name, []).append(make(type_name, None))
    for type_name in sorted(template.resources):
        for _ in range(_between(gen, template.resources[type_name])):
            resource = make(type_name, None)
            spec = rules.resources[type_name]
            resource.attrs["stock"] = float(gen.integers(spec.stock // 2, spec.stock + 1))
    for spawn in template.objects:
        hosts = [r for t in spawn.receptacles for r in by_type.get(t, [])]
        if not hosts:
            continue
        for _ in range(_between(gen, spawn.count)):
            host = hosts[int(gen.integers(len(hosts)))]
            obj = make(spawn.type, host.id)
            _vary(rules, obj, gen)
            if rules.receptacles[host.type].station == "cool":
                obj.attrs["chilled"] = True
    return made


def _vary(rules: Rules, thing: Thing, gen: np.random.Generator) -> None:
    """Spread generated objects' attributes: some dirty, some stale, tools worn, stacks."""
    spec = rules.objects[thing.type]
    if "cleanable" in spec.tags and gen.random() < 0.35:
        thing.attrs["clean"] = False
    if spec.spoil_ticks is not None:
        thing.attrs["fresh"] = float(gen.integers(60, 101))
    if spec.durability is not None:
        thing.attrs["durability"] = int(gen.integers(spec.durability // 2, spec.durability + 1))
    if spec.stack > 1:
        thing.attrs["quantity"] = int(gen.integers(1, min(spec.stack, 4) + 1))
