"""The forge's dynamics: the world's non-stationarity, one forge cycle at a time.

:func:`evolve` decides, from the world's seed, tick and the cycle number alone, whether this
cycle drifts the dynamics parameters, discovers a locked recipe, shifts market prices, sends a
storm or floods a place, and makes each change through :mod:`world.world_events` in the
caller's transaction (which it does not commit). Seasons are not the forge's business: they
follow ``season_length`` in every rules version, and a drift never touches the calendar.

A market shift reprices a few of the types market stalls sell (``trade O for X at R``): from
its tick on, the trades an avatar can make there change. The oracle and the task families do
not trade, so a shift changes no task's plan.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from world import rng, world_events
from world.entities import region_key
from world.state import World

PROBABILITIES = (
    "wear_step", "storm_probability", "flood_probability", "discovery_probability",
    "market_probability",
)  # fmt: skip
REGION_DRAWS = 16  # coordinates tried per storm or flood when looking for a materialised region
MARKET_TYPES = 2  # sold types one market shift reprices


@dataclass(frozen=True)
class DynamicsConfig:
    """How fast and how often the forge changes the world. Every field is a plain number, so
    a config travels as JSON (``PATCH /v1/forge/config``) and back (:meth:`from_dict`)."""

    drift_every: int = 2000  # ticks between drifts of the dynamics parameters; 0: never drift
    drift_scale: float = 0.1  # std. dev. of one drift's log-multiplier on spoil and regrow rates
    rate_min: float = 0.5  # spoil_rate and regrow_rate never drift below this ...
    rate_max: float = 2.0  # ... nor above this
    wear_step: float = 0.1  # chance per drift that wear_per_use moves one up or down
    wear_max: int = 3  # wear_per_use stays in [1, wear_max]
    storm_probability: float = 0.1  # chance per cycle that a storm hits a region
    storm_scatter: int = 4  # most objects one storm carries to other places
    flood_probability: float = 0.1  # chance per cycle that an outdoor place floods
    flood_ticks: int = 600  # ticks a flooded place stays impassable
    discovery_probability: float = 0.05  # chance per cycle that a locked recipe is discovered
    market_probability: float = 0.05  # chance per cycle that market prices shift
    market_scale: float = 0.3  # std. dev. of one shift's log-multiplier on a sold type's price
    price_min: float = 0.5  # a price multiplier never shifts below this ...
    price_max: float = 2.0  # ... nor above this
    event_radius: int = 2  # storms and floods hit materialised regions within this many
    # regions of the origin (in both coordinates), where the avatars start

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            wanted = int if f.type in ("int", int) else float
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{f.name}: expected a number, got {value!r}")
            if wanted is int and not isinstance(value, int):
                raise ValueError(f"{f.name}: expected an integer, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{f.name}: expected a finite number >= 0, got {value!r}")
            if wanted is float:
                object.__setattr__(self, f.name, float(value))  # 1 from JSON is 1.0 here
        for name in PROBABILITIES:
            if getattr(self, name) > 1:
                raise ValueError(
                    f"{name}: expected a probability in [0, 1], got {getattr(self, name)}"
                )
        for name in ("drift_scale", "market_scale"):
            if getattr(self, name) > 1:
                raise ValueError(
                    f"{name}: expected a slow drift in [0, 1], got {getattr(self, name)}"
                )
        for low, high in (("rate_min", "rate_max"), ("price_min", "price_max")):
            lo, hi = getattr(self, low), getattr(self, high)
            if not 0 < lo <= 1 <= hi:
                raise ValueError(f"expected 0 < {low} <= 1 <= {high}, got {lo} and {hi}")
        for name in ("wear_max", "storm_scatter", "flood_ticks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], base: DynamicsConfig | None = None
    ) -> DynamicsConfig:
        """A config from a plain dict of fields; fields not given keep ``base``'s values (or
        the defaults). Unknown fields and bad values are a ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping of config fields, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"expected fields among {sorted(names)}, got unknown {unknown}")
        return dataclasses.replace(base or cls(), **data)


@dataclass(frozen=True)
class Change:
    """One change the forge made to the world, with the evidence of what changed."""

    kind: str  # world.drift, world.discovery, world.market, world.storm or world.flood
    evidence: dict[str, Any]
    verdict: str = "applied"


def evolve(world: World, config: DynamicsConfig, cycle: int) -> list[Change]:
    """The changes of forge cycle ``cycle``, made in ``world``'s transaction (not committed).

    Every draw is keyed by (world seed, tick, entity, purpose) with the cycle in the purpose,
    so the same world state and cycle give the same changes."""
    makers = (_drift, _discovery, _market, _storm, _flood)
    made = (make(world, config, cycle) for make in makers)
    return [change for change in made if change is not None]


