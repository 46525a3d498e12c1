"""World events (drift, discovery, market shift, storm, flood) act through the engine's own rules, stay lazy,
and replay from the event log to the same state."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from world import engine, oracle, world_events
from world.entities import region_of
from world.errors import WorldEventError
from world.replay import replay
from world.rules import SEASONS
from world.state import MemoryBackend, World
from world.tasks import Task

APPLE_RATE = 100 / 2400  # freshness an apple loses per tick at spoil_rate 1
FARM_HUB, FIELD = "1,0:0", "1,0:1"  # seed 7: region (1, 0) is a farm; field 1 borders the hub
VILLAGE_SQUARE = "-1,0:0"  # seed 7: region (-1, 0) is a village


def _rejection(sim) -> str:
    return next(e for e in reversed(sim.backend.events) if e.kind == "rejected").payload["reason"]


def _fresh(sim, thing_id: int) -> float:
    return sim.thing(thing_id).number("fresh")


# -- flood -------------------------------------------------------------------------------------
def test_a_flooded_place_cannot_be_entered_until_the_water_recedes(sim) -> None:
    sim.teleport("a", FARM_HUB)
    assert "go to field 1" in sim.observe("a").admissible
    with sim.tx() as world:
        until = world.tick + 50
        payload = world_events.flood(world, FIELD, until)
    assert payload["place"] == FIELD and payload["until"] == until
    assert {"from": FARM_HUB, "exit": "field 1"} in payload["cut"]
    assert sim.backend.places[FIELD].attrs["flooded_until"] == until  # a stored place attribute
    assert "go to field 1" not in sim.observe("a").admissible
    result = sim.step("a", "go to field 1")
    assert not result.accepted and result.observation == engine.NOTHING
    assert "flooded" in _rejection(sim)
    sim.skip(until - sim.tick)
    assert "go to field 1" in sim.observe("a").admissible
    assert sim.step("a", "go to field 1").accepted


def test_floods_that_cannot_happen_are_refused_and_change_nothing(sim) -> None:
    sim.teleport("a", FARM_HUB)
    with sim.tx() as world:
        with pytest.raises(WorldEventError, match="not a hub"):
            world_events.flood(world, FARM_HUB, world.tick + 10)
        with pytest.raises(WorldEventError, match="after"):
            world_events.flood(world, FIELD, world.tick)
        with pytest.raises(WorldEventError, match="not a hub"):
            world_events.flood(world, "0,0:2", world.tick + 10)  # the kitchen is indoors
        assert FIELD not in world.commit().places
    assert "flooded_until" not in sim.backend.places[FIELD].attrs


# -- discovery ---------------------------------------------------------------------------------
def test_a_discovered_recipe_becomes_admissible_and_craftable(sim, rules) -> None:
    assert rules.recipes["vase"].locked and rules.recipes["vase"].station == "furnace"
    sim.spawn("furnace")
    sim.spawn("clay", holder="a", quantity=2)
    assert "craft vase" not in sim.observe("a").admissible
    refused = sim.step("a", "craft vase")
    assert not refused.accepted and "not discovered" in _rejection(sim)
    with sim.tx() as world:
        assert "vase" in world_events.locked_recipes(world)
        payload = world_events.discover(world, "vase")
    assert payload["recipe"] == "vase" and payload["inputs"] == {"clay": 2}
    assert sim.backend.meta.versions[-1].discovered == ("vase",)
    assert sim.backend.meta.versions[-1].cause == "discovery"
    assert "craft vase" in sim.observe("a").admissible
    assert sim.step("a", "craft vase").accepted
    assert [t.type for t in sim.held("a")] == ["vase"]


def test_the_oracle_plans_a_locked_recipe_only_once_it_is_discovered(sim) -> None:
    sim.spawn("furnace")
    sim.spawn("clay", holder="a", quantity=2)
    sim.spawn("coal", holder="a")
    task = Task.make("craft", {"item": "pot", "baseline": 0})
    with sim.tx() as world:
        assert oracle.plan(world, task, "a") is None
        world_events.discover(world, "pot")
    with sim.tx() as world:
        found = oracle.plan(world, task, "a")
    assert found is not None and found.actions == ("craft pot",)


def test_discovering_an_open_or_known_recipe_is_refused(sim) -> None:
    with sim.tx() as world:
        world_events.discover(world, "knife")
        for output in ("knife", "plank", "unicorn"):
            with pytest.raises(WorldEventError, match="locked recipe"):
                world_events.discover(world, output)
        assert len(world.meta.versions) == 2


# -- drift -------------------------------------------------------------------------------------
def test_drift_changes_spoilage_from_the_drift_tick_only(sim) -> None:
    apple = sim.spawn("apple", holder="a")
    sim.skip(300)
    with sim.tx() as world:
        payload = world_events.drift(world, {"spoil_rate": 2.0})
    assert payload["old"] == {"spoil_rate": 1.0} and payload["new"] == {"spoil_rate": 2.0}
    assert payload["since_tick"] == sim.tick and sim.backend.events[-1].kind == "forge_drift"
    sim.skip(200)  # one lazy settle spans both versions
    assert _fresh(sim, apple.id) == pytest.approx(
        100 - 300 * APPLE_RATE - 400 * APPLE_RATE, abs=1e-3
    )


def test_drift_changes_regrowth_and_wear(sim, rules) -> None:
    bush = sim.spawn("berry bush", stock=0.0)
    sim.spawn("basket", holder="a")
    sim.skip(60)
    with sim.tx() as world:
        world_events.drift(world, {"regrow_rate": 0.5, "wear_per_use": 2})
    sim.skip(120)
    regrow = rules.resources["berry bush"].regrow_ticks
    assert sim.thing(bush.id).number("stock") == pytest.approx(60 / regrow + 60 / regrow)
    basket = sim.held("a")[0]
    before = basket.count("durability")
    assert sim.step("a", f"gather {bush.label} with {basket.label}").accepted  # stock is 1.0
    assert sim.thing(basket.id).count("durability") == before - 2


def test_drift_keeps_seasons_on_their_schedule(sim, rules) -> None:
    length = rules.dynamics.season_length
    sim.skip(length // 2 + 7)
    with sim.tx() as world:
        world_events.drift(world, {"spoil_rate": 1.3, "regrow_rate": 0.8})
        version = world.dynamics
    assert (version.season_length, version.day_length) == (length, rules.dynamics.day_length)
    for tick in range(0, 9 * length, length // 3):
        assert version.season(tick) == SEASONS[(tick // length) % 4]
    sim.skip(length - sim.tick)  # the boundary of the genesis calendar still turns the season
    with sim.tx() as world:
        assert world.season == "summer"


def test_drift_of_anything_but_rates_and_wear_is_refused(sim) -> None:
    with sim.tx() as world:
        for values in ({"season_length": 10}, {}, {"spoil_rate": -1.0}, {"wear_per_use": 0.5}):
            with pytest.raises(WorldEventError, match="expected"):
                world_events.drift(world, values)
        assert len(world.meta.versions) == 1


# -- market shift ------------------------------------------------------------------------------
def test_a_market_shift_changes_which_trades_are_admissible_from_its_tick_on(stall_sim) -> None:
    sim = stall_sim
    book = sim.spawn("book", holder="a")  # worth 5: bread (4) and rope (3), not cheese (6)
    cheap, dear = (f"trade {book.label} for {item} at stall 1" for item in ("cheese", "bread"))
    assert dear in sim.trades("a") and cheap not in sim.trades("a")
    assert not sim.step("a", cheap).accepted
    with sim.tx() as world:
        shift = world.tick
        payload = world_events.shift_prices(world, {"cheese": 0.8, "bread": 1.5})
    assert payload["multipliers"] == {"bread": 1.5, "cheese": 0.8}
    assert payload["old"] == {"bread": 4.0, "cheese": 6.0}
    assert payload["new"] == {"bread": 6.0, "cheese": 4.8}
    assert payload["since_tick"] == shift and sim.backend.events[-1].kind == "market_shift"
    meta = sim.backend.meta
    assert meta.version_at(shift - 1).prices == {} and meta.versions[-1].cause == "market"
    assert meta.version_at(shift).prices == {"bread": 1.5, "cheese": 0.8}
    assert cheap in sim.trades("a") and dear not in sim.trades("a")
    assert "cheese for 4.8 coins" in sim.step("a", "examine stall 1").observation
    assert sim.step("a", cheap).observation == "You trade 1 book for 1 cheese at the stall 1."
    with sim.tx() as world:  # a later shift keeps the multipliers it does not name
        world_events.shift_prices(world, {"cheese": 1.0})
    assert sim.backend.meta.versions[-1].prices == {"bread": 1.5, "cheese": 1.0}


def test_a_market_shift_keeps_the_other_dynamics(sim) -> None:
    with sim.tx() as world:
        world_events.drift(world, {"spoil_rate": 1.5})
        world_events.discover(world, "vase")
        world_events.shift_prices(world, {"rope": 2})
    version = sim.backend.meta.versions[-1]
    assert (version.spoil_rate, version.discovered, version.prices) == (
        1.5,
        ("vase",),
        {"rope": 2.0},
    )


@pytest.mark.parametrize(
    "values",
    [{}, {"unicorn": 1.0}, {"bread": 0}, {"bread": -1.0}, {"bread": float("nan")},
     {"bread": True}, {"bread": "2"}, {"stall": 1.5}],
    ids=repr,
)  # fmt: skip
def test_bad_market_shifts_are_refused_and_change_nothing(sim, values: dict) -> None:
    with sim.tx() as world:
        with pytest.raises(WorldEventError, match="price multipliers"):
            world_events.shift_prices(world, values)
        assert len(world.meta.versions) == 1
    assert all(e.kind != "market_shift" for e in sim.backend.events)


# -- storm -------------------------------------------------------------------------------------
def _storm(world: World, rx: int, ry: int, size: int = 4) -> dict[str, Any]:
    moves = world_events.storm_moves(world, rx, ry, size, np.random.default_rng(3))
    assert moves, "the storm found nothing to carry"
    return world_events.storm(world, rx, ry, moves)


def test_a_storm_moves_objects_within_its_region_only(sim) -> None:
    sim.teleport("a", FARM_HUB)
    sim.teleport("a", VILLAGE_SQUARE)
    before = {i: (t.place, t.container) for i, t in sim.backend.things.items()}
    with sim.tx() as world:
        payload = _storm(world, 1, 0, size=3)
    assert payload["region"] == "1,0" and 1 <= len(payload["moves"]) <= 3
    after = sim.backend.things
    moved = {m["thing"] for m in payload["moves"]}
    for move in payload["moves"]:
        thing = after[move["thing"]]
        assert (thing.place, thing.container) == (move["to"], move["into"])
        assert region_of(move["from"]) == region_of(move["to"]) == (1, 0)
        assert move["from"] != move["to"]
        assert after[move["into"]].kind == "receptacle" and after[move["into"]].place == move["to"]
    assert {i for i, t in after.items() if before.get(i) != (t.place, t.container)} == moved
    assert [e.kind for e in sim.backend.events[-2:]] == ["storm", "state"]


class CountingBackend(MemoryBackend):
    """A MemoryBackend that records which places had their things loaded."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.loaded: list[str] = []

    def load_things_in(self, places):  # type: ignore[no-untyped-def]
        self.loaded.extend(places)
        return super().load_things_in(places)

    def load_places_in(self, rx: int, ry: int):  # type: ignore[no-untyped-def]
        places = super().load_places_in(rx, ry)
        self.loaded.extend(p.id for p in places)
        return places


