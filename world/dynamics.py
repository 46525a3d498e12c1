"""Lazily applied dynamics: spoilage, temperature, regrowth, as pure functions of ticks.

Nothing sweeps the world. When a transaction loads a thing, :func:`settle` brings it from the
tick it was last settled at up to now, integrating over every dynamics version and every
season in between. An untouched thing costs nothing until it is next looked at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from world.entities import Thing
from world.rules import Rules, RulesVersion
from world.values import WorldMeta

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
    edges = [start, *meta.versions.changes_between(start, end), end]
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


# Settling must not depend on how often a thing was settled: a read settles what it sees but is
# not in the event log, so a replay settles less often, and rounding or float sums taken from the
# last settled value would drift apart. Each dynamic value therefore keeps an anchor (its value
# at the tick its drivers last changed, and those drivers) and is always recomputed from it. A
# rule that changes the value or a driver (gathering, a fridge, cooling, heating) did so at the
# tick of the last settle, ``thing.tick``; the next settle notices and re-anchors there.
#
# An anchor stays where it is while its value reaches its bound and stays there (a food rotten at
# 0, a resource regrown to its stock), so the sum from it would cover every season and version
# since, however old the world, each time the thing is loaded (issue 38: a fleet's steps settled
# the things where they stood, and settling grew from 3% of the server's time in its first minute
# to 12% in its ninth). The sums stop where the bound is reached: their terms are never negative
# while no version's rates are (the forge keeps them at or above ``rate_min``; a version that is
# negative keeps the whole sum), and a float sum of such terms never decreases, so the clamped
# value is the one the whole sum gives, to the bit.


def _settle_object(thing: Thing, rules: Rules, meta: WorldMeta, now: int) -> None:
    attrs = thing.attrs
    temp_until = thing.count("temp_until", now)  # heated or cooled until this tick
    spoil_ticks = rules.objects[thing.type].spoil_ticks
    if spoil_ticks is not None and "fresh" in attrs:
        cold_until = temp_until if attrs.get("temp") == COLD else None
        chilled = bool(attrs.get("chilled"))  # inside a cooling receptacle
        anchored_cold = thing.count("fresh_cold_until", thing.tick)
        if (
            attrs.get("fresh_last") != attrs["fresh"]
            or attrs.get("fresh_chilled") != chilled
            or (cold_until is not None and cold_until != anchored_cold)
            or (cold_until is None and anchored_cold > thing.tick)  # cooling cut short
        ):
            attrs["fresh_tick"] = thing.tick
            attrs["fresh_base"] = thing.number("fresh")
            attrs["fresh_chilled"] = chilled
            attrs["fresh_cold_until"] = cold_until if cold_until is not None else thing.tick
        anchor_tick, cold_end = thing.count("fresh_tick"), thing.count("fresh_cold_until")
        base, loss = thing.number("fresh_base"), 0.0
        spoils_only = meta.versions.spoils_only
        for lo, hi, version, _season in segments(meta, anchor_tick, now):
            cold_ticks = hi - lo if chilled else max(0, min(hi, cold_end) - lo)
            warm_ticks = (hi - lo) - cold_ticks
            rate = FRESH / spoil_ticks * version.spoil_rate
            loss += rate * (warm_ticks + cold_ticks * version.cold_spoil_factor)
            if spoils_only and loss >= base:  # rotten: what is left of the sum adds nothing
                break
        attrs["fresh"] = attrs["fresh_last"] = round(max(0.0, base - loss), 3)
    if attrs.get("temp") in (HOT, COLD) and now >= temp_until:
        attrs["temp"] = ROOM
        attrs.pop("temp_until", None)


def _settle_resource(thing: Thing, rules: Rules, meta: WorldMeta, now: int) -> None:
    attrs = thing.attrs
    spec = rules.resources[thing.type]
    stock = thing.number("stock")
    if attrs.get("stock_last") != attrs.get("stock"):
        attrs["stock_tick"], attrs["stock_base"] = thing.tick, stock
    base = thing.number("stock_base")
    if base < spec.stock:
        regrows_only = meta.versions.regrows_only
        for lo, hi, version, season in segments(meta, thing.count("stock_tick"), now):
            if season not in spec.dormant_seasons:
                base += (hi - lo) * version.regrow_rate / spec.regrow_ticks
                if regrows_only and base >= spec.stock:  # full: the rest would not show
                    break
    attrs["stock"] = attrs["stock_last"] = round(min(float(spec.stock), base), 3)


def temperature_until(version: RulesVersion, now: int) -> int:
    """The tick at which something heated or cooled now is back at room temperature."""
    return now + version.temperature_ticks


def is_rotten(thing: Thing) -> bool:
    return "fresh" in thing.attrs and thing.number("fresh") <= 0.0
