"""The forge's configuration: defaults, validated partial updates, stored JSON."""

from __future__ import annotations

import pytest

from forge.config import ForgeConfig
from forge.errors import ConfigError


def test_partial_update_changes_only_what_it_names() -> None:
    base = ForgeConfig()
    new = base.updated({"alpha_low": 0.3, "trial_size": 4, "dynamics": {"storm_probability": 0.5}})
    assert (new.alpha_low, new.trial_size, new.dynamics.storm_probability) == (0.3, 4, 0.5)
    assert new.alpha_high == base.alpha_high
    assert new.dynamics.flood_probability == base.dynamics.flood_probability
    assert ForgeConfig.from_json(new.to_json()) == new


@pytest.mark.parametrize(
    "patch",
    [
        {"alpha_low": 0.9},  # above alpha_high
        {"alpha_high": 1.5},
        {"alpha_low": "0.1"},
        {"trial_size": 0},
        {"window": True},  # a bool is not an int
        {"fresh_probability": -0.1},
        {"rewriter": "oracle"},
        {"lm_url": "file:///etc/passwd"},
        {"no_such_field": 1},
        {"window": 10**30},  # would overflow SQL
        {"weight_settled": float("nan")},
        {"lm_timeout_s": float("inf")},
        {"lm_url": "http://"},
        {"dynamics": {"storm_probability": 2}},
        {"dynamics": {"no_such_field": 1}},
        {"dynamics": 3},
        [1, 2],
    ],
)
def test_bad_updates_raise_and_name_the_problem(patch: object) -> None:
    base = ForgeConfig()
    with pytest.raises(ConfigError) as info:
        base.updated(patch)
    assert info.value.problems and str(info.value)
    assert base == ForgeConfig()  # frozen: nothing changed


def test_stored_json_from_another_release_loads() -> None:
    stored = {**ForgeConfig().to_json(), "retired_field": 1, "alpha_high": 0.7}
    del stored["window"]
    loaded = ForgeConfig.from_json(stored)
    assert loaded.alpha_high == 0.7 and loaded.window == ForgeConfig().window
