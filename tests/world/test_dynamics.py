"""Lazily applied dynamics after the right number of ticks: spoilage, temperature, regrowth,
tool wear, day and night, seasons, versioned parameters, and laziness itself."""

from __future__ import annotations

from collections import deque

import pytest

from world import engine, worldgen
from world.rules import Rules
from world.state import World

APPLE_RATE = 100 / 2400  # freshness an apple loses per tick at room temperature
SEASON = 1200
WINTER = 3 * SEASON


def _fresh(sim, thing_id: int) -> float:
    return float(sim.thing(thing_id).attrs["fresh"])


# -- spoilage and temperature -----------------------------------------------------------------


def test_spoilage_at_room_temperature(sim) -> None:
    apple = sim.spawn("apple", holder="a")
    sim.skip(600)
    assert _fresh(sim, apple.id) == pytest.approx(100 - 600 * APPLE_RATE, abs=1e-3)
    assert "It is fresh." in sim.step("a", f"examine {apple.label}").observation
    sim.skip(2400)
    assert _fresh(sim, apple.id) == 0.0
    assert "It is rotten." in sim.step("a", f"examine {apple.label}").observation
    assert not sim.step("a", f"eat {apple.label}").accepted


def test_things_without_spoil_ticks_never_spoil(sim) -> None:
    mug = sim.spawn("mug", holder="a")
    sim.skip(10_000)
    assert "fresh" not in sim.thing(mug.id).attrs


def test_food_in_a_fridge_spoils_slower(sim, rules: Rules) -> None:
    factor = rules.dynamics.cold_spoil_factor
    inside = sim.spawn("apple", holder="a")
    outside = sim.spawn("apple", into="countertop 1")
    born = inside.tick
    assert sim.step("a", "open fridge 1").accepted
    assert sim.step("a", f"put {inside.label} in fridge 1").accepted
    put = sim.tick - 1  # an action takes effect at the tick before the one its step reports
    sim.skip(1000)
    warm_before = (put - born) * APPLE_RATE
    assert _fresh(sim, inside.id) == pytest.approx(
        100 - warm_before - (sim.tick - put) * APPLE_RATE * factor, abs=1e-3
    )
    assert _fresh(sim, outside.id) == pytest.approx(100 - (sim.tick - born) * APPLE_RATE, abs=1e-3)
    # Taken out, it spoils at room speed again.
    assert sim.step("a", f"take {inside.label} from fridge 1").accepted
    taken = sim.tick - 1
    assert "chilled" not in sim.thing(inside.id).attrs
    sim.skip(100)
    expected = (
        100 - warm_before - (taken - put) * APPLE_RATE * factor - (sim.tick - taken) * APPLE_RATE
    )
    assert _fresh(sim, inside.id) == pytest.approx(expected, abs=1e-3)


def test_cooled_food_spoils_slower_until_it_warms_up(sim, rules: Rules) -> None:
    v = rules.dynamics
    cooled = sim.spawn("apple", holder="a")
    plain = sim.spawn("apple", holder="a")
    assert sim.step("a", f"cool {cooled.label} with fridge 1").accepted
    sim.skip(1000)
    saved = v.temperature_ticks * (1 - v.cold_spoil_factor) * APPLE_RATE
    assert _fresh(sim, cooled.id) - _fresh(sim, plain.id) == pytest.approx(saved, abs=1e-2)


@pytest.mark.parametrize(
    ("verb", "station", "temp"), [("heat", "stove 1", "hot"), ("cool", "fridge 1", "cold")]
)
def test_temperature_reverts_after_temperature_ticks(
    sim, rules: Rules, verb: str, station: str, temp: str
) -> None:
    apple = sim.spawn("apple", holder="a")
    assert sim.step("a", f"{verb} {apple.label} with {station}").accepted
    done = sim.tick - 1  # an action takes effect at the tick before the one its step reports
    sim.skip(done + rules.dynamics.temperature_ticks - 1 - sim.tick)
    assert sim.thing(apple.id).attrs["temp"] == temp
    sim.skip(1)
    assert sim.tick == done + rules.dynamics.temperature_ticks
    settled = sim.thing(apple.id)
    assert settled.attrs["temp"] == "room" and "temp_until" not in settled.attrs


# -- regrowth ---------------------------------------------------------------------------------


def test_regrowth_rate(sim, rules: Rules) -> None:
    spec = rules.resources["tree"]
    tree = sim.spawn("tree", stock=1.0)
    sim.skip(spec.regrow_ticks * 2)
    assert sim.thing(tree.id).attrs["stock"] == pytest.approx(3.0)
    sim.skip(spec.regrow_ticks * 100)
    assert sim.thing(tree.id).attrs["stock"] == spec.stock  # never above full


def test_regrowth_follows_regrow_rate(sim, rules: Rules) -> None:
    spec = rules.resources["well"]
    with sim.tx() as world:
        world.publish_version(
            world.dynamics.replace(version=2, since_tick=world.tick, regrow_rate=0.5)
        )
    well = sim.spawn("well", stock=0.0)
    sim.skip(spec.regrow_ticks * 4)
    assert sim.thing(well.id).attrs["stock"] == pytest.approx(2.0)


