"""The per-token rate limiter: its burst follows the rate unless a burst is set, and the
``serve`` flags reach it."""

from __future__ import annotations

import pytest

from server import limits
from server.cli import _settings, build_parser
from server.limits import RateLimiter


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: now[0])
    return now


def allowed(limiter: RateLimiter, requests: int) -> int:
    return sum(limiter.take("token") == 0.0 for _ in range(requests))


def test_default_burst_is_one_second_of_the_rate(clock: list[float]) -> None:
    # --rate-limit 5 used to allow 10,000 requests at once (a fixed burst) before limiting.
    limiter = RateLimiter(5.0)
    assert allowed(limiter, 20) == 5
    assert limiter.take("token") == pytest.approx(0.2)  # seconds until the next token
    clock[0] += 1.0
    assert allowed(limiter, 20) == 5
    assert allowed(RateLimiter(0.5), 3) == 1  # below one per second, one at a time


def test_an_explicit_burst_overrides_the_rate(clock: list[float]) -> None:
    assert allowed(RateLimiter(5.0, burst=2), 20) == 2
    assert allowed(RateLimiter(5.0, burst=50), 100) == 50


def test_serve_flags_set_rate_and_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BIGWORLD_RATE_LIMIT", "BIGWORLD_RATE_LIMIT_PER_S", "BIGWORLD_RATE_LIMIT_BURST"):
        monkeypatch.delenv(name, raising=False)
    given = _settings(
        build_parser().parse_args(["serve", "--rate-limit", "5", "--rate-burst", "7"])
    )
    assert (given.rate_limit_per_s, given.rate_limit_burst) == (5.0, 7)
    default = _settings(build_parser().parse_args(["serve", "--rate-limit", "5"]))
    assert default.rate_limit_burst is None
    assert RateLimiter(default.rate_limit_per_s, default.rate_limit_burst).burst == 5.0
