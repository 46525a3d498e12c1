"""What one server process holds between requests: settings, the database engine, the write
gate, the rate limiter, the credential cache and throttle, and the metrics. Built once by
``create_app`` and kept on ``app.state``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.credentials import CallerCache, FailureThrottle
from server.limits import RateLimiter
from server.metrics import Metrics
from server.settings import Settings
from world.rules import Rules, default_rules
from world.store import WorldRow, lock_world, make_engine, session_factory
from world.store.database import WRITE_OPTION


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    rules: Rules
    limiter: RateLimiter
    metrics: Metrics = field(default_factory=Metrics)
    callers: CallerCache = field(default_factory=lambda: CallerCache(0.0))
    auth_failures: FailureThrottle = field(default_factory=lambda: FailureThrottle(0))
    # World transactions are serialised by the database (the world lock); queueing this
    # process's writers on a lock first keeps that lock almost never contended: SQLite's busy
    # handler sleeps in coarse steps, and on PostgreSQL waiters would each hold a connection.
    # Other processes over the same PostgreSQL still meet at the row lock.
    _gate: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, settings: Settings) -> Runtime:
        engine = make_engine(
            settings.resolved_database_url(),
            sqlite_synchronous=settings.sqlite_synchronous,
            pool_size=settings.db_pool_size,
        )
        return cls(
            settings=settings,
            engine=engine,
            sessions=session_factory(engine),
            rules=default_rules(),
            limiter=RateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst),
            callers=CallerCache(settings.auth_cache_s),
            auth_failures=FailureThrottle(settings.auth_failures_per_min),
        )

    @contextmanager
    def world_transaction_unlocked(self) -> Iterator[Session]:
        """A plain session for start-up work that runs before the world row exists."""
        gate = self._gate if self.engine.dialect.name == "sqlite" else contextlib.nullcontext()
        with gate, self.sessions() as session:
            session.connection(execution_options={WRITE_OPTION: True})
            yield session

    @contextmanager
    def world_transaction(self) -> Iterator[tuple[Session, WorldRow]]:
        """A session holding the world lock (see ``lock_world``), with the world row; the
        caller commits. Rolled back if the caller raises or leaves without committing."""
        with self._gate, self.sessions() as session:
            meta = lock_world(session)
            try:
                yield session, meta
            finally:
                if session.in_transaction():
                    session.rollback()
