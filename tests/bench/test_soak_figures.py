"""The soak's verdict on synthetic samples: flat runs pass, each kind of growth fails.

No processes are started: ``bench/soak_figures.judge`` is a pure function of the samples.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench/ is no package
from soak_figures import RSS_SLOPE_MIB, cpu, judge, summary  # noqa: E402

WARMUP_S = 600.0
Curve = Callable[[float], float]


def run(
    *,
    rss: Curve = lambda t: 300.0,
    fds: Curve = lambda t: 20.0,
    threads: Curve = lambda t: 8.0,
    p50: Curve = lambda t: 40.0,
    trainer: Curve = lambda t: 500.0,
    minutes: float = 60.0,
    gone_after_s: float | None = None,
) -> list[dict[str, Any]]:
    """A sample every 30 s: the server follows the curves (RSS with ±0.3 MiB of noise), the
    trainer's RSS follows ``trainer``; the server is absent from samples after ``gone_after_s``."""
    noise = random.Random(0)
    samples = []
    for k in range(1, int(minutes * 2) + 1):
        t = 30.0 * k
        gone = gone_after_s is not None and t > gone_after_s
        server = {
            "rss_mib": rss(t) + noise.uniform(-0.3, 0.3),
            "fds": fds(t),
            "fd_kinds": {"socket": fds(t) - 12.0, "db": 4.0, "wal": 4.0, "shm": 4.0},
            "threads": threads(t),
            "cpu_s": 0.5 * t if t < 1800 else 900.0 + 0.8 * (t - 1800),  # busier after 30 min
        }
        samples.append(
            {
                "t_s": t,
                "processes": {
                    "server": None if gone else server,
                    "trainer": {"rss_mib": trainer(t), "fds": 4, "threads": 4, "cpu_s": t},
                },
                "db_mib": 1.0 + t / 600,
                "wal_mib": 0.5,
                "p50_ms": p50(t),
            }
        )
    return samples


def test_a_flat_run_passes_and_growth_in_the_warmup_is_left_out() -> None:
    fits = judge(run(rss=lambda t: 100.0 + min(t, WARMUP_S) / 3), WARMUP_S)
    assert fits["failures"] == []
    assert abs(fits["processes"]["server"]["rss_floor_mib_per_10min"]) < 0.5
    assert fits["db_mib_per_10min"] == 1.0
    assert summary(fits, [])[-1] == "verdict: PASS, every goal met"


def test_resident_memory_growing_2_mib_per_10_minutes_fails() -> None:
    fits = judge(run(rss=lambda t: 300.0 + 2.0 * t / 600), WARMUP_S)
    assert abs(fits["processes"]["server"]["rss_floor_mib_per_10min"] - 2.0) < 0.1
    assert [f for f in fits["failures"] if f.startswith("server RSS floor grows")]
    assert not [f for f in fits["failures"] if "trainer" in f]


def batches(floor: Curve, seed: int) -> Curve:
    """A trainer's RSS: ``floor`` between batches, and up to 230 MiB more in a batch, which
    half the samples catch (at random, as the soak's samples do)."""
    rng = random.Random(seed)
    return lambda t: floor(t) + (rng.uniform(0.0, 230.0) if rng.random() < 0.5 else 0.0)


def test_memory_swinging_with_batches_is_judged_on_its_floor() -> None:
    """A line through every sample of a swinging process moves by several MiB per 10 minutes
    from run to run; its floor does not move unless the process keeps memory."""
    for seed in range(20):
        fits = judge(run(trainer=batches(lambda t: 560.0, seed)), WARMUP_S)
        assert not [f for f in fits["failures"] if "trainer" in f], (seed, fits["failures"])
    swings = [
        judge(run(trainer=batches(lambda t: 560.0, seed)), WARMUP_S)["processes"]["trainer"]
        for seed in range(20)
    ]
    assert max(abs(f["rss_mib_per_10min"]) for f in swings) > RSS_SLOPE_MIB
    leaking = judge(run(trainer=batches(lambda t: 560.0 + 3.0 * t / 600, 0)), WARMUP_S)
    assert abs(leaking["processes"]["trainer"]["rss_floor_mib_per_10min"] - 3.0) < 1.0
    assert [f for f in leaking["failures"] if f.startswith("trainer RSS floor grows")]


