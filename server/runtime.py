"""What one server process holds between requests: settings, the database engine, the writer
(group commit), the rate limiter, the credential cache and throttle, and the metrics. Built
once by ``create_app`` and kept on ``app.state``.

A fork (``world.store.worlds``) is served by a runtime of its own over its store, made on its
first request (:meth:`Runtime.world`): its own engine and writer, the main world's limiter,
credentials and metrics. Its transactions read through its parent as it was at the fork's tick
(:meth:`Runtime.parents`), and :meth:`Runtime.backend` is the one way the server opens a
world's backend, a fork's or the main world's."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.credentials import CallerCache, FailureThrottle
from server.limits import RateLimiter
from server.metrics import Metrics
from server.settings import Settings
from world.contract import MAIN_WORLD
from world.rules import Rules, default_rules
from world.state import Backend
from world.store import SqlBackend, Work, WorldRow, Writer, make_engine, session_factory
from world.store.database import WRITE_OPTION
from world.store.errors import StoreError
from world.store.fork import ForkBackend
from world.store.past import KeptPast
from world.store.regions import Scope
from world.store.worlds import Fork, Stores, lineage, parent_at

_PAST = "bigworld_past"  # session.info: a fork's parent at its tick, for its backend

T = TypeVar("T")


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    rules: Rules
    limiter: RateLimiter
    # This process's world transactions, committed in batches by one thread (group commit).
    # Other processes over the same PostgreSQL meet at region locks (world.store.regions).
    writer: Writer
    metrics: Metrics = field(default_factory=Metrics)
    callers: CallerCache = field(default_factory=lambda: CallerCache(0.0))
    auth_failures: FailureThrottle = field(default_factory=lambda: FailureThrottle(0))
    # The world served: none for main; for a fork, its lineage from main's first fork down.
    lineage: list[Fork] = field(default_factory=list)
    # The engines of the forks' stores, and the forks' runtimes by name (the main world's).
    stores: Stores = field(init=False)
    forks: dict[str, Runtime] = field(default_factory=dict)
    # A fork's: the agents its store holds a row for (server.worlds.enlist).
    members: set[int] = field(default_factory=set)
    _making: threading.Lock = field(default_factory=threading.Lock)  # one runtime per fork

    @classmethod
    def build(cls, settings: Settings) -> Runtime:
        engine = make_engine(
            settings.resolved_database_url(),
            sqlite_synchronous=settings.sqlite_synchronous,
            pool_size=settings.db_pool_size,
        )
        metrics = Metrics()
        return cls(
            settings=settings,
            engine=engine,
            sessions=session_factory(engine),
            rules=default_rules(),
            limiter=RateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst),
            writer=Writer(engine, on_commit=metrics.world_commit, on_wait=metrics.world_wait),
            metrics=metrics,
            callers=CallerCache(settings.auth_cache_s),
            auth_failures=FailureThrottle(settings.auth_failures_per_min),
        )

    def __post_init__(self) -> None:
        self.stores = Stores(self.engine)

    def close(self) -> None:
        """Finish the submitted world transactions, then release the databases."""
        for name in list(self.forks):
            self.forget(name)
        self.writer.close()
        self.stores.close()
        self.engine.dispose()

    # -- the worlds of the tree ------------------------------------------------------------
    def world(self, name: str) -> Runtime | None:
        """The runtime serving world ``name`` (this one for main), made on first use; None
        for a world that does not exist. Only the main world's runtime makes them."""
        if name == MAIN_WORLD:
            return self
        with self._making:
            return self._fork_runtime(name)

    def _fork_runtime(self, name: str) -> Runtime | None:
        if name not in self.forks:
            with self.sessions() as session:
                try:
                    chain = lineage(session, name)
                except StoreError:
                    return None
            engine = self.stores.engine(chain[-1])
            self.forks[name] = dataclasses.replace(
                self,
                engine=engine,
                sessions=session_factory(engine),
                writer=Writer(
                    engine, on_commit=self.metrics.world_commit, on_wait=self.metrics.world_wait
                ),
                lineage=chain,
                forks={},
                members=set(),
            )
            self.forks[name].stores = self.stores  # the main world's: the chain's engines
        return self.forks[name]

    def forget(self, name: str) -> None:
        """Stop serving fork ``name`` (before its store is dropped)."""
        fork = self.forks.pop(name, None)
        if fork is not None:
            fork.writer.close()
        self.stores.forget(name)

    @contextmanager
    def parents(self, session: Session) -> Iterator[None]:
        """For the span, ``session`` of a fork's store reads through its parent as it was at
        the fork's tick (:meth:`backend`); nothing for the main world. What the fork read of
        its parent before is kept (``Stores.kept``): the parent's database is opened only for
        what is not."""
        if not self.lineage:
            yield
            return
        fork = self.lineage[-1]
        with ExitStack() as opened:

            def open_parent() -> Backend:
                main = opened.enter_context(session_factory(self.stores.main)())
                parent, parent_session = opened.enter_context(
                    self.stores.backend(main, self.lineage[:-1])
                )
                return parent_at(parent_session, parent, fork, self.stores.since(self.lineage))

            session.info[_PAST] = KeptPast(self.stores.kept(self.lineage), open_parent)
            try:
                yield
            finally:
                session.info.pop(_PAST, None)

    def backend(self, session: Session, world_row: WorldRow | None = None) -> Backend:
        """The backend of this runtime's world over ``session`` (one of its transactions)."""
        if not self.lineage:
            return SqlBackend(session, world_row)
        written = self.stores.written(self.lineage[-1])
        return ForkBackend(session, session.info[_PAST], world_row, written=written)

    @contextmanager
    def world_transaction_unlocked(self) -> Iterator[Session]:
        """A plain write session for start-up work that runs before the world row exists (and
        before any world transaction); the caller commits."""
        with self.sessions() as session:
            session.connection(execution_options={WRITE_OPTION: True})
            yield session

    def world_transaction(self, work: Work[T], scope: Scope | None = None) -> T:
        """Run ``work(session, world_row)`` as one world transaction under the world lock and
        return its value once the transaction is durable (``world.store.writer``: it may share
        its commit with others). ``session.commit()`` keeps the work done so far; raising, or
        returning without committing, drops what was not kept, and nothing else. With a
        ``scope`` (PostgreSQL) it locks what the scope's avatar can reach, not the world."""
        return self.writer.run(self._within_parents(work), scope)

    async def world_transaction_async(self, work: Work[T], scope: Scope | None = None) -> T:
        """:meth:`world_transaction` for the event loop: it waits for the commit without
        holding a thread (the hot routes, whose every trip through the thread pool shows)."""
        return await asyncio.wrap_future(self.writer.submit(self._within_parents(work), scope))

    async def world_transactions_async(
        self, works: Sequence[tuple[Work[Any], Scope | None]]
    ) -> list[Any | BaseException]:
        """Several world transactions submitted together (``Writer.submit_many``: one batch,
        one commit), each its own: the value of each, or the exception it raised, in order."""
        futures = self.writer.submit_many(
            [(self._within_parents(work), scope) for work, scope in works]
        )
        return await _all_answered(futures)

    def _within_parents(self, work: Work[T]) -> Work[T]:
        if not self.lineage:
            return work

        def within(session: Session, world_row: WorldRow) -> T:
            with self.parents(session):
                return work(session, world_row)

        return within


async def _all_answered(futures: Sequence[Future[Any]]) -> list[Any | BaseException]:
    """The value, or the exception, of each of ``futures`` once all are answered: the event
    loop is woken once for them all (one wake each, through ``asyncio.wrap_future``, cost
    about a third of the event loop's time in batches of 64, docs/benchmarks/fleet.md).
    Cancelled while waiting, it cancels them (those the writer has not taken never run)."""
    if not futures:
        return []
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    left = len(futures)
    lock = threading.Lock()

    def one_answered(_future: Future[Any]) -> None:
        nonlocal left
        with lock:
            left -= 1
            if left:
                return
        loop.call_soon_threadsafe(_settle, answered)

    for future in futures:
        future.add_done_callback(one_answered)
    try:
        await answered
    except asyncio.CancelledError:
        for future in futures:
            future.cancel()
        raise
    return [future.exception() or future.result() for future in futures]


def _settle(answered: asyncio.Future[None]) -> None:
    if not answered.done():  # not cancelled meanwhile
        answered.set_result(None)
