"""The settings' one declaration (``server.settings``) makes the ``bigworld serve`` flags and
the README's configuration table: each flag gives the value its environment variables give, a
flag wins over the environment, which wins over the default, each flag's help is its setting's
description, variable and default, and the README holds the table the declaration makes."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from server.cli import _settings, build_parser
from server.readme import README
from server.settings import (
    Settings,
    configuration_table,
    current_table,
    default_text,
    flagged,
    flags,
    main,
    variables,
)

# A setting's type -> two texts of a value that is not its default: the flag's, the environment's.
SAMPLES: dict[object, tuple[str, str]] = {
    str: ("example", "other"),
    int: ("7", "8"),
    float: ("2.5", "3.5"),
    Path: ("/srv/bigworld", "/srv/other"),
}


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("BIGWORLD_"):
            monkeypatch.delenv(name)


def serve(*args: str) -> Settings:
    return _settings(build_parser().parse_args(["serve", *args]))


def case(name: str) -> tuple[list[str], str, str]:
    """(flag arguments, the environment's text of the same value, another value's text) for
    setting ``name``; the flag's value is not the default."""
    field = Settings.model_fields[name]
    option, *negative = flags(name)
    if field.annotation is bool:
        if negative:
            return negative, "false", "true"
        return [option], "true", "false"
    given, other = next(
        texts for kind, texts in SAMPLES.items() if field.annotation in (kind, kind | None)
    )
    return [option, given], given, other


@pytest.mark.parametrize("name", flagged())
def test_a_flag_gives_the_value_its_environment_variables_give(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, text, _ = case(name)
    from_flag = getattr(serve(*args), name)
    assert from_flag != Settings.model_fields[name].default, (name, args)
    for variable in variables(name):
        monkeypatch.setenv(variable, text)
        assert getattr(serve(), name) == from_flag, (variable, text)
        monkeypatch.delenv(variable)


@pytest.mark.parametrize("name", flagged())
def test_a_flag_wins_over_the_environment_which_wins_over_the_default(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert getattr(serve(), name) == Settings.model_fields[name].default
    args, _, other = case(name)
    from_flag = getattr(serve(*args), name)
    monkeypatch.setenv(variables(name)[0], other)
    from_environment = getattr(serve(), name)
    assert from_environment != from_flag, other
    assert getattr(serve(*args), name) == from_flag, (name, args)


def test_every_flagged_setting_is_a_serve_flag_whose_help_says_its_variable_and_default() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    actions = {a.dest: a for a in commands.choices["serve"]._actions}
    for name in flagged():
        action = actions[name]
        assert action.option_strings == flags(name), name
        assert action.help is not None
        plain = str(Settings.model_fields[name].description).replace("`", "")
        default = default_text(name).replace("`", "")
        assert action.help.startswith(plain), name
        assert action.help.endswith(f" (env {variables(name)[0]}; default {default})"), name
    assert actions["admin_token_flag"].help == argparse.SUPPRESS  # refused, never documented
    assert "admin_token" not in flagged()


def test_the_readme_configuration_table_is_the_one_the_settings_make() -> None:
    assert current_table(README.read_text()) == configuration_table(), (
        "README.md's configuration table differs from server/settings.py; "
        "run .venv/bin/python -m server.settings"
    )


def test_the_check_fails_on_a_stale_table_and_the_rewrite_mends_it(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    text = README.read_text()
    stale.write_text(text.replace("`8000`: the port to listen on", "`8080`: the port"))
    assert stale.read_text() != text
    assert main(["--check", "--readme", str(stale)]) == 1
    assert main(["--readme", str(stale)]) == 0
    assert main(["--check", "--readme", str(stale)]) == 0
    assert stale.read_text() == text


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_only_bigworld_variables_set_a_setting(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable without the prefix (``HEARTBEAT_S``, ``PORT``) is some other program's."""
    _, given, _ = case(name) if name in flagged() else ([], "7", "")
    monkeypatch.setenv(name.upper(), given)
    assert getattr(Settings(), name) == Settings.model_fields[name].get_default(
        call_default_factory=True
    )