def steps(trend: Curve, seed: int) -> Curve:
    """A policy agent's RSS: ``trend`` plus a level between 0 and 24 MiB drawn anew every 3
    minutes and held (in an hour-long run one moved between 392 and 416 MiB this way)."""
    rng = random.Random(seed)
    levels = [rng.uniform(0.0, 24.0) for _ in range(40)]
    return lambda t: trend(t) + levels[int(t // 180)]


def test_a_floor_rising_within_its_noise_passes_and_one_told_from_no_growth_fails() -> None:
    """Floors that scatter with the level of the moment have a slope that often exceeds the
    goal with no growth at all; such a slope fails only when its 95% interval excludes zero."""

    def failed(fits: dict[str, Any]) -> bool:
        return any(f.startswith("trainer RSS floor grows") for f in fits["failures"])

    flat = [judge(run(trainer=steps(lambda t: 400.0, seed)), WARMUP_S) for seed in range(40)]
    slopes = [f["processes"]["trainer"]["rss_floor_mib_per_10min"] for f in flat]
    # the slope alone (the rule before) fails 11 of these 40 (seeded, so the counts are exact);
    # the interval's false alarms are about its 5%
    assert sum(s > RSS_SLOPE_MIB for s in slopes) == 11
    assert sum(failed(fits) for fits in flat) == 2
    for rate, caught in ((5.0, 39), (3.0, 28)):  # MiB per 10 min, and how many of 40 fail
        rising = [
            judge(run(trainer=steps(lambda t, r=rate: 400.0 + r * t / 600, seed)), WARMUP_S)
            for seed in range(40)
        ]
        assert sum(failed(fits) for fits in rising) == caught
    # where the floor is steady (the server's, ±0.3 MiB), 1.5 MiB per 10 min is told at once
    server = judge(run(rss=lambda t: 300.0 + 1.5 * t / 600), WARMUP_S)
    low, high = server["processes"]["server"]["rss_floor_interval"]
    assert 1.0 < low < 1.5 < high < 2.0
    assert [f for f in server["failures"] if f.startswith("server RSS floor grows +1.5")]


def test_a_leaked_descriptor_or_thread_every_5_minutes_fails() -> None:
    fits = judge(run(fds=lambda t: 20 + t // 300, threads=lambda t: 8 + t // 300), WARMUP_S)
    assert [f for f in fits["failures"] if f.startswith("server fds grew")]
    assert [f for f in fits["failures"] if f.startswith("server threads grew")]
    server = fits["processes"]["server"]
    grown = server["fds_growth"]
    assert server["fd_kinds_growth"] == {"db": 0.0, "shm": 0.0, "socket": grown, "wal": 0.0}
    assert f"{'':<12} fds by kind: socket {grown:+g}" in summary(fits, [])


def test_a_pool_of_threads_that_comes_and_goes_is_no_growth() -> None:
    """The server's worker threads follow the requests in flight (8-11 in an hour-long run,
    back to 8 at minute 41); a leak never comes back down."""
    breathing = random.Random(1)
    pool = judge(run(threads=lambda t: 8.0 + breathing.choice([0, 1, 1, 2, 2, 3])), WARMUP_S)
    assert pool["failures"] == []
    leak = judge(run(threads=lambda t: 8.0 + breathing.choice([0, 1, 2, 3]) + t // 900), WARMUP_S)
    assert [f for f in leak["failures"] if f.startswith("server threads grew")]


def test_a_p50_latency_that_climbs_fails_and_noise_below_the_bound_passes() -> None:
    climbing = judge(run(p50=lambda t: 40.0 + 10.0 * t / 3600), WARMUP_S)
    assert [f for f in climbing["failures"] if f.startswith("p50 latency rose")]
    wobbling = judge(run(p50=lambda t: 40.0 + (1.0 if int(t) % 60 else -1.0)), WARMUP_S)
    assert wobbling["failures"] == []


def test_too_few_samples_or_a_process_that_stopped_fails() -> None:
    assert judge(run(minutes=5.0), WARMUP_S)["failures"] == [
        "only 0 samples after the warm-up (need 3)"
    ]
    fits = judge(run(gone_after_s=1800.0), WARMUP_S)
    assert "server stopped during the run" in fits["failures"]
    assert summary(fits, ["4242 python (group of server, killed)"])[-3:] == [
        "verdict: FAIL",
        "  - server stopped during the run",
        "  - left running: 4242 python (group of server, killed)",
    ]


def test_cpu_use_is_shown_per_process_for_the_first_and_last_quarter() -> None:
    lines = cpu(run(), WARMUP_S)
    assert lines[1].split() == ["server", "0.50", "0.80"]
    assert lines[2].split() == ["trainer", "1.00", "1.00"]
    assert cpu(run(minutes=12.0), WARMUP_S) == []  # too few samples after the warm-up
