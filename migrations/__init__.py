"""The database schema's history (Alembic) and the functions that bring a database to head.

``upgrade_to_head`` is what ``bigworld db upgrade`` and the server at start call. On
PostgreSQL it holds an advisory lock while it runs, so several server processes starting at
once over one database migrate it exactly once. ``startup_lock`` serialises the whole start-up
(migrate, create the world, bootstrap the admin) across processes, on PostgreSQL and SQLite.
"""

from __future__ import annotations

import fcntl
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, event, text

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


@functools.cache
def head_revision() -> str:
    """The newest revision (read once a process: the revisions ship with the code)."""
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
    """Serialise start-up work (migrate, create the world, bootstrap the admin) across the
    processes that share ``engine``'s database; the others wait their turn.

    PostgreSQL: an advisory lock. A SQLite file: an exclusive ``flock`` on ``<file>.lock``
    beside it, released when the process ends however it ends. SQLite's busy timeout does not
    serialise start-ups by itself: a transaction that read before another process wrote cannot
    write any more and fails at once with "database is locked", which is how one of two
    servers started together on an empty folder used to die in the migrations. An in-memory
    SQLite database has one process, so nothing is locked."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _STARTUP_LOCK})
            connection.commit()
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _STARTUP_LOCK})
                connection.commit()
        return
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    fd = os.open(f"{database}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


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


def upgrade_forks(main: Engine) -> int:
    """Migrate to head the stores of ``main``'s forks (each a database of its own: a SQLite file
    beside the main world's, or a PostgreSQL schema) that an older schema made; returns how many
    were. The caller has migrated ``main``, and holds :func:`startup_lock`."""
    from sqlalchemy.orm import Session

    from world.store.worlds import list_forks, open_store

    forks, after = [], None
    with Session(main) as session:
        while page := list_forks(session, after=after):
            forks.extend(page)
            after = page[-1].name
    migrated = 0
    for fork in forks:
        engine = open_store(main, fork.location)
        try:
            if not at_head(engine):
                upgrade_to_head(engine)
                migrated += 1
        finally:
            engine.dispose()
    return migrated


def upgrade_recorded(engine: Engine) -> str | None:
    """:func:`upgrade_to_head` on ``engine``'s empty database, returning the statements that
    changed it as one script: run in another empty database (one round trip), it leaves the
    same schema at head without loading Alembic or asking the catalog. None where a migration
    wrote with parameters (its script could not stand alone); reads, which take parameters
    (the catalog's, the advisory lock), are left out."""
    ran: list[str] = []
    alone = True

    def record(
        _conn: object, _cursor: object, statement: str, parameters: object, *_rest: object
    ) -> None:
        nonlocal alone
        if not parameters:
            ran.append(statement)
        elif not statement.lstrip().upper().startswith("SELECT"):
            alone = False

    event.listen(engine, "before_cursor_execute", record)
    try:
        upgrade_to_head(engine)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return ";\n".join(ran) if alone else None