def test_storm_and_drift_leave_other_regions_untouched_until_they_are_looked_at() -> None:
    backend = CountingBackend(7)
    world = World(backend)
    world.add_avatar("a", "Alice", VILLAGE_SQUARE)
    ground = next(t for t in world.things_at(VILLAGE_SQUARE) if t.type == "ground")
    apple = world.create_thing("apple", place=VILLAGE_SQUARE, container=ground.id)
    world.region(1, 0)
    world.commit()
    backend.meta.tick = 100  # time passes; nothing looks at the village
    backend.loaded.clear()

    world = World(backend)
    world_events.drift(world, {"spoil_rate": 2.0})
    _storm(world, 1, 0)
    changes = world.commit()
    assert backend.loaded and all(region_of(p) == (1, 0) for p in backend.loaded)
    assert all(region_of(p) == (1, 0) for p in changes.places)
    assert all(t.place is None or region_of(t.place) == (1, 0) for t in changes.things.values())
    assert backend.things[apple.id].tick == 0  # not settled, not written

    backend.meta.tick = 300
    settled = World(backend).thing(apple.id)
    assert settled.number("fresh") == pytest.approx(
        100 - 100 * APPLE_RATE - 400 * APPLE_RATE, abs=1e-3
    )


# -- replay ------------------------------------------------------------------------------------
def test_replaying_world_events_from_the_log_gives_the_same_state(sim) -> None:
    """Each transaction's events, numbered as the store numbers them, rebuild the world."""
    log: list[dict[str, Any]] = []

    def commit(world: World) -> None:
        txn = len({e["txn"] for e in log}) + 1
        log.extend({**dataclasses.asdict(e), "txn": txn} for e in world.commit().events)

    backend = MemoryBackend(7)
    world = World(backend)
    world.add_avatar("a", "Alice", FARM_HUB)
    commit(world)
    for text in ("look", "go to field 1", "look", "go to farmyard 1"):
        world = World(backend)
        engine.step(world, "a", text)
        commit(world)
    world = World(backend)
    world_events.drift(world, {"spoil_rate": 1.5, "wear_per_use": 2})
    world_events.discover(world, "kettle")
    world_events.shift_prices(world, {"rope": 0.75, "bread": 1.2})
    world_events.flood(world, FIELD, world.tick + 30)
    _storm(world, 1, 0)
    commit(world)
    for text in ("go to field 1", "wait"):
        world = World(backend)
        engine.step(world, "a", text)
        commit(world)
    rebuilt = MemoryBackend(7)
    assert replay(log, rebuilt) == 8
    assert World(rebuilt).state_hash() == World(backend).state_hash()
    assert [e.kind for e in rebuilt.events] == [e["kind"] for e in log]
    assert rebuilt.meta.versions == backend.meta.versions
    assert rebuilt.meta.versions[-1].prices == {"bread": 1.2, "rope": 0.75}
