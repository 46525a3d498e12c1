"""Fixtures for server tests over a real database.

``database_url`` is parametrised over SQLite (a file in a temp data dir) and PostgreSQL (a
freshly created database, dropped afterwards; skipped when unreachable unless ``CI=true``).
``server`` serves the app in this process over an ASGI transport (``harness.AppServer``);
``process`` runs ``bigworld serve`` under uvicorn in a subprocess, for the tests that need a
real one (kill -9, other programs as clients, several processes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from harness import ADMIN_TOKEN, Api, AppServer, ServerProcess, Statements, built_runtime

from server.runtime import Runtime


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[AppServer]:
    app = AppServer(database_url, tmp_path / "data").start()
    try:
        yield app
    finally:
        app.stop()


@pytest.fixture
def process(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(database_url, tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def admin(server: AppServer) -> Api:
    return Api(server, ADMIN_TOKEN)


@pytest.fixture
def runtime(database_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """The server's runtime without its HTTP app, for tests that drive the writer directly."""
    with built_runtime(database_url, tmp_path / "data") as runtime:
        yield runtime


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Statements]:
    """What the writer's thread sends while ``statements.on`` (``harness.Statements``)."""
    counter = Statements(monkeypatch)
    try:
        yield counter
    finally:
        counter.close()
