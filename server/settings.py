"""The server's one settings class: every field is an environment variable
``BIGWORLD_<FIELD>``, most are also ``bigworld serve`` flags (README.md, "Configuration", lists
them all; docs/design.md §6 the limits)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of one server process. Times are wall-clock seconds; the world's own
    clock is the tick, which the server never derives from wall time."""

    model_config = SettingsConfigDict(env_prefix="BIGWORLD_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    data_dir: Path = Path("./bigworld-data")
    database_url: str | None = None  # default: SQLite file world.db inside data_dir (WAL)
    seed: int = 0  # used only when the database holds no world yet
    # The admin token, from the environment (never a flag: a command line is visible in ps) or
    # a file holding it; at least 128 bits (auth.token_bits). Neither: generated once into
    # data_dir/admin_token. A new one at start rotates it (the old stops within auth_cache_s).
    admin_token: SecretStr | None = None
    admin_token_file: Path | None = None
    # seconds a process trusts a token it has checked before asking the database again: the
    # bound on how long a revoked or rotated token keeps working on any process; 0 = every request
    auth_cache_s: float = Field(2.0, ge=0, le=10)
    # failed authentications (a token given but not valid) per client address and minute; at
    # that many, the address gets 429 on every authenticated request until the oldest is a
    # minute old; 0 = no limit
    auth_failures_per_min: int = Field(30, ge=0)
    # m: judgments a step takes (vote slots 0..m-1), so one reward agent fills at most m
    votes_per_step: int = Field(3, ge=1, le=64)
    step_budget: int = Field(50, ge=1, le=100_000)  # steps per episode before outcome -1
    episode_idle_timeout_s: float = Field(900.0, gt=0)  # open episodes idle longer are abandoned
    # seconds per heartbeat tick; 0 turns it off (flag --heartbeat, so env BIGWORLD_HEARTBEAT)
    heartbeat_s: float = Field(
        0.0,
        ge=0,
        validation_alias=AliasChoices("heartbeat_s", "bigworld_heartbeat", "bigworld_heartbeat_s"),
    )
    # sustained requests per second per token (flag --rate-limit, env BIGWORLD_RATE_LIMIT)
    rate_limit_per_s: float = Field(
        5000.0,
        gt=0,
        validation_alias=AliasChoices(
            "rate_limit_per_s", "bigworld_rate_limit", "bigworld_rate_limit_per_s"
        ),
    )
    # requests a token may send at once (flag --rate-burst); default: one second's worth of
    # rate_limit_per_s, at least 1
    rate_limit_burst: int | None = Field(None, ge=1)
    max_body_bytes: int = Field(64 * 1024, ge=1024)
    # store the oracle's plan length with each step (a plan per step: off by default)
    record_distance: bool = False
    # the forge (design §8): False runs no cycles (no adaptation, no dynamics), but episode
    # begins still draw from the task pool, so tasks repeat across episodes either way
    forge_enabled: bool = True
    forge_interval_s: float = Field(15.0, gt=0)  # seconds between automatic forge cycles
    # a begin asking for go_to that samples a fresh one takes hops uniformly in 1..go_to_hops
    go_to_hops: int = Field(1, ge=1, le=100)
    # OpenEnv sessions (WebSocket connections to /openenv/ws) served at once; one more is refused
    openenv_max_sessions: int = Field(64, ge=1, le=4096)
    # seconds a new OpenEnv session has to begin an episode (a reset with a valid token) before
    # its socket is closed and its slot freed; once begun, a session silent for
    # episode_idle_timeout_s is closed the same way
    openenv_reset_timeout_s: float = Field(30.0, gt=0)
    sqlite_synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL"
    db_pool_size: int = Field(20, ge=1)
    log_level: str = "info"

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'world.db').resolve()}"

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url().startswith("sqlite")