# -- tool wear --------------------------------------------------------------------------------


def test_tool_wears_and_breaks(sim) -> None:
    tree = sim.spawn("tree", stock=6.0)
    axe = sim.spawn("axe", holder="a", durability=2)
    assert sim.step("a", f"gather {tree.label} with {axe.label}").accepted
    assert sim.thing(axe.id).attrs["durability"] == 1
    assert sim.step("a", f"gather {tree.label} with {axe.label}").accepted
    broken = sim.thing(axe.id)
    assert broken.attrs["durability"] == 0 and broken.attrs["broken"] is True
    assert sim.step("a", f"examine {axe.label}").observation.endswith("It is broken.")
    assert not sim.step("a", f"gather {tree.label} with {axe.label}").accepted
    assert f"gather {tree.label} with {axe.label}" not in sim.observe("a").admissible


def test_wear_per_use_is_versioned(sim) -> None:
    with sim.tx() as world:
        # in force from now on: the next action is applied at the current tick
        world.publish_version(
            world.dynamics.replace(version=2, since_tick=world.tick, wear_per_use=5)
        )
    tree = sim.spawn("tree", stock=6.0)
    axe = sim.spawn("axe", holder="a", durability=12)
    assert sim.step("a", f"gather {tree.label} with {axe.label}").accepted
    assert sim.thing(axe.id).attrs["durability"] == 7


# -- day and night ----------------------------------------------------------------------------


