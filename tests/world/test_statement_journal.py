"""A step's savepoint journal stays in memory on SQLite: spilled to a temporary file (above
64 KiB by default), it was opened, written and deleted at every commit of a batch, about two
thirds of a batched fleet's writes (issue 38). It serves only rollback inside the transaction;
the WAL is what survives a crash."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import text

from world.store.database import make_engine


def _temporary_files() -> list[str]:
    """The unlinked SQLite temporary files this process holds open ("etilqs_" names)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since listed
            continue
        if "etilqs_" in target:
            out.append(target)
    return out


def test_a_savepoint_journal_past_its_spill_size_stays_in_memory(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'world.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE things (id INTEGER PRIMARY KEY, body TEXT)"))
        rows = [{"id": i, "body": "x" * 1000} for i in range(400)]
        connection.execute(text("INSERT INTO things VALUES (:id, :body)"), rows)
    with engine.begin() as connection:
        connection.exec_driver_sql("SAVEPOINT step")
        # rewrite every page inside the savepoint: ~400 KiB of journal, far past 64 KiB
        connection.execute(text("UPDATE things SET body = :body"), {"body": "y" * 1000})
        held = _temporary_files()
        connection.exec_driver_sql("RELEASE step")
    engine.dispose()
    assert held == []
