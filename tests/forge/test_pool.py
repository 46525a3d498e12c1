"""The draw at episode begin: probes every k-th draw, fresh samples at the configured rate,
pending trials first, informative tasks preferred, and only tasks near the avatar."""

from __future__ import annotations

from collections import Counter

from forge.config import ForgeConfig
from forge.pool import FRESH, POOL, PROBE, PoolTask, candidates, draw_mode, near


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