def _chance(world: World, cycle: int, purpose: str) -> float:
    return rng.uniform(world.seed, world.tick, "world", f"forge:{cycle}:{purpose}")


def _drift(world: World, config: DynamicsConfig, cycle: int) -> Change | None:
    if not _drift_due(world, config):
        return None
    gen = rng.rng(world.seed, world.tick, "world", f"forge:{cycle}:drift")
    return Change("world.drift", world_events.drift(world, _drifted(world, config, gen)))


def _discovery(world: World, config: DynamicsConfig, cycle: int) -> Change | None:
    locked = world_events.locked_recipes(world)
    if not locked or _chance(world, cycle, "discovery") >= config.discovery_probability:
        return None
    gen = rng.rng(world.seed, world.tick, "world", f"forge:{cycle}:discovery")
    output = locked[int(gen.integers(len(locked)))]
    return Change("world.discovery", world_events.discover(world, output))


def _market(world: World, config: DynamicsConfig, cycle: int) -> Change | None:
    """Reprice a few sold types: a bounded log-normal step of each one's multiplier."""
    types = world_events.traded_types(world)
    if not types or _chance(world, cycle, "market") >= config.market_probability:
        return None
    gen = rng.rng(world.seed, world.tick, "world", f"forge:{cycle}:market")
    picked = sorted(int(i) for i in gen.choice(len(types), min(MARKET_TYPES, len(types)), False))
    now = world.dynamics.prices
    multipliers = {}
    for name in (types[i] for i in picked):
        step = math.exp(config.market_scale * float(gen.standard_normal()))
        multipliers[name] = round(
            min(config.price_max, max(config.price_min, now.get(name, 1.0) * step)), 4
        )
    return Change("world.market", world_events.shift_prices(world, multipliers))


def _storm(world: World, config: DynamicsConfig, cycle: int) -> Change | None:
    if _chance(world, cycle, "storm") >= config.storm_probability:
        return None
    region = _draw_region(world, config, cycle, "storm")
    if region is None:
        return None
    gen = rng.rng(world.seed, world.tick, f"region:{region_key(*region)}", f"forge:{cycle}:storm")
    moves = world_events.storm_moves(world, *region, config.storm_scatter, gen)
    if not moves:
        return None
    return Change("world.storm", world_events.storm(world, *region, moves))


def _flood(world: World, config: DynamicsConfig, cycle: int) -> Change | None:
    if _chance(world, cycle, "flood") >= config.flood_probability:
        return None

    def floodable(rx: int, ry: int) -> bool:
        return bool(world_events.floodable(world, rx, ry))

    region = _draw_region(world, config, cycle, "flood", floodable)
    if region is None:
        return None
    places = world_events.floodable(world, *region)
    gen = rng.rng(world.seed, world.tick, f"region:{region_key(*region)}", f"forge:{cycle}:flood")
    place = places[int(gen.integers(len(places)))]
    until = world.tick + config.flood_ticks
    return Change("world.flood", world_events.flood(world, place.id, until))


def _drift_due(world: World, config: DynamicsConfig) -> bool:
    """A drift is due ``drift_every`` ticks after the last one (or after genesis)."""
    if config.drift_every == 0:
        return False
    last = max((v.since_tick for v in world.meta.versions if v.cause == "drift"), default=0)
    return world.tick - last >= config.drift_every


def _drifted(world: World, config: DynamicsConfig, gen: np.random.Generator) -> dict[str, Any]:
    """New spoil and regrow rates (a bounded log-normal step each) and, now and then, a wear
    per use one higher or lower."""
    now = world.dynamics
    values: dict[str, Any] = {}
    for name in ("spoil_rate", "regrow_rate"):
        step = math.exp(config.drift_scale * float(gen.standard_normal()))
        values[name] = round(
            min(config.rate_max, max(config.rate_min, getattr(now, name) * step)), 4
        )
    if gen.random() < config.wear_step:
        step = 1 if gen.random() < 0.5 else -1
        wear = min(config.wear_max, max(1, now.wear_per_use + step))
        if wear != now.wear_per_use:
            values["wear_per_use"] = wear
    return values


def _draw_region(
    world: World,
    config: DynamicsConfig,
    cycle: int,
    purpose: str,
    fits: Callable[[int, int], bool] = lambda rx, ry: True,
) -> tuple[int, int] | None:
    """A materialised region near the origin that ``fits``, or None when no draw hits one.
    Drawing looks up region rows only: nothing is generated, and no thing is loaded unless
    ``fits`` loads it."""
    gen = rng.rng(world.seed, world.tick, "world", f"forge:{cycle}:{purpose}:region")
    r = config.event_radius
    for _ in range(REGION_DRAWS):
        rx, ry = (int(c) for c in gen.integers(-r, r + 1, size=2))
        if world.peek_region(rx, ry) is not None and fits(rx, ry):
            return rx, ry
    return None
