"""The database schema's history (Alembic) and the functions that bring a database to head.

``upgrade_to_head`` is what ``bigworld db upgrade`` and the server at start call. On
PostgreSQL it holds an advisory lock while it runs, so several server processes starting at
once over one database migrate it exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

HERE = Path(__file__).parent
_ADVISORY_LOCK = 0x6269_6777  # "bigw": any constant shared by every bigworld process
_STARTUP_LOCK = _ADVISORY_LOCK + 1


def alembic_config(url: str | None = None) -> Config:
    config = Config(str(HERE / "alembic.ini"))
    config.set_main_option("script_location", str(HERE))
    config.set_main_option("version_locations", str(HERE / "versions"))
    if url is not None:
        config.attributes["url"] = url
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "migrations/versions holds no revision"
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def at_head(engine: Engine) -> bool:
    with engine.connect() as connection:
        return current_revision(connection) == head_revision()


@contextmanager
def startup_lock(engine: Engine) -> Iterator[None]:
    """Serialise start-up work (migrate, create the world, bootstrap the admin) across server
    processes over one PostgreSQL database; a no-op elsewhere (SQLite has one host)."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _STARTUP_LOCK})
        connection.commit()
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _STARTUP_LOCK})
            connection.commit()


def upgrade_to_head(engine: Engine) -> str:
    """Apply every pending migration to ``engine``'s database; returns the head revision."""
    config = alembic_config()
    with engine.connect() as connection:
        postgres = connection.dialect.name == "postgresql"
        if postgres:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_LOCK})
            connection.commit()
        try:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            connection.commit()
        finally:
            if postgres:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _ADVISORY_LOCK})
                connection.commit()
    return head_revision()
