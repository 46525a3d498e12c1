"""The intervals of world.stats against published worked examples."""

from __future__ import annotations

import pytest

from world.stats import paired_difference, unpaired_difference, wilson


def test_wilson_interval() -> None:
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(56, 70) == pytest.approx((0.6918, 0.8770), abs=1e-4)
    assert wilson(0, 0) == (None, None)


def test_wilson_interval_holds_the_rate_at_its_ends() -> None:
    # At 0 of n and n of n rounding once put the limit a hair past the rate, and the report's
    # error bars (rate minus limit) failed as negative.
    for trials in range(1, 300):
        for successes in (0, trials):
            low, high = wilson(successes, trials)
            assert low is not None and high is not None
            assert low <= successes / trials <= high


def test_unpaired_difference_is_newcombes_method_10() -> None:
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 against 48/80.
    d = unpaired_difference(56, 70, 48, 80)
    assert (d.estimate, d.low, d.high) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)


def test_paired_difference_is_newcombes_method_10() -> None:
    # Complete response before and after consolidation therapy (Cavo et al., 2012), as worked
    # in Fagerland, Lydersen and Laake, Statistical Analysis of Contingency Tables, ch. 8:
    # 59 pairs both, 6 only the first, 16 only the second, 80 neither: -0.0621 [-0.1186, -0.0046].
    pairs = [(True, True)] * 59 + [(True, False)] * 6 + [(False, True)] * 16
    d = paired_difference(pairs + [(False, False)] * 80)
    assert (d.estimate, d.low, d.high) == pytest.approx((-0.0621, -0.1186, -0.0046), abs=1e-4)


def test_pairs_that_agree_narrow_the_interval() -> None:
    # The same margins (12/20 against 8/20), paired so that the outcomes go together or not.
    together = [(True, True)] * 8 + [(True, False)] * 4 + [(False, False)] * 8
    apart = [(True, False)] * 12 + [(False, True)] * 8
    unpaired = unpaired_difference(12, 20, 8, 20)
    assert paired_difference(together).width < unpaired.width < paired_difference(apart).width
    assert paired_difference(together).estimate == pytest.approx(unpaired.estimate)
