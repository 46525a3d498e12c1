"""Group commit: one thread per process runs every world transaction, and commits at once all
those that arrived while the last commit was in flight.

A world transaction is a function of ``(session, world_row)``, submitted with
:meth:`Writer.run`, which blocks until the transaction is durable (or has failed) and then
returns the function's value or raises its exception. The writer thread takes everything
queued, opens one database transaction holding the world lock (:func:`begin_locked`), runs
each function in a SAVEPOINT of its own with a session of its own, commits once, and only then
answers each caller. On SQLite with ``synchronous=FULL`` the batch shares one fsync instead of
queueing for one each; on PostgreSQL one WAL flush.

- A function keeps its work with ``session.commit()`` (which releases its savepoint; the
  batch's commit makes it durable) and drops it by raising or by returning without
  committing: only its own savepoint is rolled back, the rest of the batch commits.
- Functions run one after another in submission order, each seeing the world row as the
  previous one left it, so ticks, thing ids and event ids are handed out in commit order.
- Nobody is answered before the commit: when the commit (or the connection) fails, every
  transaction of the batch fails with that error and nothing of it was written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from world.store.backend import WorldRow, read_world
from world.store.database import begin_locked, session_factory
from world.store.errors import StoreError

T = TypeVar("T")
Work = Callable[[Session, WorldRow], T]  # a world transaction, run by the writer thread

MAX_BATCH = 64  # transactions per commit at most, bounding the wait of the first in a batch


@dataclass
class _Job:
    work: Work[Any]
    done: Future[Any] = field(default_factory=Future)


class Writer:
    """The write side of ``engine`` in this process. ``on_commit(n)`` is called after each
    durable commit of ``n`` transactions (for metrics). The thread starts with the first
    transaction; :meth:`close` ends it."""

    def __init__(
        self,
        engine: Engine,
        *,
        on_commit: Callable[[int], None] | None = None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def run(self, work: Work[T]) -> T:
        """Run ``work`` as one world transaction; returns its value once it is durable."""
        if threading.current_thread() is self._thread:
            raise StoreError("expected one world transaction at a time, got one inside another")
        job = _Job(work)
        with self._start:
            if self._closed:
                raise StoreError("expected an open writer, got one that was closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="bigworld-writer", daemon=True
                )
                self._thread.start()
            self._queue.put(job)
        return job.done.result()

    def pending(self) -> int:
        """Transactions submitted and not yet taken into a batch."""
        return self._queue.qsize()

    def close(self, timeout: float = 30.0) -> None:
        """Finish what was submitted, then stop the thread; later transactions are refused."""
        with self._start:
            self._closed = True
            self._queue.put(None)
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch and not self._queue.empty():
                job = self._queue.get()
                if job is None:
                    stop = True
                    break
                batch.append(job)
            self._commit(batch)
            if stop:
                return

    def _commit(self, batch: list[_Job]) -> None:
        try:
            outcomes = self._run(batch)
        except BaseException as exc:  # the batch failed as a whole: nothing of it was written
            for job in batch:
                job.done.set_exception(exc)
            return
        if self._on_commit is not None:
            self._on_commit(len(batch))
        for job, (value, error) in zip(batch, outcomes, strict=True):
            if error is None:
                job.done.set_result(value)
            else:
                job.done.set_exception(error)

    def _run(self, batch: list[_Job]) -> list[tuple[Any, BaseException | None]]:
        """Run the batch in one transaction and commit it; returns each job's outcome."""
        with self._engine.connect() as conn:
            try:
                begin_locked(conn)
                outcomes = [self._apply(conn, job.work) for job in batch]
                conn.commit()
            except BaseException:
                # Whatever state the failure left the connection in (a transaction still open
                # after a failed COMMIT holds SQLite's write lock), it is closed, not pooled:
                # the database then rolls the batch back.
                conn.invalidate()
                raise
        return outcomes

    def _apply(self, conn: Connection, work: Work[Any]) -> tuple[Any, BaseException | None]:
        """Run one transaction in a savepoint. A failure of its own rolls back to the savepoint
        and is returned; a failure to roll back (the connection is gone) fails the batch."""
        with self._sessions(bind=conn, join_transaction_mode="create_savepoint") as session:
            try:
                return work(session, read_world(session)), None
            except Exception as exc:
                session.rollback()
                return None, exc
