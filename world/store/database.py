"""Engines, sessions and the world lock, for SQLite and PostgreSQL alike.

SQLite runs in WAL mode with ``synchronous=FULL`` by default: every commit is fsynced, so an
acknowledged step survives a process kill and a power cut (``NORMAL`` survives the former
only). The sqlite3 driver's own transaction handling is switched off so that write
transactions can start with ``BEGIN IMMEDIATE``: the write lock is then taken before anything
is read, which serialises world transactions exactly like ``SELECT ... FOR UPDATE`` on the
world row does on PostgreSQL. The server's world transactions take the lock once per batch of
the group commit (:func:`begin_locked`, ``world.store.writer``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from world.rules import Rules, Versions, default_rules
from world.store import driver, regions
from world.store.backend import WorldRow, insert_world, read_world
from world.store.errors import StoreError
from world.store.models import Base
from world.values import WorldMeta

# All SQLite connections of the process together keep at most this much (page caches first;
# a soft limit, process-wide): each connection's cache otherwise grows to 2 MiB as it reads,
# so the memory of a server grew with every pool connection that a burst of requests opened.
SQLITE_HEAP_LIMIT = 8 * 2**20
WRITE_OPTION = "bigworld_write"  # execution option: begin this transaction IMMEDIATE (SQLite)
_WORLD = Base.metadata.tables["world_meta"]


def make_engine(
    url: str, *, sqlite_synchronous: str = "FULL", pool_size: int = 20, schema: str | None = None
) -> Engine:
    """An engine for ``url`` with the pragmas and pool this project relies on; on PostgreSQL,
    ``schema`` is where its unqualified names live (a fork's store, ``world.store.worlds``)."""
    parsed = make_url(url)
    # Both pools are last in, first out: the connections a steady load needs stay warm (SQLite's
    # page cache, the statements psycopg has prepared on a PostgreSQL connection), and the
    # others (opened by a burst, or by fill_pool) stay idle with cold caches.
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 60},
            pool_size=pool_size,
            pool_use_lifo=True,
        )
        _configure_sqlite(engine, sqlite_synchronous)
    else:
        if parsed.drivername == "postgresql":
            url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        options = {"options": f"-c search_path={schema}"} if schema else {}
        engine = create_engine(
            url,
            pool_size=pool_size,
            max_overflow=10,
            pool_pre_ping=True,
            pool_use_lifo=True,
            connect_args=options,
            execution_options={regions.LOCK_SPACE: regions.lock_space(schema)} if schema else {},
        )
    driver.send_savepoints(engine)
    return engine


def fill_pool(engine: Engine) -> None:
    """Open every connection the pool keeps, now: a long-running server then holds the same
    descriptors (two files per SQLite connection) from its start, instead of one more pair each
    time a burst of requests needs more connections at once than ever before."""
    size = engine.pool.size()  # type: ignore[attr-defined]
    connections = [engine.connect() for _ in range(size)]
    for connection in connections:
        connection.close()


def _configure_sqlite(engine: Engine, synchronous: str) -> None:
    if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
        raise StoreError(f"expected sqlite synchronous FULL, NORMAL or EXTRA, got {synchronous!r}")

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous.upper()}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute(f"PRAGMA soft_heap_limit={SQLITE_HEAP_LIMIT}")
        # Each step's savepoint keeps a statement journal, which SQLite spills to a temporary
        # file opened and deleted at every commit (65% of a batched fleet's writes, issue 38);
        # it only serves rollback within the transaction, so memory is as safe (the WAL is
        # what survives a crash).
        cursor.execute("PRAGMA temp_store=MEMORY")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def is_sqlite(session: Session) -> bool:
    return session.get_bind().dialect.name == "sqlite"


def lock_world(session: Session) -> WorldRow:
    """Take the world's write lock for the rest of this session's transaction and return its
    row (for tools and tests; the server's world transactions go through the writer).

    Must be the session's first statement: on SQLite the lock is the transaction itself
    (``BEGIN IMMEDIATE``); on PostgreSQL it is a row lock on the world row. Every transaction
    that changes the world or appends events holds it, so ticks, thing ids and event ids are
    handed out one transaction at a time, in commit order.
    """
    if session.in_transaction() and is_sqlite(session):
        raise StoreError("lock_world must open the transaction (it was already begun)")
    conn = session.connection(execution_options={WRITE_OPTION: True})
    if conn.dialect.name != "sqlite":  # the whole world: every region's lock waits on it
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": regions.spaced(conn, regions.WORLD_KEY)}
        )
    return read_world(session, for_update=True)


def begin_locked(conn: Connection) -> None:
    """Begin ``conn``'s transaction holding the world lock, as :func:`lock_world` does for a
    session: SQLite's group commit batch (``world.store.writer``) runs its savepoints inside
    it. On SQLite ``BEGIN IMMEDIATE`` is the lock, and there is nothing to read; on PostgreSQL
    the whole world's advisory lock is taken here, outside every savepoint, because rolling
    back a savepoint gives up the locks taken in it (the writer's PostgreSQL batches lock
    per transaction instead, ``world.store.regions``)."""
    conn.execution_options(**{WRITE_OPTION: True})
    conn.begin()
    if conn.dialect.name != "sqlite":
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": regions.spaced(conn, regions.WORLD_KEY)}
        )


def ensure_world(session: Session, seed: int, rules: Rules | None = None) -> WorldRow:
    """Create the world row with ``seed`` if there is none; return the (possibly older) row."""
    if session.execute(select(_WORLD.c.id).where(_WORLD.c.id == 1)).first() is None:
        rules = rules or default_rules()
        meta = WorldMeta(seed=seed, versions=Versions([rules.dynamics])).row()
        insert_world(session, {"txn_seq": 0, "last_event_id": 0, **meta})
    if not is_sqlite(session):  # the clock resumes after the log (a replay, a restart)
        session.execute(regions.SYNC_CLOCK)
    return read_world(session)
