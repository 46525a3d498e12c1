"""Group commit: one thread per process runs every world transaction, and commits at once all
those that arrived while the last commit was in flight.

A world transaction is a function of ``(session, world_row)``, submitted with
:meth:`Writer.run`, which blocks until the transaction is durable (or has failed) and then
returns the function's value or raises its exception. The writer thread takes everything
queued, opens one database transaction holding the world lock (:func:`begin_locked`), runs
each function in a SAVEPOINT of its own with a session of its own, commits once, and only then
answers each caller. On SQLite with ``synchronous=FULL`` the batch shares one fsync instead of
queueing for one each; on PostgreSQL one WAL flush.

- A function keeps its work with ``session.commit()`` (which releases its savepoint, or on
  PostgreSQL leaves it open for the next to open inside: ``driver.send_savepoints``; the
  batch's commit makes it durable) and drops it by raising or by returning without
  committing: only its own savepoint is rolled back, the rest of the batch commits.
- Functions run one after another in submission order, each seeing the world row as the
  previous one left it, so ticks, thing ids and event ids are handed out in commit order.
- Nobody is answered before the commit: when the commit (or the connection) fails, every
  transaction of the batch fails with that error and nothing of it was written.

On PostgreSQL a transaction submitted with a :class:`Scope` (a step: its avatar) locks its
avatar and the regions it can reach instead of the whole world (``world.store.regions``), so
batches of several processes over one database run side by side where their regions are
apart. The first transaction of a batch waits for its locks; a later one only tries, and one
that finds a lock taken is carried, first, into the next batch (waiting there while holding
earlier transactions' locks could close a circle with another process). The batch numbers its
log under one lock just before it commits, so the log's order is the order of commits.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import Session

from world.store import regions as pg
from world.store.backend import WorldRow, insert_log, read_world
from world.store.database import begin_locked, session_factory
from world.store.errors import StoreError
from world.store.known import SESSION_KNOWN, Batch, Regions

T = TypeVar("T")
Work = Callable[[Session, WorldRow], T]  # a world transaction, run by the writer thread

MAX_BATCH = 64  # transactions per commit at most, bounding the wait of the first in a batch


@dataclass
class _Job:
    work: Work[Any]
    scope: pg.Scope | None = None
    done: Future[Any] = field(default_factory=Future)


@dataclass
class _Ran:
    """What one batch did: each kept job's outcome, the jobs carried to the next batch, and
    the seconds its transactions spent waiting for locks (each counted once per job)."""

    outcomes: list[tuple[_Job, Any, BaseException | None]] = field(default_factory=list)
    carried: list[_Job] = field(default_factory=list)
    waited: float = 0.0
    work_s: float = 0.0  # running its transactions, from the batch's BEGIN to its COMMIT
    commit_s: float = 0.0  # the COMMIT itself (on SQLite FULL, writing and syncing the WAL)


class Writer:
    """The write side of ``engine`` in this process. ``on_commit(n, work_s, commit_s)`` is
    called after each durable commit of ``n`` transactions, with the seconds spent running
    them and committing (for metrics). The thread starts with the first transaction;
    :meth:`close` ends it."""

    def __init__(
        self,
        engine: Engine,
        *,
        on_commit: Callable[[int, float, float], None] | None = None,
        on_wait: Callable[[float, int], None] | None = None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)
        self._regions = engine.dialect.name == "postgresql"
        if self._regions:
            event.listen(self._sessions, "after_commit", _keep_log)
            event.listen(self._sessions, "after_soft_rollback", _drop_log)
        # The regions this writer's world committed, and what each batch knows of its regions,
        # places and world row (world.store.known): kept and dropped with each job's work.
        self._known = Regions()
        event.listen(self._sessions, "after_commit", _keep_known)
        event.listen(self._sessions, "after_soft_rollback", _drop_known)
        self._on_commit = on_commit
        self._on_wait = on_wait
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def run(self, work: Work[T], scope: pg.Scope | None = None) -> T:
        """Run ``work`` as one world transaction; returns its value once it is durable.
        ``scope``: on PostgreSQL, lock only what the scope's avatar can reach."""
        return self.submit(work, scope).result()

    def submit(self, work: Work[T], scope: pg.Scope | None = None) -> Future[T]:
        """:meth:`run` without the wait: the future is answered once the transaction is
        durable (or has failed). For a caller that must not block its thread (an event loop
        awaits it through ``asyncio.wrap_future``). Cancelled before the writer takes it into
        a batch, the transaction never runs; once taken, it can no longer be cancelled."""
        (done,) = self.submit_many([(work, scope)])
        return done

    def submit_many(self, works: Sequence[tuple[Work[Any], pg.Scope | None]]) -> list[Future[Any]]:
        """Several transactions at once, taken into one batch together (whatever the batch's
        usual size) and run in the order given: one commit for all of them, unless a job is
        carried (PostgreSQL, a region lock taken) or the batch fails. Each is its own
        transaction still: one that raises drops only its own work. A future per work, in
        order, as :meth:`submit` answers."""
        if threading.current_thread() is self._thread:
            raise StoreError("expected one world transaction at a time, got one inside another")
        jobs = [_Job(work, scope) for work, scope in works]
        with self._start:
            if self._closed:
                raise StoreError("expected an open writer, got one that was closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="bigworld-writer", daemon=True
                )
                self._thread.start()
            self._queue.put(jobs)
        return [job.done for job in jobs]

    def pending(self) -> int:
        """Submissions (a transaction, or a group of them) not yet taken into a batch."""
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
        carried: list[_Job] = []
        stop = False
        while not stop or carried:
            taken: list[_Job] = []
            if not carried:
                first = self._queue.get()
                if first is None:
                    return
                taken.extend(first)
            while (
                not stop and len(carried) + len(taken) < self._max_batch and not self._queue.empty()
            ):
                jobs = self._queue.get()
                if jobs is None:
                    stop = True
                    break
                taken.extend(jobs)  # a group submitted together stays together
            # A job cancelled while queued is dropped; the others can no longer be cancelled.
            batch = carried + [job for job in taken if job.done.set_running_or_notify_cancel()]
            carried = self._commit(batch) if batch else []

    def _commit(self, batch: list[_Job]) -> list[_Job]:
        """Run and commit ``batch``, answer its jobs; returns the jobs carried to the next."""
        try:
            ran = self._run(batch)
        except BaseException as exc:  # the batch failed as a whole: nothing of it was written
            for job in batch:
                job.done.set_exception(exc)
            return []
        if self._on_commit is not None and ran.outcomes:
            self._on_commit(len(ran.outcomes), ran.work_s, ran.commit_s)
        if self._on_wait is not None:
            self._on_wait(ran.waited, len(ran.carried))
        for job, value, error in ran.outcomes:
            if error is None:
                job.done.set_result(value)
            else:
                job.done.set_exception(error)
        return ran.carried

    def _run(self, batch: list[_Job]) -> _Ran:
        """Run the batch in one transaction and commit it."""
        ran = _Ran()
        known = self._known.batch(whole=not self._regions)  # SQLite: the batch holds it all
        with self._engine.connect() as conn:
            try:
                started = time.perf_counter()
                if not self._regions:
                    begin_locked(conn)
                    for job in batch:
                        value, error, _log, _wait = self._apply(conn, job.work, None, known)
                        ran.outcomes.append((job, value, error))
                else:
                    conn.begin()
                    self._run_regions(conn, batch, ran, known)
                worked = time.perf_counter()
                conn.commit()
                ran.work_s, ran.commit_s = worked - started, time.perf_counter() - worked
                known.committed()
            except BaseException:
                # Whatever state the failure left the connection in (a transaction still open
                # after a failed COMMIT holds SQLite's write lock), it is closed, not pooled:
                # the database then rolls the batch back.
                conn.invalidate()
                raise
        return ran

    def _run_regions(self, conn: Connection, batch: list[_Job], ran: _Ran, known: Batch) -> None:
        """PostgreSQL: each job takes its locks (waiting only while the batch holds none),
        runs in its savepoint, and the batch numbers and writes its log last. Once a job has
        taken the whole world's lock, the batch holds it until it commits: the jobs after it
        take none (each would be granted at once), and run as holding the world."""
        groups: list[list[Any]] = []
        for index, job in enumerate(batch):
            wait = index == 0  # the batch holds no lock yet
            if known.whole:
                locked, waited = None, 0.0
            else:
                try:
                    locked, waited = pg.lock(conn, job.scope, wait=wait)
                except (pg.Busy, pg.ScopeError) as exc:
                    ran.carried.append(_carried(job, exc))
                    continue
                known.hold(locked.regions if locked is not None else None)
            value, error, log, row_wait = self._apply(conn, job.work, (locked, not wait), known)
            ran.waited += (waited + row_wait) * len(batch)  # every job of the batch waited
            if isinstance(error, pg.Busy | pg.ScopeError):
                ran.carried.append(_carried(job, error))
            else:
                ran.outcomes.append((job, value, error))
                groups.extend(log)
        _send_clock(conn, known)
        if groups:
            ran.waited += pg.take_log_lock(conn) * len(ran.outcomes)
            txns, ids = pg.number_log(conn, [len(g) for g in groups])
            insert_log(conn, txns, ids, groups)

    def _apply(
        self,
        conn: Connection,
        work: Work[Any],
        regions: tuple[pg.Locked | None, bool] | None,
        known: Batch,
    ) -> tuple[Any, BaseException | None, list[list[Any]], float]:
        """Run one transaction in a savepoint; returns its value, its error and (PostgreSQL)
        the event groups it kept and the seconds it waited for the world row. A failure of its
        own rolls back to the savepoint and is returned; a failure to roll back (the
        connection is gone) fails the batch."""
        with self._sessions(bind=conn, join_transaction_mode="create_savepoint") as session:
            session.info[SESSION_KNOWN] = known.transaction()
            if regions is not None:
                locked, nowait = regions
                session.info.update(
                    {
                        pg.SESSION_SCOPE: locked,
                        pg.SESSION_CLOCK: True,
                        pg.SESSION_NOWAIT: nowait,
                        pg.SESSION_PENDING: [],
                        pg.SESSION_LOG: [],
                    }
                )
            row = known.world_row()
            if row is None:
                if regions is not None:
                    _send_clock(conn, known)  # "now" is read from the sequence
                    row = WorldRow.from_row(conn.execute(pg.JOB_READ).mappings().one())
                else:
                    row = read_world(session)
                known.read_row(row)
            try:
                value = work(session, row)
            except Exception as exc:
                session.rollback()
                return None, exc, [], session.info.get(pg.SESSION_WAITED, 0.0)
            waited = session.info.get(pg.SESSION_WAITED, 0.0)
            return value, None, session.info.get(pg.SESSION_LOG, []), waited


