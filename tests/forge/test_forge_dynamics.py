"""The forge's dynamics (``forge.dynamics``): config validation, deterministic evolve, each
change kind's effect, and changes that survive reopening the database and replay from its log.

Not named test_dynamics.py: tests/world has one, and pytest needs unique test basenames."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import select

from forge.dynamics import Change, DynamicsConfig, evolve
from migrations import upgrade_to_head
from tests.server.dbfixtures import fresh_database
from world import engine
from world.entities import region_of
from world.replay import replay
from world.rules import RulesVersion
from world.state import MemoryBackend, World
from world.store import SqlBackend, ensure_world, lock_world, make_engine, session_factory
from world.store.models import EventRow

SEED = 7
T = TypeVar("T")
FARM_HUB = "1,0:0"  # seed 7: region (1, 0) is a farm whose fields border its hub
EVERYTHING = DynamicsConfig(
    drift_every=1,
    wear_step=1.0,
    storm_probability=1.0,
    flood_probability=1.0,
    discovery_probability=1.0,
    market_probability=1.0,
    event_radius=1,
)
KINDS = {"world.drift", "world.discovery", "world.market", "world.storm", "world.flood"}
LOGGED = ("forge_drift", "recipe_discovered", "market_shift", "storm", "flood")


# -- config ------------------------------------------------------------------------------------
def test_config_round_trips_through_a_plain_dict() -> None:
    default = DynamicsConfig()
    assert DynamicsConfig.from_dict({}) == default
    assert DynamicsConfig.from_dict(dataclasses.asdict(default)) == default
    changed = DynamicsConfig.from_dict({"storm_probability": 1, "flood_ticks": 50})
    assert changed.storm_probability == 1.0 and isinstance(changed.storm_probability, float)
    assert changed.flood_ticks == 50 and changed.drift_every == default.drift_every
    kept = DynamicsConfig.from_dict({"drift_scale": 0.2}, base=changed)
    assert (kept.drift_scale, kept.flood_ticks) == (0.2, 50)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"storm_chance": 0.5}, "unknown"),
        ({"storm_probability": 1.5}, "probability"),
        ({"flood_probability": -0.1}, ">= 0"),
        ({"drift_every": 2.5}, "integer"),
        ({"storm_scatter": True}, "number"),
        ({"flood_ticks": "600"}, "number"),
        ({"flood_ticks": 0}, ">= 1"),
        ({"drift_scale": math.nan}, "finite"),
        ({"drift_scale": 3.0}, "slow drift"),
        ({"rate_min": 1.5}, "rate_min"),
        ({"rate_max": 0.9}, "rate_max"),
        ({"rate_min": 0}, "rate_min"),
        ({"wear_max": 0}, ">= 1"),
        ({"market_probability": 1.5}, "probability"),
        ({"market_scale": 2.0}, "slow drift"),
        ({"price_min": 0}, "price_min"),
        ({"price_max": 0.5}, "price_max"),
    ],
)
def test_bad_config_values_are_refused_with_a_clear_message(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DynamicsConfig.from_dict(data)


def test_a_config_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="mapping"):
        DynamicsConfig.from_dict([("storm_probability", 1.0)])  # type: ignore[arg-type]


# -- evolve in memory --------------------------------------------------------------------------
def _settle_avatars(world: World) -> None:
    """Avatar ``a`` at the farm's hub and one more at the hub of every other region within one
    of the origin: joining is a logged input, so the regions it materialises replay too."""
    world.add_avatar("a", "Alice", FARM_HUB)
    for rx in (-1, 0, 1):
        for ry in (-1, 0, 1):
            if f"{rx},{ry}:0" != FARM_HUB:
                world.add_avatar(f"n{rx}{ry}", f"Settler{rx + 1}{ry + 1}", f"{rx},{ry}:0")


def _populated(backend: MemoryBackend) -> None:
    """Settled avatars, then a few steps of avatar ``a``."""
    world = World(backend)
    _settle_avatars(world)
    world.commit()
    for text in ("look", "wait", "go to field 1", "go to farmyard 1"):
        world = World(backend)
        engine.step(world, "a", text)
        world.commit()


@pytest.fixture
def backend() -> MemoryBackend:
    backend = MemoryBackend(SEED)
    _populated(backend)
    return backend


def _evolve(backend: MemoryBackend, config: DynamicsConfig, cycle: int) -> list[Change]:
    world = World(backend)
    changes = evolve(world, config, cycle)
    world.commit()
    return changes


def test_evolve_is_a_function_of_the_state_and_the_cycle(backend: MemoryBackend) -> None:
    first, second = backend.clone(), backend.clone()
    changes = _evolve(first, EVERYTHING, cycle=5)
    assert {c.kind for c in changes} == KINDS
    assert all(c.verdict == "applied" for c in changes)
    assert _evolve(second, EVERYTHING, cycle=5) == changes
    assert World(first).state_hash() == World(second).state_hash()
    other = _evolve(backend.clone(), EVERYTHING, cycle=6)
    assert [c.evidence for c in other] != [c.evidence for c in changes]


def test_each_change_does_what_its_evidence_says(backend: MemoryBackend) -> None:
    changes = {c.kind: c.evidence for c in _evolve(backend, EVERYTHING, cycle=1)}
    version = backend.meta.versions[-1]
    drift = changes["world.drift"]
    assert all(getattr(version, k) == v for k, v in drift["new"].items())
    assert drift["old"] != drift["new"] and drift["since_tick"] == backend.meta.tick
    assert 0.5 <= version.spoil_rate <= 2.0 and 0.5 <= version.regrow_rate <= 2.0
    assert changes["world.discovery"]["recipe"] in version.discovered
    market = changes["world.market"]
    assert len(market["multipliers"]) == 2 and market["since_tick"] == backend.meta.tick
    rules = World(backend).rules
    assert set(market["multipliers"]) <= set(rules.receptacles["stall"].sells)
    for name, multiplier in market["multipliers"].items():
        assert version.prices[name] == multiplier and 0.5 <= multiplier <= 2.0
        assert market["new"][name] == version.price(rules.objects[name])
        assert market["old"][name] == rules.objects[name].value != market["new"][name]
    flood = changes["world.flood"]
    assert backend.places[flood["place"]].attrs["flooded_until"] == flood["until"]
    assert flood["until"] == backend.meta.tick + EVERYTHING.flood_ticks
    storm = changes["world.storm"]
    for move in storm["moves"]:
        assert backend.things[move["thing"]].place == move["to"]
        assert region_of(move["to"]) == region_of(move["from"])
        assert f"{region_of(move['to'])[0]},{region_of(move['to'])[1]}" == storm["region"]
    kinds = [e.kind for e in backend.events]
    assert set(LOGGED) <= set(kinds)


def test_nothing_happens_at_zero_probability_and_drift_waits_its_turn(
    backend: MemoryBackend,
) -> None:
    calm = DynamicsConfig(
        drift_every=1000, storm_probability=0, flood_probability=0, discovery_probability=0,
        market_probability=0,
    )  # fmt: skip
    before = World(backend).state_hash()
    assert _evolve(backend, calm, cycle=1) == []
    assert World(backend).state_hash() == before
    backend.meta.tick = 1000
    assert [c.kind for c in _evolve(backend, calm, cycle=2)] == ["world.drift"]
    assert _evolve(backend, calm, cycle=3) == []  # the next is due 1000 ticks after this one
    backend.meta.tick = 2000
    assert [c.kind for c in _evolve(backend, calm, cycle=4)] == ["world.drift"]


def _versions_after(config: DynamicsConfig, cycles: int) -> list[RulesVersion]:
    """The rules versions of a fresh world after ``cycles`` forge cycles, one tick apart."""
    backend = MemoryBackend(SEED)
    for cycle in range(cycles):
        backend.meta.tick += 1
        _evolve(backend, config, cycle)
    return backend.meta.versions


def test_drift_stays_inside_its_bounds_over_many_drifts() -> None:
    wild = DynamicsConfig(
        drift_every=1, drift_scale=1.0, wear_step=1.0, wear_max=2, storm_probability=0,
        flood_probability=0, discovery_probability=0, market_probability=0,
    )  # fmt: skip
    versions = _versions_after(wild, 60)
    assert len(versions) == 61
    assert {v.spoil_rate == 1.0 for v in versions[1:]} != {True}
    assert all(0.5 <= v.spoil_rate <= 2.0 and 0.5 <= v.regrow_rate <= 2.0 for v in versions)
    assert {v.wear_per_use for v in versions} <= {1, 2}
    assert {v.season_length for v in versions} == {versions[0].season_length}


def test_market_shifts_stay_inside_their_bounds_over_many_shifts() -> None:
    wild = DynamicsConfig(
        drift_every=0, market_probability=1.0, market_scale=1.0, price_min=0.8, price_max=1.5,
        storm_probability=0, flood_probability=0, discovery_probability=0,
    )  # fmt: skip
    versions = _versions_after(wild, 40)
    assert len(versions) == 41 and {v.cause for v in versions[1:]} == {"market"}
    multipliers = [m for v in versions for m in v.prices.values()]
    assert all(0.8 <= m <= 1.5 for m in multipliers)
    assert {0.8, 1.5} <= set(multipliers)  # a wide step meets both bounds
    assert set(versions[-1].prices) == {"bread", "cheese", "rope", "fishing rod"}


# -- through the SQL store ---------------------------------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        eng = make_engine(url)
        upgrade_to_head(eng)
        with session_factory(eng)() as session:
            ensure_world(session, SEED)
            session.commit()
        eng.dispose()
        yield url


def _sql_transaction(url: str, act: Callable[[World], T]) -> T:
    """Run ``act(world)`` in one committed world transaction of a fresh engine."""
    eng = make_engine(url)
    try:
        with session_factory(eng)() as session:
            world = World(SqlBackend(session, lock_world(session)))
            result = act(world)
            world.commit()
            session.commit()
            return result
    finally:
        eng.dispose()


def _reopened_and_replayed(url: str, check: Callable[[World], None]) -> list[dict]:
    """Run ``check`` on the world as a new engine (a restarted server) sees it, replay the
    event log onto an empty world, check that it has the same state hash, and return the log."""
    eng = make_engine(url)
    try:
        with session_factory(eng)() as session:
            world = World(SqlBackend(session))
            check(world)
            live = world.state_hash()
            table = EventRow.__table__
            events = [
                dict(r) for r in session.execute(select(table).order_by(table.c.id)).mappings()
            ]
    finally:
        eng.dispose()
    rebuilt = MemoryBackend(SEED)
    replay(events, rebuilt)
    assert World(rebuilt).state_hash() == live
    return events


def test_changes_are_logged_survive_reopening_and_replay_to_the_same_hash(
    database_url: str,
) -> None:
    _sql_transaction(database_url, _settle_avatars)
    for text in ("look", "wait"):
        _sql_transaction(database_url, lambda w, t=text: engine.step(w, "a", t))
    changes = _sql_transaction(database_url, lambda w: evolve(w, EVERYTHING, 1))
    evidence = {c.kind: c.evidence for c in changes}
    assert set(evidence) == KINDS
    for text in ("look", "go to field 1", "go to field 2", "wait"):
        _sql_transaction(database_url, lambda w, t=text: engine.step(w, "a", t))

    def check(world: World) -> None:
        version = world.dynamics
        assert version.discovered == (evidence["world.discovery"]["recipe"],)
        assert version.spoil_rate == evidence["world.drift"]["new"]["spoil_rate"]
        assert version.prices == evidence["world.market"]["multipliers"]
        flooded = world.place(evidence["world.flood"]["place"])
        assert flooded.attrs["flooded_until"] == evidence["world.flood"]["until"]
        for move in evidence["world.storm"]["moves"]:
            assert world.thing(move["thing"]).container == move["into"]

    events = _reopened_and_replayed(database_url, check)
    kinds = [e["kind"] for e in events]
    for kind in LOGGED:
        assert kinds.count(kind) == 1
    forge_txn = {e["txn"] for e in events if e["kind"] == "storm"}
    assert {e["txn"] for e in events if e["kind"] == "flood"} == forge_txn  # one transaction


MARKET_STALL = "1,1:2"  # seed 7: region (1, 1) is a market; this place holds stall 1, cheese 2
MARKET_ONLY = DynamicsConfig(
    drift_every=0, market_probability=1.0, market_scale=1.0, storm_probability=0,
    flood_probability=0, discovery_probability=0,
)  # fmt: skip


def _trades(world: World) -> set[str]:
    return {a for a in engine.observe(world, "t").admissible if a.startswith("trade ")}


def _affordable(world: World) -> set[str]:
    """The trades the prices in force allow, computed from the rules, not by the engine."""
    rules, version = world.rules, world.dynamics
    return {
        f"trade {thing.label} for {item} at stall 1"
        for thing in world.inventory("t")
        for item in rules.receptacles["stall"].sells
        if item != thing.type
        and thing.quantity * version.price(rules.objects[thing.type])
        >= version.price(rules.objects[item])
    }


def test_a_market_shift_changes_trades_from_its_tick_and_replays_through_the_store(
    database_url: str,
) -> None:
    _sql_transaction(database_url, lambda w: w.add_avatar("t", "Trader", MARKET_STALL))
    _sql_transaction(database_url, lambda w: engine.step(w, "t", "take cheese 2 from stall 1"))
    before = _sql_transaction(database_url, _trades)
    assert before == _sql_transaction(database_url, _affordable)
    assert before == {
        f"trade cheese 2 for {x} at stall 1" for x in ("bread", "rope", "fishing rod")
    }
    shifts = []
    for cycle in range(1, 9):  # shifts until one changes what cheese 2 buys
        shifts.append(_sql_transaction(database_url, lambda w, c=cycle: evolve(w, MARKET_ONLY, c)))
        after = _sql_transaction(database_url, _trades)
        assert after == _sql_transaction(database_url, _affordable)
        if after != before:
            break
    assert after != before, "eight shifts never changed a trade"
    assert all([c.kind for c in s] == ["world.market"] for s in shifts)
    trade = sorted(after)[0]
    reply = _sql_transaction(database_url, lambda w: engine.step(w, "t", trade))
    assert reply.accepted and reply.observation.startswith("You trade 1 cheese for 1 ")

    shifted = {k: v for s in shifts for k, v in s[0].evidence["multipliers"].items()}

    def check(world: World) -> None:
        assert world.dynamics.prices == shifted  # the later shift of a type wins
        assert _trades(world) == _affordable(world)

    events = _reopened_and_replayed(database_url, check)
    assert [e["kind"] for e in events].count("market_shift") == len(shifts)