def test_day_and_night(sim, rules: Rules) -> None:
    day = rules.dynamics.day_length
    sim.skip(day - sim.tick % day)
    assert "It is a spring morning." in sim.observe("a").text
    sim.skip(day // 4)
    assert "It is a spring afternoon." in sim.observe("a").text
    sim.skip(day // 4)
    assert "It is a spring evening." in sim.observe("a").text
    with sim.tx() as world:
        assert not world.dynamics.is_day(world.tick)
    sim.skip(day // 4)
    assert "It is a spring night." in sim.observe("a").text


# -- seasons ----------------------------------------------------------------------------------


def test_seasons_follow_the_calendar(sim) -> None:
    seen = []
    for _ in range(5):
        sim.skip(SEASON - sim.tick % SEASON)
        with sim.tx() as world:
            seen.append(world.season)
    assert seen == ["summer", "autumn", "winter", "spring", "summer"]
    assert "It is a summer" in sim.observe("a").text


@pytest.mark.parametrize("resource", ["berry bush", "wheat field", "flax field"])
def test_winter_stops_crop_regrowth(sim, rules: Rules, resource: str) -> None:
    spec = rules.resources[resource]
    sim.skip(WINTER - sim.tick)
    bush = sim.spawn(resource, stock=0.0)
    sim.skip(spec.regrow_ticks * 3)
    assert sim.thing(bush.id).attrs["stock"] == 0.0
    # It sleeps through winter and grows again in spring, settled in one lazy jump.
    sim.skip(4 * SEASON - sim.tick + spec.regrow_ticks * 2)
    assert sim.thing(bush.id).attrs["stock"] == pytest.approx(2.0)


def test_non_crops_regrow_in_winter(sim, rules: Rules) -> None:
    sim.skip(WINTER - sim.tick)
    tree = sim.spawn("tree", stock=0.0)
    sim.skip(rules.resources["tree"].regrow_ticks)
    assert sim.thing(tree.id).attrs["stock"] == pytest.approx(1.0)


def _lake(rules: Rules, seed: int) -> tuple[int, int]:
    for r in range(1, 10):
        for rx in range(-r, r + 1):
            for ry in range(-r, r + 1):
                if worldgen.region_kind(rules, seed, rx, ry).kind == "lake":
                    return rx, ry
    raise AssertionError("no lake near the origin")


def _shortest(world: World, start: str, goal: str) -> int:
    """Steps from start to goal through places enterable now, inside start's region."""
    region = start.split(":")[0]
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        here, dist = queue.popleft()
        if here == goal:
            return dist
        for target in world.place(here).exits.values():
            place = world.place(target) if target.startswith(region + ":") else None
            if (
                place is None
                or target in seen
                or world.season not in world.rules.places[place.kind].seasons
            ):
                continue
            seen.add(target)
            queue.append((target, dist + 1))
    raise AssertionError(f"{goal} unreachable from {start}")


def test_the_lake_freezes_in_winter_and_the_ice_makes_the_crossing_shorter(
    sim, rules: Rules
) -> None:
    rx, ry = _lake(rules, sim.backend.meta.seed)
    shore = f"{rx},{ry}:0"
    sim.teleport("a", shore)
    with sim.tx() as world:
        names = {
            world.place(p).name: p
            for p in (shore, *world.place(shore).exits.values())
            if p.startswith(f"{rx},{ry}:")
        }
        far = next(
            p
            for i in range(world.region(rx, ry).n_places)
            if (p := f"{rx},{ry}:{i}") and world.place(p).kind == "far shore"
        )
        summer_distance = _shortest(world, shore, far)
    assert "ice 1" in names
    assert "go to ice 1" not in sim.observe("a").admissible
    assert not sim.step("a", "go to ice 1").accepted

    sim.skip(WINTER - sim.tick)
    assert "go to ice 1" in sim.observe("a").admissible
    assert sim.step("a", "go to ice 1").accepted
    far_name = World(sim.backend).place(far).name
    assert sim.step("a", f"go to {far_name}").accepted
    assert sim.backend.avatars["a"].place == far
    with sim.tx() as world:
        assert _shortest(world, shore, far) == 2 < summer_distance == 4

    sim.skip(4 * SEASON - sim.tick)  # spring: the ice is gone again
    sim.teleport("a", shore)
    assert "go to ice 1" not in sim.observe("a").admissible


# -- versions and laziness --------------------------------------------------------------------


def test_a_version_published_mid_way_is_integrated_piecewise(sim) -> None:
    apple = sim.spawn("apple", holder="a")
    start = sim.tick
    with sim.tx() as world:
        world.publish_version(
            world.dynamics.replace(version=2, since_tick=start + 500, spoil_rate=2.0)
        )
    sim.skip(1000)  # nothing loads the apple in between: one lazy settle spans both versions
    assert _fresh(sim, apple.id) == pytest.approx(
        100 - 500 * APPLE_RATE - 500 * 2 * APPLE_RATE, abs=1e-3
    )


def test_a_version_before_a_things_last_settle_does_not_apply_retroactively(sim) -> None:
    apple = sim.spawn("apple", holder="a")
    sim.skip(300)
    assert _fresh(sim, apple.id) == pytest.approx(100 - 300 * APPLE_RATE, abs=1e-3)
    with sim.tx() as world:
        world.publish_version(
            world.dynamics.replace(version=2, since_tick=world.tick, spoil_rate=3.0)
        )
    sim.skip(100)
    assert _fresh(sim, apple.id) == pytest.approx(
        100 - 300 * APPLE_RATE - 300 * APPLE_RATE, abs=1e-3
    )


def test_an_untouched_thing_is_not_changed_until_loaded(sim) -> None:
    apple = sim.spawn("apple", into="countertop 1")
    bush = sim.spawn("berry bush", stock=0.0)
    stored = sim.backend.things
    born = stored[apple.id].tick
    sim.skip(500)
    sim.teleport("a", "0,0:0")
    for _ in range(5):
        assert sim.step("a", "wait").accepted  # acting elsewhere does not touch the kitchen
    assert stored[apple.id].tick == born and stored[apple.id].attrs["fresh"] == 100.0
    assert stored[bush.id].attrs["stock"] == 0.0
    rows_before = {i: t.row() for i, t in stored.items() if t.place == "0,0:2"}
    assert rows_before[apple.id]["attrs"]["fresh"] == 100.0
    settled = sim.thing(apple.id)
    assert settled.tick == sim.tick and settled.attrs["fresh"] < 100.0
    assert sim.thing(bush.id).attrs["stock"] > 0


def test_looking_settles_what_is_seen(sim) -> None:
    apple = sim.spawn("apple", into="countertop 1")
    sim.skip(700)
    sim.step("a", "look")
    assert sim.backend.things[apple.id].tick == sim.tick
    assert sim.backend.things[apple.id].attrs["fresh"] == pytest.approx(
        100 - 700 * APPLE_RATE, abs=0.1
    )


def test_heartbeat_is_logged(sim) -> None:
    tick = sim.tick
    sim.heartbeat(3)
    assert sim.tick == tick + 3
    assert [e.kind for e in sim.backend.events[-3:]] == ["tick"] * 3
    with sim.tx() as world:
        assert engine.heartbeat(world) == tick + 4


@pytest.mark.parametrize("kind", ["apple", "chilled apple", "cooled apple", "tree"])
def test_settling_often_or_once_gives_the_same_value(make_sim, kind: str) -> None:
    """Reads settle what they see but are not logged; a replay settles less often."""
    values = []
    for every in (1, 8, 400):
        s = make_sim(3)
        s.join("a", "Alice")
        s.teleport("a", "0,0:2")
        if kind == "tree":
            thing = s.spawn("tree", stock=0.0)
        else:
            thing = s.spawn("apple", holder="a")
            if kind == "chilled apple":
                assert s.step("a", "open fridge 1").accepted
                assert s.step("a", f"put {thing.label} in fridge 1").accepted
            elif kind == "cooled apple":
                assert s.step("a", f"cool {thing.label} with fridge 1").accepted
        for _ in range(400 // every):
            s.skip(every)
            s.thing(thing.id)  # a read that settles
        values.append(s.thing(thing.id).attrs.get("fresh", s.thing(thing.id).attrs.get("stock")))
    assert values[0] == values[1] == values[2]
