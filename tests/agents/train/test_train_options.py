"""``bigworld train``'s flags are :class:`TrainConfig`'s fields: one flag each, with the field's
own help and choices, and flags left out give the config's defaults."""

from __future__ import annotations

import argparse
from dataclasses import Field, fields
from typing import Any

import pytest

from agents.train.cli import add_config_options, config_from
from agents.train.config import TrainConfig


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser()
    add_config_options(built)
    return built


def test_no_flags_give_the_config_s_defaults() -> None:
    assert config_from(parser().parse_args([])) == TrainConfig()


@pytest.mark.parametrize("field", fields(TrainConfig), ids=lambda f: f.name)
def test_each_field_is_a_flag_with_its_own_help_and_choices(field: Field[Any]) -> None:
    (action,) = [a for a in parser()._actions if a.dest == field.name]
    assert action.option_strings[0] == "--" + field.name.replace("_", "-")
    assert field.metadata["help"], f"TrainConfig.{field.name} says nothing about itself"
    assert action.help is not None and action.help.startswith(field.metadata["help"])
    assert tuple(action.choices or ()) == field.metadata["choices"]


def test_a_flag_sets_its_field_and_a_bad_choice_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parser().parse_args(
        ["--kl-beta", "0.02", "--no-include-abandoned", "--mode", "outcome_only"]
    )
    config = config_from(args)
    assert (config.kl_beta, config.include_abandoned, config.mode) == (0.02, False, "outcome_only")
    with pytest.raises(SystemExit):
        parser().parse_args(["--group-by", "colour"])
    assert "invalid choice: 'colour'" in capsys.readouterr().err
