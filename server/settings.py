"""The server's one settings class, and the one place each setting is documented: every field is
an environment variable ``BIGWORLD_<FIELD>`` (or the aliases its ``validation_alias`` names),
and a field whose ``json_schema_extra`` names a ``flag`` is also that ``bigworld serve`` flag.

Each field's ``description`` says what it means, in markdown; ``bigworld serve --help``
(``server.cli``) and the README's configuration table (:func:`configuration_table`) are made
from these declarations, defaults included. A setting whose default is None says what that
means in ``json_schema_extra["when_unset"]``. The README's table is rewritten with::

    .venv/bin/python -m server.settings            # rewrite the table in README.md
    .venv/bin/python -m server.settings --check    # exit 1 when README.md's table differs

docs/design.md §6 explains the limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from server.readme import rewrite
from server.readme import section as readme_section
from world.contract import DEFAULT_DATA_DIR, DEFAULT_HOST, DEFAULT_PORT


class Settings(BaseSettings):
    """Configuration of one server process. Times are wall-clock seconds; the world's own
    clock is the tick, which the server never derives from wall time."""

    model_config = SettingsConfigDict(env_prefix="BIGWORLD_", extra="ignore", populate_by_name=True)

    host: str = Field(
        DEFAULT_HOST, description="the address to bind", json_schema_extra={"flag": "--host"}
    )
    port: int = Field(
        DEFAULT_PORT,
        ge=0,
        le=65535,
        description="the port to listen on",
        json_schema_extra={"flag": "--port"},
    )
    data_dir: Path = Field(
        Path(DEFAULT_DATA_DIR),
        description="the data folder (created 0700), holding the SQLite file, the generated admin "
        "token and the report",
        json_schema_extra={"flag": "--data-dir"},
    )
    database_url: str | None = Field(
        None,
        description="the database's SQLAlchemy URL; `postgresql+psycopg://…` for PostgreSQL",
        json_schema_extra={
            "flag": "--database-url",
            "when_unset": "a SQLite file `world.db` (WAL) in the data folder",
        },
    )
    seed: int = Field(
        0,
        description="the world's seed, used only when the database holds no world yet",
        json_schema_extra={"flag": "--seed"},
    )
    admin_token: SecretStr | None = Field(
        None,
        description="the admin token, at least 128 bits; never a flag, as a command line is "
        "visible in `ps`; a new one at start rotates the admin's token (the old one stops working "
        "within `BIGWORLD_AUTH_CACHE_S`)",
        json_schema_extra={"when_unset": "none"},
    )
    admin_token_file: Path | None = Field(
        None,
        description="a file whose first line is the admin token, instead of "
        "`BIGWORLD_ADMIN_TOKEN`; neither given, one is generated once into "
        "`<data dir>/admin_token`",
        json_schema_extra={"flag": "--admin-token-file", "when_unset": "none"},
    )
    auth_cache_s: float = Field(
        2.0,
        ge=0,
        le=10,
        description="seconds (at most 10) a process trusts a token it has checked, so a revoked "
        "or rotated token stops working on every process within this bound; `0` checks the "
        "database on every request",
    )
    auth_failures_per_min: int = Field(
        30,
        ge=0,
        description="failed authentications (a token given but not valid) per client address "
        "and minute before that address gets 429 on every authenticated request, until the "
        "oldest is a minute old; `0` = no limit",
    )
    votes_per_step: int = Field(
        3,
        ge=1,
        le=64,
        description="m, the judgments a step takes (vote slots 0..m−1), so one reward agent "
        "fills at most m",
    )
    step_budget: int = Field(
        50,
        ge=1,
        le=100_000,
        description="steps per episode before outcome −1",
        json_schema_extra={"flag": "--step-budget"},
    )
    episode_idle_timeout_s: float = Field(
        900.0,
        gt=0,
        description="seconds an open episode may stay idle before it is abandoned",
        json_schema_extra={"flag": "--episode-idle-timeout-s"},
    )
    # The flag is --heartbeat, so BIGWORLD_HEARTBEAT is its variable too.
    heartbeat_s: float = Field(
        0.0,
        ge=0,
        validation_alias=AliasChoices("bigworld_heartbeat", "bigworld_heartbeat_s"),
        description="seconds per heartbeat tick; `0` turns it off",
        json_schema_extra={"flag": "--heartbeat"},
    )
    # The flag is --rate-limit, so BIGWORLD_RATE_LIMIT is its variable too.
    rate_limit_per_s: float = Field(
        5000.0,
        gt=0,
        validation_alias=AliasChoices("bigworld_rate_limit", "bigworld_rate_limit_per_s"),
        description="requests per second per token, sustained",
        json_schema_extra={"flag": "--rate-limit"},
    )
    rate_limit_burst: int | None = Field(
        None,
        ge=1,
        description="requests a token may send at once",
        json_schema_extra={
            "flag": "--rate-burst",
            "when_unset": "one second's worth of the rate, at least 1",
        },
    )
    max_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="bytes a request body may have; a larger one gets 413 while it streams in",
    )
    record_distance: bool = Field(
        False,
        description="store the oracle's plan length with every step, for heuristic judges and "
        "analysis; costs a plan per step",
        json_schema_extra={"flag": "--record-distance"},
    )
    forge_enabled: bool = Field(
        True,
        description="the forge's cycles (adaptation and world dynamics, design §8); episode "
        "begins draw from the task pool either way, so tasks repeat across episodes",
        json_schema_extra={"flag": "--forge-enabled"},
    )
    forge_interval_s: float = Field(
        15.0,
        gt=0,
        description="seconds between automatic forge cycles",
        json_schema_extra={"flag": "--forge-interval-s"},
    )
    go_to_hops: int = Field(
        1,
        ge=1,
        le=100,
        description="a begin asking for `go_to`, `follow`, `trail` or `waymark` that samples a "
        "fresh task draws its hops uniformly in 1..N",
        json_schema_extra={"flag": "--go-to-hops"},
    )
    openenv_max_sessions: int = Field(
        64,
        ge=1,
        le=4096,
        description="OpenEnv sessions (WebSockets at `/openenv/ws`) served at once; one more is "
        "refused",
    )
    openenv_reset_timeout_s: float = Field(
        30.0,
        gt=0,
        description="seconds a new OpenEnv session has to begin an episode (`reset` with a valid "
        "token) before the server closes it (code 1008) and frees its slot; a session silent for "
        "`BIGWORLD_EPISODE_IDLE_TIMEOUT_S` after that is closed too (1001)",
    )
    sqlite_synchronous: Literal["FULL", "NORMAL", "EXTRA"] = Field(
        "FULL",
        description="SQLite's `synchronous` mode (`FULL`, `NORMAL` or `EXTRA`); `FULL` fsyncs "
        "every commit and survives a power cut, `NORMAL` survives a process kill only",
    )
    db_pool_size: int = Field(
        20,
        ge=1,
        description="database connections pooled per process (up to 10 more at peaks, closed "
        "after); on SQLite all of them are opened at start",
    )
    log_level: str = Field(
        "info", description="uvicorn's log level", json_schema_extra={"flag": "--log-level"}
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'world.db').resolve()}"

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url().startswith("sqlite")


def _extra(field: FieldInfo, key: str) -> str | None:
    """``json_schema_extra[key]`` of ``field``, where it is a string."""
    extra = field.json_schema_extra
    value = extra.get(key) if isinstance(extra, dict) else None
    return value if isinstance(value, str) else None


def flags(name: str) -> list[str]:
    """The ``bigworld serve`` flags of setting ``name``, none where it has no ``flag``: its
    flag, and for a switch that is on by default the ``--no-`` flag that turns it off."""
    field = Settings.model_fields[name]
    option = _extra(field, "flag")
    if option is None:
        return []
    if field.annotation is bool and field.default is True:
        return [option, f"--no-{option.removeprefix('--')}"]
    return [option]


def flagged() -> list[str]:
    """The settings that are also ``bigworld serve`` flags, in their declaration's order."""
    return [name for name in Settings.model_fields if flags(name)]


