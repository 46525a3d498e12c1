"""World events: drift, discoveries, market shifts, storms and floods, made through the world's
own operations.

The forge decides whether and where an event happens (``forge.dynamics``); the functions here
make it happen in the caller's transaction, write it to the event log and return the logged
payload. Every logged kind is also an input of :mod:`world.replay`: :func:`apply_logged`
re-applies a payload exactly, so replaying the log rebuilds the same state.

Each event is lazy, like every other dynamic:

- a drift, a discovery or a market shift is a new :class:`RulesVersion` in force from the
  current tick; lazy settling integrates over it when a thing is next loaded, a trade reads its
  prices when it is checked, and seasons keep their schedule (a drift never changes
  ``day_length`` or ``season_length``);
- a flood is the place attribute ``flooded_until``, read whenever the place is loaded
  (``go to`` it is not admissible until the water recedes);
- a storm loads the one region it hits, and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from world.entities import Place, Thing, place_id, region_key, region_of
from world.errors import UnknownEntityError, WorldEventError
from world.rules import RulesVersion
from world.state import World

DRIFTABLE = ("spoil_rate", "regrow_rate", "wear_per_use")  # the parameters a drift may change
# The logged kinds.
KINDS = frozenset({"forge_drift", "recipe_discovered", "market_shift", "storm", "flood"})


@dataclass(frozen=True)
class Move:
    """One object a storm carries: onto receptacle ``into`` standing in place ``to``."""

    thing: int
    to: str
    into: int


# -- rules versions ------------------------------------------------------------------------------
def _publish(world: World, cause: str, **changes: Any) -> RulesVersion:
    """Put the current version with ``changes`` in force from now on."""
    number = world.meta.versions.next_number
    version = world.dynamics.replace(version=number, since_tick=world.tick, cause=cause, **changes)
    world.publish_version(version)
    return version


def drift(world: World, values: Mapping[str, float | int]) -> dict[str, Any]:
    """Publish drifted dynamics parameters (a subset of :data:`DRIFTABLE`) from now on."""
    unknown = sorted(set(values) - set(DRIFTABLE))
    if unknown or not values:
        raise WorldEventError(f"expected drifted parameters among {DRIFTABLE}, got {dict(values)}")
    wear = values.get("wear_per_use", 1)
    rates = [v for k, v in values.items() if k != "wear_per_use"]
    if not (isinstance(wear, int) and wear >= 1) or not all(
        isinstance(r, int | float) and r > 0 for r in rates
    ):
        raise WorldEventError(
            f"expected positive rates and an integer wear_per_use >= 1, got {dict(values)}"
        )
    old = world.dynamics
    new = _publish(world, "drift", **values)
    payload = {
        "version": new.version,
        "since_tick": new.since_tick,
        "old": {k: getattr(old, k) for k in sorted(values)},
        "new": {k: getattr(new, k) for k in sorted(values)},
    }
    world.emit("forge_drift", None, [], payload)
    return payload


def locked_recipes(world: World) -> list[str]:
    """Outputs of the recipes that cannot be crafted yet, sorted."""
    version = world.dynamics
    return sorted(o for o, r in world.rules.recipes.items() if not version.knows(r))


def discover(world: World, output: str) -> dict[str, Any]:
    """Make the locked recipe for ``output`` craftable from now on."""
    if output not in locked_recipes(world):
        raise WorldEventError(
            f"expected a locked recipe among {locked_recipes(world)}, got {output!r}"
        )
    recipe = world.rules.recipes[output]
    new = _publish(world, "discovery", discovered=(*world.dynamics.discovered, output))
    payload = {
        "recipe": output,
        "inputs": dict(sorted(recipe.inputs.items())),
        "station": recipe.station,
        "version": new.version,
        "since_tick": new.since_tick,
    }
    world.emit("recipe_discovered", None, [], payload)
    return payload


def traded_types(world: World) -> list[str]:
    """The object types some market stall sells (what a market shift reprices), sorted."""
    return sorted({name for r in world.rules.receptacles.values() for name in r.sells})


def shift_prices(world: World, multipliers: Mapping[str, float]) -> dict[str, Any]:
    """Put new price multipliers of some object types in force at every market from now on
    (the others keep theirs); the payload holds the old and new prices in coins."""
    objects = world.rules.objects
    if not multipliers or not all(
        name in objects
        and isinstance(m, int | float)
        and not isinstance(m, bool)
        and math.isfinite(m)
        and m > 0
        for name, m in multipliers.items()
    ):
        raise WorldEventError(
            f"expected positive price multipliers of object types, got {dict(multipliers)}"
        )
    old = world.dynamics
    prices = dict(sorted({**old.prices, **{k: float(v) for k, v in multipliers.items()}}.items()))
    new = _publish(world, "market", prices=prices)
    names = sorted(multipliers)
    payload = {
        "version": new.version,
        "since_tick": new.since_tick,
        "multipliers": {k: new.prices[k] for k in names},
        "old": {k: old.price(objects[k]) for k in names},
        "new": {k: new.price(objects[k]) for k in names},
    }
    world.emit("market_shift", None, [], payload)
    return payload


# -- places ------------------------------------------------------------------------------------
def region_places(world: World, rx: int, ry: int) -> list[Place]:
    """The places of a materialised region in index order (never generates one)."""
    region = world.peek_region(rx, ry)
    if region is None:
        raise UnknownEntityError(f"no materialised region {region_key(rx, ry)!r}")
    return [world.place(place_id(rx, ry, i)) for i in range(region.n_places)]


def is_flooded(place: Place, tick: int) -> bool:
    return int(place.attrs.get("flooded_until") or -1) > tick


def floodable(world: World, rx: int, ry: int) -> list[Place]:
    """Outdoor places of the region that are not flooded now. Hubs never flood: roads between
    regions meet at hubs, and a flooded hub would cut the region off."""
    return [
        p for p in region_places(world, rx, ry)[1:] if p.outdoor and not is_flooded(p, world.tick)
    ]


def flood(world: World, place: str, until: int) -> dict[str, Any]:
    """Make ``place`` impassable until tick ``until``: no exit leads into it before then."""
    target = world.place(place)
    rx, ry = region_of(place)
    if target.id == place_id(rx, ry, 0) or not target.outdoor:
        raise WorldEventError(f"expected an outdoor place that is not a hub, got {place!r}")
    if until <= world.tick:
        raise WorldEventError(f"expected a flood until a tick after {world.tick}, got {until}")
    until = max(until, int(target.attrs.get("flooded_until") or -1))
    target.attrs["flooded_until"] = until
    world.touch(target)
    cut = [
        {"from": there, "exit": label}
        for there in sorted(set(target.exits.values()))
        if region_of(there) == (rx, ry)
        for label, back in world.place(there).exits.items()
        if back == place
    ]
    payload = {
        "region": region_key(rx, ry),
        "place": place,
        "name": target.name,
        "until": until,
        "cut": cut,
    }
    world.emit("flood", None, [f"place:{place}", f"region:{region_key(rx, ry)}"], payload)
    return payload


# -- storms ------------------------------------------------------------------------------------
def _region_things(world: World, rx: int, ry: int) -> list[tuple[Place, list[Thing]]]:
    """Every place of the region with what lies in it (the one region a storm loads)."""
    return [(p, world.things_at(p.id)) for p in region_places(world, rx, ry)]


def storm_moves(world: World, rx: int, ry: int, size: int, gen: np.random.Generator) -> list[Move]:
    """Up to ``size`` objects of the region that a storm carries to other places of it.

    Objects lying exposed (on or in a receptacle that does not close) are blown away; each
    lands on the roomiest plain surface (not a station, not closable) of another place."""
    rules = world.rules
    layout = _region_things(world, rx, ry)
    by_id = {t.id: t for _, things in layout for t in things}

    def plain(thing: Thing) -> bool:
        spec = rules.receptacles[thing.type]
        return not spec.openable and spec.station is None

    landing: dict[str, Thing] = {}  # place id -> the receptacle things land on there
    room: dict[int, int] = {}
    for place, things in layout:
        surfaces = [t for t in things if t.kind == "receptacle" and plain(t)]
        if surfaces:
            best = max(surfaces, key=lambda t: (rules.receptacles[t.type].capacity, -t.id))
            landing[place.id] = best
            inside = sum(1 for t in things if t.container == best.id)
            room[best.id] = rules.receptacles[best.type].capacity - inside
    exposed = [
        t
        for _, things in layout
        for t in things
        if t.kind == "object"
        and t.container is not None
        and not rules.receptacles[by_id[t.container].type].openable
    ]
    moves: list[Move] = []
    count = min(size, len(exposed))
    for index in gen.choice(len(exposed), size=count, replace=False) if count else []:
        thing = exposed[int(index)]
        targets = [p for p in landing if p != thing.place and room[landing[p].id] > 0]
        if not targets:
            continue
        to = targets[int(gen.integers(len(targets)))]
        room[landing[to].id] -= 1
        moves.append(Move(thing.id, to, landing[to].id))
    return moves


def storm(world: World, rx: int, ry: int, moves: Sequence[Move]) -> dict[str, Any]:
    """Carry objects of region (rx, ry) to other places of it, through :meth:`World.move`."""
    _region_things(world, rx, ry)  # a replay loads and settles what the live storm did
    logged: list[dict[str, Any]] = []
    for move in moves:
        thing, host = world.thing(move.thing), world.thing(move.into)
        if (
            thing.kind != "object"
            or thing.place is None
            or region_of(thing.place) != (rx, ry)
            or host.kind != "receptacle"
            or host.place != move.to
            or region_of(move.to) != (rx, ry)
        ):
            raise WorldEventError(
                f"expected an object lying in region {region_key(rx, ry)} and a receptacle of "
                f"it, got {thing.label} in {thing.place} onto {host.label} in {host.place}"
            )
        logged.append(
            {
                "thing": thing.id,
                "label": thing.label,
                "from": thing.place,
                "to": move.to,
                "into": host.id,
            }
        )
        thing.attrs.pop("chilled", None)  # landing spots never cool
        world.move(thing, place=move.to, container=host.id)
    payload = {"region": region_key(rx, ry), "moves": logged}
    entities = [
        f"region:{region_key(rx, ry)}",
        *(f"thing:{m['thing']}" for m in logged),
        *sorted({f"place:{p}" for m in logged for p in (m["from"], m["to"])}),
    ]
    world.emit("storm", None, entities, payload)
    return payload


# -- replay ------------------------------------------------------------------------------------
def apply_logged(world: World, kind: str, payload: Mapping[str, Any]) -> None:
    """Re-apply a logged world event (one of :data:`KINDS`) from its payload."""
    if kind == "forge_drift":
        drift(world, payload["new"])
    elif kind == "recipe_discovered":
        discover(world, payload["recipe"])
    elif kind == "market_shift":
        shift_prices(world, payload["multipliers"])
    elif kind == "flood":
        flood(world, payload["place"], payload["until"])
    elif kind == "storm":
        rx, ry = (int(c) for c in str(payload["region"]).split(","))
        storm(world, rx, ry, [Move(m["thing"], m["to"], m["into"]) for m in payload["moves"]])
    else:
        raise WorldEventError(f"expected a world event kind in {sorted(KINDS)}, got {kind!r}")
