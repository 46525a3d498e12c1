"""What one server process holds between requests: settings, the database engine, the writer
(group commit), the rate limiter, the credential cache and throttle, and the metrics. Built
once by ``create_app`` and kept on ``app.state``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.credentials import CallerCache, FailureThrottle
from server.limits import RateLimiter
from server.metrics import Metrics
from server.settings import Settings
from world.rules import Rules, default_rules
from world.store import Work, Writer, make_engine, session_factory
from world.store.database import WRITE_OPTION
from world.store.regions import Scope
from world.store.worlds import Stores

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
    # The engines of the forks' stores (world.store.worlds), opened on first use.
    stores: Stores = field(init=False)
    metrics: Metrics = field(default_factory=Metrics)
    callers: CallerCache = field(default_factory=lambda: CallerCache(0.0))
    auth_failures: FailureThrottle = field(default_factory=lambda: FailureThrottle(0))

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
        self.writer.close()
        self.stores.close()
        self.engine.dispose()

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
        return self.writer.run(work, scope)

    async def world_transaction_async(self, work: Work[T], scope: Scope | None = None) -> T:
        """:meth:`world_transaction` for the event loop: it waits for the commit without
        holding a thread (the hot routes, whose every trip through the thread pool shows)."""
        return await asyncio.wrap_future(self.writer.submit(work, scope))
