"""The intervals of world.stats against published worked examples."""

from __future__ import annotations

import pytest

from world.stats import (
    paired_difference,
    standardised_difference,
    unpaired_difference,
    wilson,
)


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


def test_a_standardised_difference_of_one_stratum_is_the_unpaired_one() -> None:
    one = standardised_difference({1: (56, 70)}, {1: (48, 80)})
    plain = unpaired_difference(56, 70, 48, 80)
    assert (one.estimate, one.low, one.high) == pytest.approx(
        (plain.estimate, plain.low, plain.high)
    )


def test_standardising_removes_what_a_different_mix_of_strata_makes() -> None:
    # The same rate in each stratum (0.4 of easy tasks, 0.02 of hard ones), but side a drew
    # mostly easy tasks and side b mostly hard ones: plainly a looks far better, standardised
    # to the pooled mix it does not.
    a = {"easy": (120, 300), "hard": (2, 100)}
    b = {"easy": (40, 100), "hard": (6, 300)}
    plain = unpaired_difference(122, 400, 46, 400)
    assert plain.low > 0.1
    d = standardised_difference(a, b)
    assert d.estimate == pytest.approx(0.0, abs=1e-12)
    assert d.low < 0 < d.high
    # a stratum only one side met is left out; none shared is an error
    assert standardised_difference({**a, "far": (0, 50)}, b) == d
    with pytest.raises(ValueError, match="expected a stratum"):
        standardised_difference({"easy": (1, 2)}, {"hard": (1, 2)})
