"""Settling a thing whose value has reached its bound (a food rotten, a resource regrown to its
stock) reads the seasons and versions up to where it got there, not all of those since its
anchor: its cost does not grow with the world's age (issue 38: a fleet's steps settle the things
where their avatars stand, and that grew from 3% of the server's time in its first minute to 12%
in its ninth). And the value is the whole sum's, to the bit, whatever the rates."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest

from world import dynamics
from world.entities import Thing
from world.rules import Rules, RulesVersion, Versions, default_rules
from world.values import WorldMeta

DRIFT_EVERY = 7_700  # ticks between the forge's drifts in the fleet bench's run


@pytest.fixture(scope="module")
def rules() -> Rules:
    return default_rules()


def _aged(rules: Rules, now: int, *, spoil_rate: float = 1.0) -> WorldMeta:
    """A world at tick ``now`` that drifted every DRIFT_EVERY ticks, as a long fleet run does."""
    genesis = rules.dynamics
    versions = [
        genesis.replace(version=i + 1, since_tick=tick, spoil_rate=spoil_rate, cause="drift")
        for i, tick in enumerate(range(DRIFT_EVERY, now, DRIFT_EVERY))
    ]
    return WorldMeta(seed=1, tick=now, versions=Versions([genesis, *versions]))


def _food(anchor: int, fresh: float = 100.0, **attrs: Any) -> Thing:
    settled = {"fresh": fresh, "fresh_last": fresh, "fresh_base": fresh, "fresh_tick": anchor}
    settled |= {"fresh_chilled": False, "fresh_cold_until": anchor, "clean": True}
    return Thing(1, "apple", "object", 1, "0,0:0", attrs={**settled, **attrs}, tick=anchor)


def _resource(anchor: int, stock: float, kind: str = "berry bush") -> Thing:
    attrs = {"stock": stock, "stock_last": stock, "stock_base": stock, "stock_tick": anchor}
    return Thing(2, kind, "resource", 1, "0,0:0", attrs=attrs, tick=anchor)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many segments each later settle reads (one count a settle)."""
    counts: list[int] = []
    segments = dynamics.segments

    def counting(meta: WorldMeta, start: int, end: int) -> Iterator[Any]:
        counts.append(0)
        for segment in segments(meta, start, end):
            counts[-1] += 1
            yield segment

    monkeypatch.setattr(dynamics, "segments", counting)
    return counts


@pytest.mark.parametrize("now", [300_000, 3_000_000])
def test_a_rotten_food_and_a_full_resource_settle_in_as_many_segments_at_any_age(
    rules: Rules, monkeypatch: pytest.MonkeyPatch, now: int
) -> None:
    counts = _counted(monkeypatch)
    young = _aged(rules, 20_000)
    old = _aged(rules, now)
    for meta in (young, old):
        food = _food(anchor=10)  # an apple spoils in 2,400 ticks: rotten for ages
        dynamics.settle(food, rules, meta, meta.tick)
        assert food.attrs["fresh"] == 0.0
        bush = _resource(anchor=10, stock=1.0)  # regrown in 600 ticks, dormant in winter
        dynamics.settle(bush, rules, meta, meta.tick)
        assert bush.attrs["stock"] == 6.0
    food_young, bush_young, food_old, bush_old = counts
    # Before the cut each read every segment since its anchor: 19 at 20,000 ticks, 285 at
    # 300,000, 2,857 at 3,000,000 (now 3 and 1 at each).
    assert food_old == food_young <= 4
    assert bush_old == bush_young <= 2


def _versions(rng: random.Random, rules: Rules, now: int, negative: bool) -> list[RulesVersion]:
    genesis = rules.dynamics
    ticks = sorted(rng.sample(range(1, now), rng.randint(0, 12)))
    out = [genesis]
    for i, tick in enumerate(ticks):
        low = -0.5 if negative else 0.0
        out.append(
            genesis.replace(
                version=i + 2,
                since_tick=tick,
                spoil_rate=round(rng.uniform(low, 3.0), 4),
                cold_spoil_factor=round(rng.uniform(low, 1.0), 4),
                regrow_rate=round(rng.uniform(low, 3.0), 4),
                season_length=rng.choice([300, 1200]),
            )
        )
    return out


@pytest.mark.parametrize("negative", [False, True], ids=["rates >= 0", "some rates < 0"])
def test_settled_values_are_the_whole_sums_to_the_bit(
    rules: Rules, monkeypatch: pytest.MonkeyPatch, negative: bool
) -> None:
    rng = random.Random(38 + negative)
    foods = sorted(name for name, spec in rules.objects.items() if spec.spoil_ticks is not None)
    for _ in range(1_500):
        now = rng.randint(1, 60_000)
        meta = WorldMeta(seed=1, tick=now, versions=Versions(_versions(rng, rules, now, negative)))
        anchor = rng.randint(0, now)
        fresh = round(rng.uniform(0.0, 100.0), 3)
        food = _food(anchor, fresh)
        food.type = rng.choice(foods)
        how = rng.choice(["room", "chilled", "cooled"])
        if how == "chilled":  # in a fridge
            food.attrs |= {"chilled": True, "fresh_chilled": True}
        elif how == "cooled":  # cold until a tick, anchored there
            until = anchor + rng.randint(0, 3_000)
            food.attrs |= {"temp": "cold", "temp_until": until, "fresh_cold_until": until}
        kind = rng.choice(sorted(rules.resources))
        stock = round(rng.uniform(0.0, rules.resources[kind].stock), 3)
        resource = _resource(anchor, stock, kind)
        whole = [copy.deepcopy(food), copy.deepcopy(resource)]
        with monkeypatch.context() as before:  # the sums over every segment, as before the cut
            before.setattr(meta.versions, "spoils_only", False)
            before.setattr(meta.versions, "regrows_only", False)
            for thing in whole:
                dynamics.settle(thing, rules, meta, now)
        for thing in (food, resource):
            dynamics.settle(thing, rules, meta, now)
        assert [food.attrs, resource.attrs] == [t.attrs for t in whole]
