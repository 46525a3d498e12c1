"""Fixtures for server tests: a real uvicorn server in a subprocess over a real database.

``server`` is parametrised over SQLite (a file in a temp data dir) and PostgreSQL (a freshly
created database, dropped afterwards; skipped when unreachable unless ``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from harness import ADMIN_TOKEN, Api, ServerProcess


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(database_url, tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def admin(server: ServerProcess) -> Api:
    return Api(server.url, ADMIN_TOKEN)