def _send_clock(conn: Connection, known: Batch) -> None:
    """PostgreSQL: move the clock's sequence past the ticks the batch drew itself
    (``world.store.known``), while it still holds the world's lock: before it commits, and
    before anything of it reads the sequence."""
    if known.unsent:
        conn.execute(pg.SET_CLOCK, {"tick": known.sequence})
        known.unsent = False


def _carried(job: _Job, refused: BaseException) -> _Job:
    """The job to run in the next batch: as it is after Busy (it runs first there, waiting for
    its locks), holding the whole world after ScopeError (it reached past its regions)."""
    return job if isinstance(refused, pg.Busy) else dataclasses.replace(job, scope=None)


def _keep_log(session: Session) -> None:
    """A job's ``session.commit()`` keeps the event groups it appended so far."""
    pending = session.info.get(pg.SESSION_PENDING)
    if pending:
        session.info[pg.SESSION_LOG].extend(pending)
        pending.clear()


def _drop_log(session: Session, _previous: Any) -> None:
    """A rollback drops the event groups appended since the last commit."""
    pending = session.info.get(pg.SESSION_PENDING)
    if pending:
        pending.clear()


def _keep_known(session: Session) -> None:
    """A job's ``session.commit()`` makes what it read and wrote of regions, places and the
    world row its batch's."""
    session.info[SESSION_KNOWN].keep()


def _drop_known(session: Session, _previous: Any) -> None:
    """A rollback drops what the job read and wrote of them since it last kept its work."""
    session.info[SESSION_KNOWN].drop()
