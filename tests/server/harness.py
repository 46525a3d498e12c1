"""The server-test harness: the app served in-process (``AppServer``, an ASGI transport over a
real database) or a real ``bigworld serve`` in a subprocess (``ServerProcess``, for what needs
one: uvicorn itself, kill -9, several processes, clients in other programs), a small HTTP helper
and a snapshot of the database's state (hash and row counts)."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx
from pydantic import SecretStr
from sqlalchemy import Engine, event, func, select
from starlette import testclient

# The server's and the forge's tables are on world.store's Base once their modules are loaded:
# the row counts below are over every table of the schema.
import forge.models  # noqa: F401
import server.models  # noqa: F401
from server.app import create_app, prepare_database
from server.runtime import Runtime
from server.settings import Settings
from world.state import World
from world.store import SqlBackend, driver, make_engine, session_factory
from world.store.models import Base

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # tests/ is not a package
from live import LiveServer, bearer, free_port  # noqa: E402

# Public, so only for tests; strong enough for the server's 128-bit floor (auth.token_bits).
ADMIN_TOKEN = "bw_test_RamoG_EU7dWcbVM_RP196RRkQpTpVULc8beB39Z7WnY"
# The forge's background cycle (storms, drift) would change the world under tests that compare
# states; a test that wants it passes BIGWORLD_FORGE_INTERVAL_S itself.
QUIET = {"BIGWORLD_FORGE_INTERVAL_S": "3600"}


class Server(Protocol):
    """What a test needs of a running server, in-process or not."""

    database_url: str
    data_dir: Path
    admin_token: str | None

    def client(self, token: str | None = None) -> httpx.Client: ...


class ServerProcess(LiveServer):
    """``bigworld serve`` in a subprocess (``live.LiveServer``) with the server tests' defaults:
    the public test admin token, forge cycles quiet, warnings only in the log."""

    def __init__(
        self,
        database_url: str,
        data_dir: Path,
        port: int | None = None,
        *,
        admin_token: str | None = ADMIN_TOKEN,
        log_level: str = "warning",
        **env: str,
    ) -> None:
        quiet = {**QUIET, "BIGWORLD_LOG_LEVEL": log_level}
        super().__init__(data_dir, admin_token, port or free_port(), database_url, {**quiet, **env})


class AppServer:
    """The app of ``bigworld serve`` in this process, its lifespan (migrations, background
    work) run as uvicorn would run it, requests passed to it over an ASGI transport: a server
    test without a process to start. Takes the same arguments as :class:`ServerProcess`, the
    ``BIGWORLD_*`` variables given as keywords (the test process's own are ignored)."""

    def __init__(
        self,
        database_url: str,
        data_dir: Path,
        *,
        admin_token: str | None = ADMIN_TOKEN,
        **env: str,
    ) -> None:
        self.admin_token = admin_token
        self.database_url = database_url
        self.data_dir = data_dir
        self.env = env
        self._client: testclient.TestClient | None = None

    def settings(self) -> Settings:
        token = {"BIGWORLD_ADMIN_TOKEN": self.admin_token} if self.admin_token is not None else {}
        env = {**QUIET, **token, **self.env}
        with _environment(env):
            return Settings(data_dir=self.data_dir, database_url=self.database_url)

    def start(self) -> AppServer:
        app = create_app(self.settings())
        self._client = testclient.TestClient(app, raise_server_exceptions=False)
        self._client.__enter__()
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.__exit__(None, None, None)
            self._client = None

    def restart(self) -> AppServer:
        self.stop()
        return self.start()

    def client(self, token: str | None = None) -> httpx.Client:
        assert self._client is not None, "start() the server first"
        # Starlette's test transport speaks the httpx it imported (httpx2 where installed).
        return testclient.httpx.Client(
            transport=self._client._transport,
            base_url=self._client.base_url,
            headers=bearer(token),
            timeout=60.0,
        )


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``env`` as its only ``BIGWORLD_*`` variables, for the span."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("BIGWORLD_")]:
        del os.environ[key]
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class Api:
    """A bare httpx client of a server with a token (tests look at raw statuses and bodies)."""

    def __init__(self, server: Server, token: str | None = None) -> None:
        self.server = server
        self.http = server.client(token)

    def agent(self, name: str, role: str = "policy", max_open_episodes: int = 1) -> Api:
        asked = {"name": name, "role": role}
        if max_open_episodes != 1:
            asked["max_open_episodes"] = max_open_episodes
        reply = Api(self.server, ADMIN_TOKEN).http.post("/v1/agents", json=asked)
        assert reply.status_code == 201, reply.text
        body = reply.json()
        api = Api(self.server, body["token"])
        api.id = body["id"]  # type: ignore[attr-defined]
        return api

    def __getattr__(self, name: str) -> Any:
        return getattr(self.http, name)


def db_state(database_url: str) -> dict[str, Any]:
    """The world's state hash and the row count of every table, read straight from the DB."""
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            out: dict[str, Any] = {"hash": World(SqlBackend(session)).state_hash()}
            for table in Base.metadata.sorted_tables:
                out[table.name] = session.scalar(select(func.count()).select_from(table))
    finally:
        engine.dispose()
    return out


@contextmanager
def built_runtime(database_url: str, data_dir: Path, **settings: Any) -> Iterator[Runtime]:
    """A server's runtime over ``database_url`` with its database prepared, and no app: world
    transactions run straight through its writer. The forge is off unless ``settings`` say."""
    runtime = Runtime.build(
        Settings(
            data_dir=data_dir,
            database_url=database_url,
            admin_token=SecretStr(ADMIN_TOKEN),
            **{"forge_enabled": False, **settings},
        )
    )
    prepare_database(runtime)
    try:
        yield runtime
    finally:
        runtime.close()


def on_driver(monkeypatch: Any, record: Callable[[str, int], None]) -> None:
    """Call ``record(sql, rows returned)`` for every statement sent on the driver's cursor
    (``world.store.driver``, which SQLAlchemy's events do not see), its SQL on one line."""
    run, open_ = driver._run, driver._open

    def counted(conn: Any, compiled: Any, params: Any, *, many: bool) -> Any:
        rows = run(conn, compiled, params, many=many)
        record(" ".join(compiled.sql.split()), len(rows))
        return rows

    def opened(cursor: Any, names: Any) -> None:  # PostgreSQL's deferred savepoints
        open_(cursor, names)
        for name in names:
            record(f"SAVEPOINT {name}", 0)

    monkeypatch.setattr(driver, "_run", counted)
    monkeypatch.setattr(driver, "_open", opened)


class Statements:
    """Counts the statements the writer's thread sends while ``on``, by their SQL on one line,
    savepoints' names made one: those run through SQLAlchemy (by its event), those on the
    driver's cursor (:func:`on_driver`) and each COMMIT. The ``statements`` fixture
    (conftest.py) makes one and closes it."""

    def __init__(self, monkeypatch: Any) -> None:
        self.sent: Counter[str] = Counter()
        self.on = False
        on_driver(monkeypatch, lambda sql, _rows: self._count(sql))
        event.listen(Engine, "before_cursor_execute", self._listen)
        event.listen(Engine, "commit", self._commit)

    def _listen(self, _conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        self._count(sql)

    def _commit(self, _conn: Any) -> None:
        self._count("COMMIT")

    def _count(self, sql: str) -> None:
        if self.on and threading.current_thread().name == "bigworld-writer":
            self.sent[re.sub(r"sa_savepoint_\d+", "sa_savepoint", " ".join(sql.split()))] += 1

    def of(self, table: str) -> int:
        """Reads of ``table`` by its columns (``FROM regions WHERE``)."""
        return sum(n for sql, n in self.sent.items() if f"FROM {table} WHERE" in sql)

    def close(self) -> None:
        event.remove(Engine, "before_cursor_execute", self._listen)
        event.remove(Engine, "commit", self._commit)
