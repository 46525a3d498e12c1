"""The draw at episode begin: probes every k-th draw, fresh samples at the configured rate,
pending trials first, informative tasks preferred, and only tasks near the avatar."""

from __future__ import annotations

from collections import Counter

from forge.config import ForgeConfig
from forge.pool import (
    FRESH,
    POOL,
    PROBE,
    PoolTask,
    Rung,
    candidates,
    draw_mode,
    near,
    on_rung,
    rung,
)


def _task(task_id: str, **fields: object) -> PoolTask:
    params = {"item": "plank", "baseline": 0}
    return PoolTask(task_id, "craft", params, **fields)  # type: ignore[arg-type]


def test_every_kth_draw_is_a_probe_and_fresh_samples_come_at_their_rate() -> None:
    config = ForgeConfig(probe_every=5, fresh_probability=0.25)
    modes = [draw_mode(config, seed=1, draw=n, have_probes=True) for n in range(1, 2001)]
    assert [n for n, m in enumerate(modes, 1) if m == PROBE] == list(range(5, 2001, 5))
    others = [m for m in modes if m != PROBE]
    assert abs(others.count(FRESH) / len(others) - 0.25) < 0.04
    assert draw_mode(config, seed=1, draw=5, have_probes=False) != PROBE
    assert draw_mode(ForgeConfig(probe_every=0), seed=1, draw=5, have_probes=True) != PROBE
    again = [draw_mode(config, seed=1, draw=n, have_probes=True) for n in range(1, 2001)]
    assert again == modes  # a pure function of (seed, draw)


def test_pending_trials_come_first_and_probes_stay_out_of_pool_draws() -> None:
    config = ForgeConfig(trial_size=4)
    pool = [
        _task("a"),
        _task("p", status="pending", begun=1),
        _task("q", status="pending", begun=4),  # its trials are all handed out
        _task("probe", probe=True),
        _task("gone", status="retired"),
    ]
    order = [t.id for t in candidates(pool, POOL, config, seed=1, draw=1)]
    assert order == ["p", "a"]
    probes = [t.id for t in candidates(pool, PROBE, config, seed=1, draw=1)]
    assert probes == ["probe"]


def test_informative_and_unmeasured_tasks_are_preferred() -> None:
    config = ForgeConfig()
    pool = [
        _task("informative", accuracy=0.5, rollouts=10),
        _task("unmeasured"),
        _task("mastered", accuracy=1.0, rollouts=10),
    ]
    firsts = Counter(candidates(pool, POOL, config, seed=2, draw=n)[0].id for n in range(1, 3001))
    # weights 4 : 2 : 1
    assert firsts["informative"] > firsts["unmeasured"] > firsts["mastered"] > 0
    assert abs(firsts["informative"] / 3000 - 4 / 7) < 0.04


def test_near_keeps_tasks_whose_places_neighbour_the_avatar() -> None:
    here = "0,0:1"
    placed = {"object": "mug", "receptacle": 1, "receptacle_label": "shelf 1"}
    assert near(PoolTask("a", "pick_and_place", {**placed, "place": "1,0:3"}), here)
    assert not near(PoolTask("b", "pick_and_place", {**placed, "place": "1,1:3"}), here)
    assert not near(PoolTask("c", "pick_and_place", {**placed, "place": "0,-2:0"}), here)
    assert not near(PoolTask("d", "pick_and_place", {**placed, "place": "no place"}), here)
    assert near(_task("craft"), here)
    walk = {"place": "0,0:3", "place_name": "kitchen 1", "hops": 2, "route": "square 1"}
    assert near(PoolTask("e", "follow", {**walk, "start": here}), here)
    # Elsewhere its way is wrong.
    assert not near(PoolTask("f", "follow", {**walk, "start": "0,0:2"}), here)


def _go_to(task_id: str, hops: int, **fields: object) -> PoolTask:
    params = {"place": "0,0:1", "place_name": "kitchen 1", "hops": hops}
    return PoolTask(task_id, "go_to", params, **fields)  # type: ignore[arg-type]


def test_the_rung_is_the_newest_go_to_the_curriculum_made_accepted_ones_first() -> None:
    # Samples, requested tasks, probes and retired variants are no rung.
    assert rung([]) is None
    assert rung([_task("a"), _go_to("s", 2), _go_to("r", 2, origin="requested")]) is None
    assert rung([_go_to("p", 2, origin="easier", probe=True)]) is None
    assert rung([_go_to("x", 2, origin="easier", status="retired")]) is None
    # A variant on trial is the rung until one is accepted; the newest accepted one wins.
    down = _go_to("d", 1, origin="easier", status="pending", created_tick=10)
    down = PoolTask(down.id, "go_to", {**down.params, "from_family": "pick_and_place"},
                    status="pending", origin="easier", created_tick=10)  # fmt: skip
    assert rung([_task("a"), down]) == Rung(1, "pick_and_place", "d")
    up = _go_to("u", 2, origin="harder", status="pending", created_tick=20)
    accepted = _go_to("a1", 1, origin="easier", created_tick=5)
    assert rung([down, up]) == Rung(2, None, "u")  # the newest proposal, none accepted yet
    assert rung([down, up, accepted]) == Rung(1, None, "a1")
    assert rung([accepted, _go_to("a2", 3, origin="harder", created_tick=30)]).hops == 3


def test_with_a_rung_the_draw_considers_go_to_probes_and_trials_only() -> None:
    config = ForgeConfig(trial_size=4)
    pool = [
        _task("a"),
        _task("p", status="pending"),
        _go_to("g", 1),
        _go_to("probe", 1, probe=True),
    ]
    current = Rung(1, None, "g")
    order = [t.id for t in candidates(pool, POOL, config, seed=1, draw=1, current=current)]
    assert order == ["p", "g"]
    assert [t.id for t in candidates(pool, PROBE, config, seed=1, draw=1, current=current)] == [
        "probe"
    ]
    assert {t.id for t in candidates(pool, POOL, config, seed=1, draw=1)} == {"a", "p", "g"}
    assert on_rung(pool[0], None) and not on_rung(pool[0], current)
