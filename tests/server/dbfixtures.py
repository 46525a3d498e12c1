"""Fresh databases for server tests: a SQLite file in a temp dir, or a new PostgreSQL database.

PostgreSQL is the machine's server on 127.0.0.1:5432 (trust auth, user ``postgres``). When it
cannot be reached the PostgreSQL variants skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

PG_ADMIN_URL = os.environ.get(
    "BIGWORLD_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def postgres_reachable() -> bool:
    try:
        engine = create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return True
    except Exception:
        return False


def require_postgres() -> None:
    if postgres_reachable():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but PostgreSQL at {PG_ADMIN_URL} is unreachable")
    pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} is unreachable")


@contextmanager
def fresh_database(kind: str, tmp: Path) -> Iterator[str]:
    """Yield the URL of an empty database of ``kind`` ("sqlite" or "postgres")."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'world.db'}"
        return
    require_postgres()
    name = f"bigworld_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
