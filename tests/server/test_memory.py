"""A bigworld process keeps its heap from creeping: the trim hands back what a thread freed
(glibc keeps it), and SQLite's connections share one bounded heap."""

from __future__ import annotations

import threading

import pytest

from server.memory import malloc_trim


def _resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def test_trimming_returns_what_a_thread_freed() -> None:
    trim = malloc_trim()
    if trim is None:
        pytest.skip("this C library has no malloc_trim")
    kept: list[bytes] = []

    def request_like() -> None:  # 100 MiB in blocks past pymalloc's 512 bytes, 1 in 200 kept
        blocks = [bytes(1024) + bytes([i % 256]) for i in range(100_000)]
        kept.extend(blocks[::200])

    worker = threading.Thread(target=request_like)
    # Start from a trimmed heap: what earlier tests in this process freed but left resident
    # would otherwise serve the worker's blocks, and the rise measured would be theirs.
    trim()
    before = _resident_mib()
    worker.start()
    worker.join()
    freed = _resident_mib()
    assert freed - before > 50, "the freed blocks stay resident until trimmed"
    trim()
    assert _resident_mib() - before < (freed - before) / 2
    assert len(kept) == 500


def test_sqlite_connections_share_one_bounded_heap(tmp_path) -> None:
    """Ten pooled connections that each read a 24 MiB table keep at most about the limit
    between them (each alone would cache 2 MiB of pages: 20 MiB in all)."""
    import _sqlite3
    import ctypes

    from sqlalchemy import text

    from world.store import make_engine
    from world.store.database import SQLITE_HEAP_LIMIT

    used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    engine = make_engine(f"sqlite:///{tmp_path / 'big.db'}", pool_size=10)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)"))
        conn.execute(
            text(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 24576)"
                " INSERT INTO t SELECT i, randomblob(1000) FROM n"
            )
        )
    held = [engine.connect() for _ in range(10)]
    for conn in held:
        assert conn.execute(text("SELECT count(*), sum(length(body)) FROM t")).one()[0] == 24576
    assert used() < SQLITE_HEAP_LIMIT * 1.5
    for conn in held:
        conn.close()
    engine.dispose()


def test_a_server_opens_its_whole_sqlite_pool_at_start(tmp_path) -> None:
    """Its descriptors do not grow with the largest burst of requests it has met since: every
    pooled connection is open once it is ready (a burst beyond them opens overflow connections,
    closed again after)."""
    from fastapi.testclient import TestClient
    from harness import ADMIN_TOKEN
    from pydantic import SecretStr

    from server.app import create_app
    from server.settings import Settings

    settings = Settings(
        data_dir=tmp_path / "data",
        admin_token=SecretStr(ADMIN_TOKEN),
        forge_enabled=False,
        db_pool_size=6,
    )
    app = create_app(settings)
    with TestClient(app):
        assert app.state.runtime.engine.pool.checkedin() == 6
