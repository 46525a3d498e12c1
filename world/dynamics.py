"""Lazily applied dynamics: spoilage, temperature, regrowth, as pure functions of ticks.

Nothing sweeps the world. When a transaction loads a thing, :func:`settle` brings it from the
tick it was last settled at up to now, integrating over every dynamics version and every
season in between. An untouched thing costs nothing until it is next looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from world.entities import Thing
from world.rules import SEASONS, Rules, RulesVersion

if TYPE_CHECKING:
    from world.state import WorldMeta

FRESH = 100.0  # freshness of a just-made food, in percent
ROOM, HOT, COLD = "room", "hot", "cold"


def initial_attrs(rules: Rules, type_name: str) -> dict[str, Any]:
    """The attributes a new thing of this type starts with."""
    kind = rules.kind_of(type_name)
    if kind == "receptacle":
        r = rules.receptacles[type_name]
        attrs: dict[str, Any] = {}
        if r.openable:
            attrs["open"] = False
        if r.toggleable:
            attrs["on"] = False
        return attrs
    if kind == "resource":
        return {"stock": float(rules.resources[type_name].stock)}
    o = rules.objects[type_name]
    attrs = {"clean": True, "temp": ROOM, "quantity": 1}
    if o.spoil_ticks is not None:
        attrs["fresh"] = FRESH
    if o.durability is not None:
        attrs["durability"] = o.durability
    return attrs


def segments(meta: WorldMeta, start: int, end: int) -> Iterator[tuple[int, int, RulesVersion, str]]:
    """Split ticks [start, end) into runs with one dynamics version and one season."""
    bounds = sorted({v.since_tick for v in meta.versions if start < v.since_tick < end})
    edges = [start, *bounds, end]
    for lo, hi in zip(edges, edges[1:], strict=False):
        version = meta.version_at(lo)
        tick = lo
        while tick < hi:
            season_end = (tick // version.season_length + 1) * version.season_length
            stop = min(hi, season_end)
            yield tick, stop, version, version.season(tick)
            tick = stop


def settle(thing: Thing, rules: Rules, meta: WorldMeta, now: int) -> bool:
    """Apply every dynamic from ``thing.tick`` to ``now``; True if an attribute changed."""
    if now <= thing.tick:
        return False
    before = dict(thing.attrs)
    if thing.kind == "object":
        _settle_object(thing, rules, meta, now)
    elif thing.kind == "resource":
        _settle_resource(thing, rules, meta, now)
    thing.tick = now
    return thing.attrs != before


def _settle_object(thing: Thing, rules: Rules, meta: WorldMeta, now: int) -> None:
    attrs = thing.attrs
    temp_until = int(attrs.get("temp_until", now))  # heated or cooled until this tick
    spoil_ticks = rules.objects[thing.type].spoil_ticks
    if spoil_ticks is not None and attrs.get("fresh", 0.0) > 0.0:
        loss = 0.0
        for lo, hi, version, _season in segments(meta, thing.tick, now):
            cold_ticks = 0 if attrs.get("temp") != COLD else max(0, min(hi, temp_until) - lo)
            if attrs.get("chilled"):  # inside a cooling receptacle
                cold_ticks = hi - lo
            warm_ticks = (hi - lo) - cold_ticks
            rate = FRESH / spoil_ticks * version.spoil_rate
            loss += rate * (warm_ticks + cold_ticks * version.cold_spoil_factor)
        attrs["fresh"] = round(max(0.0, float(attrs["fresh"]) - loss), 3)
    if attrs.get("temp") in (HOT, COLD) and now >= temp_until:
        attrs["temp"] = ROOM
        attrs.pop("temp_until", None)


def _settle_resource(thing: Thing, rules: Rules, meta: WorldMeta, now: int) -> None:
    spec = rules.resources[thing.type]
    stock = float(thing.attrs.get("stock", 0.0))
    if stock >= spec.stock:
        return
    for lo, hi, version, season in segments(meta, thing.tick, now):
        if season not in spec.dormant_seasons:
            stock += (hi - lo) * version.regrow_rate / spec.regrow_ticks
    thing.attrs["stock"] = round(min(float(spec.stock), stock), 3)


def temperature_until(version: RulesVersion, now: int) -> int:
    """The tick at which something heated or cooled now is back at room temperature."""
    return now + version.temperature_ticks


def is_rotten(thing: Thing) -> bool:
    return "fresh" in thing.attrs and float(thing.attrs["fresh"]) <= 0.0


def season_index(season: str) -> int:
    return SEASONS.index(season)