def variables(name: str) -> list[str]:
    """The environment variables of setting ``name``: ``BIGWORLD_<NAME>``, or the aliases its
    ``validation_alias`` gives (the first is the one its flag is named after)."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(a).upper() for a in alias.choices if str(a).startswith("bigworld_")]
    return [f"BIGWORLD_{name.upper()}"]


def default_text(name: str) -> str:
    """Setting ``name``'s default in markdown: a value in backticks, ``on``/``off`` for a
    switch, or what leaving it unset means (``when_unset``) where the default is None."""
    field = Settings.model_fields[name]
    default = field.default
    if default is None:
        unset = _extra(field, "when_unset")
        if unset is None:
            raise ValueError(f"expected json_schema_extra['when_unset'] on {name}, got none")
        return unset
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, float) and default.is_integer():
        return f"`{int(default)}`"
    if isinstance(default, Path) and not default.is_absolute():
        return f"`./{default}`"  # Path drops the ./ that says "in the working folder"
    return f"`{default}`"


def configuration_table() -> str:
    """The README's configuration table: one row per setting, in declaration order."""
    lines = ["| variable | flag | default and meaning |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        first, *aliases = (f"`{variable}`" for variable in variables(name))
        variable = f"{first} (or {', '.join(aliases)})" if aliases else first
        options = ", ".join(f"`{option}`" for option in flags(name)) or "none"
        lines.append(f"| {variable} | {options} | {default_text(name)}: {field.description} |")
    return "\n".join(lines)


def current_table(readme: str) -> str:
    """The README's configuration table as it stands."""
    return readme_section(readme, "settings")


def main(argv: list[str] | None = None) -> int:
    return rewrite(
        argv,
        name="settings",
        table=configuration_table(),
        what="configuration table",
        source="server/settings.py",
        command=".venv/bin/python -m server.settings",
    )


if __name__ == "__main__":
    raise SystemExit(main())
