"""Intervals of success rates and of their differences, for reports, benchmarks and evaluation.

Score intervals (Wilson's, and Newcombe's for differences built from them) keep their coverage
at the small counts and the rates near 0 or 1 that episodes give, where the textbook
``p ± z·√(p(1-p)/n)`` collapses to a point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float | None, float | None]:
    """The Wilson score interval of a success rate (None, None without trials). It holds the
    rate itself: at 0 or at every trial, rounding would otherwise leave the rate a hair outside
    (and a plot's error bar negative)."""
    if trials <= 0:
        return None, None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


@dataclass(frozen=True)
class Difference:
    """Rate a minus rate b with its 95% interval."""

    estimate: float
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


def _difference(wins_a: int, n_a: int, wins_b: int, n_b: int, phi: float) -> Difference:
    """Newcombe's hybrid score interval: each rate's distance to its Wilson limits, added in
    quadrature with the correlation ``phi`` between the two (0: independent samples)."""
    low_a, high_a = wilson(wins_a, n_a)
    low_b, high_b = wilson(wins_b, n_b)
    if low_a is None or high_a is None or low_b is None or high_b is None:
        raise ValueError("expected at least one trial of each")
    return _combined((wins_a / n_a, low_a, high_a), (wins_b / n_b, low_b, high_b), phi)


def _combined(
    a: tuple[float, float, float], b: tuple[float, float, float], phi: float = 0.0
) -> Difference:
    """Rate a minus rate b, each given as (rate, low, high): each side's distance to its limits
    added in quadrature, less what the correlation ``phi`` explains (Newcombe's method 10)."""
    (ra, low_a, high_a), (rb, low_b, high_b) = a, b
    below = math.sqrt(
        max(0.0, (ra - low_a) ** 2 - 2 * phi * (ra - low_a) * (high_b - rb) + (high_b - rb) ** 2)
    )
    above = math.sqrt(
        max(0.0, (high_a - ra) ** 2 - 2 * phi * (high_a - ra) * (rb - low_b) + (rb - low_b) ** 2)
    )
    return Difference(ra - rb, max(-1.0, ra - rb - below), min(1.0, ra - rb + above))


def unpaired_difference(wins_a: int, n_a: int, wins_b: int, n_b: int) -> Difference:
    """Two independent samples (Newcombe 1998, *Statistics in Medicine* 17:873, method 10)."""
    return _difference(wins_a, n_a, wins_b, n_b, 0.0)


def paired_difference(pairs: list[tuple[bool, bool]]) -> Difference:
    """Success of a minus success of b over pairs that shared a start (Newcombe 1998,
    *Statistics in Medicine* 17:2635, method 10): the unpaired interval's two terms, less
    what the pairs' correlation φ of outcomes explains (a positive φ shrunk by N/2, as there).
    """
    n = len(pairs)
    both = sum(a and b for a, b in pairs)
    only_a = sum(a and not b for a, b in pairs)
    only_b = sum(b and not a for a, b in pairs)
    neither = n - both - only_a - only_b
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = float(both * neither - only_a * only_b)
    if cross > n / 2:
        cross -= n / 2
    elif cross > 0:
        cross = 0.0
    phi = cross / math.sqrt(margins) if margins else 0.0
    return _difference(both + only_a, n, both + only_b, n, phi)


def _standardised(
    counts: list[tuple[int, int]], weights: list[float]
) -> tuple[float, float, float]:
    """Σ w_h·p_h over strata of (wins, n) with its limits: each stratum's distance to its
    Wilson limits, weighted and added in quadrature (MOVER, Zou and Donner 2008, *Statistics in
    Medicine* 27:1693)."""
    rate = below = above = 0.0
    for (wins, n), w in zip(counts, weights, strict=True):
        low, high = wilson(wins, n)
        assert low is not None and high is not None  # strata without trials are left out
        p = wins / n
        rate += w * p
        below += (w * (p - low)) ** 2
        above += (w * (high - p)) ** 2
    return rate, rate - math.sqrt(below), rate + math.sqrt(above)


def standardised_difference(
    a: dict[object, tuple[int, int]], b: dict[object, tuple[int, int]]
) -> Difference:
    """Success of a minus success of b where the two met their strata (say, tasks by start
    distance) in different proportions: each side's rate per stratum, weighted by both sides'
    trials in that stratum together (direct standardisation to the pooled mix), so that a side
    that drew more easy tasks does not look better for it. Strata that only one side met are
    left out. The interval combines each side's MOVER limits as Newcombe's method 10 combines
    Wilson's; with one stratum it is :func:`unpaired_difference`."""
    shared = [k for k in a if k in b and a[k][1] > 0 and b[k][1] > 0]
    if not shared:
        raise ValueError("expected a stratum with trials on both sides")
    total = sum(a[k][1] + b[k][1] for k in shared)
    weights = [(a[k][1] + b[k][1]) / total for k in shared]
    return _combined(
        _standardised([a[k] for k in shared], weights),
        _standardised([b[k] for k in shared], weights),
    )
