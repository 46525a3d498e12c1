"""A world's forks: the registry, where each fork's store lives, and reading any world of the
tree as it is.

The main world's database keeps the registry (``worlds``: name, parent, tick, when, where). A
fork's store (``world.store.fork``) is a SQLite file ``forks/<name>.<making>.db`` in the main
world's folder, or on PostgreSQL a schema ``fork_<name>_<making>`` of the main world's
database (``making``: a token of the request that made it); it holds the
whole schema, migrated to head, with only what the fork changed in it.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.orm import Session

from world.contract import MAIN_WORLD
from world.state import Backend
from world.store.backend import SqlBackend
from world.store.database import make_engine, session_factory
from world.store.errors import StoreError
from world.store.fork import ForkBackend, Written
from world.store.models import ForkRow
from world.store.past import Kept, PastBackend, Since, past_backend


@dataclass(frozen=True)
class Fork:
    name: str
    parent: str
    at_tick: int
    created_at: float  # unix seconds
    location: str  # a SQLite file, or a PostgreSQL schema

    @classmethod
    def from_row(cls, row: ForkRow) -> Fork:
        return cls(row.name, row.parent, row.at_tick, row.created_at, row.location)


# -- the registry (in the main world's database) -----------------------------------------------
def get_fork(session: Session, name: str) -> Fork | None:
    row = session.get(ForkRow, name)
    return None if row is None else Fork.from_row(row)


def list_forks(session: Session, *, after: str | None = None, limit: int = 1000) -> list[Fork]:
    stmt = select(ForkRow).order_by(ForkRow.name).limit(limit)
    if after is not None:
        stmt = stmt.where(ForkRow.name > after)
    return [Fork.from_row(r) for r in session.scalars(stmt)]


def has_forks(session: Session, name: str) -> bool:
    found = session.scalar(select(func.count()).where(ForkRow.parent == name))
    return bool(found)


def add_fork(session: Session, fork: Fork) -> None:
    session.add(ForkRow(**fork.__dict__))


def remove_fork(session: Session, name: str) -> None:
    session.execute(delete(ForkRow).where(ForkRow.name == name))


def lineage(session: Session, name: str) -> list[Fork]:
    """``name``'s forks from the oldest below main down to ``name`` itself (empty for main)."""
    chain: list[Fork] = []
    while name != MAIN_WORLD:
        fork = get_fork(session, name)
        if fork is None:
            raise StoreError(f"no world {name!r}")
        chain.append(fork)
        name = fork.parent
    return chain[::-1]


# -- stores ------------------------------------------------------------------------------------
def location_for(main: Engine, name: str, making: str) -> str:
    """Where the store of fork ``name``, made by the request ``making`` (a token unique to it),
    goes: a file beside the main world's, or a schema. Two requests making one name at once
    build two stores, and the registry keeps one: the other's is dropped, never the kept one."""
    if main.dialect.name == "sqlite":
        database = main.url.database
        if not database or database == ":memory:":
            raise StoreError("forks need the main world in a SQLite file, not in memory")
        return str(Path(database).resolve().parent / "forks" / f"{name}.{making}.db")
    return f"fork_{name.replace('-', '_')}_{making}"  # names have no '_'


def open_store(main: Engine, location: str) -> Engine:
    if main.dialect.name == "sqlite":
        return make_engine(f"sqlite:///{location}", pool_size=5)
    url = main.url.render_as_string(hide_password=False)
    return make_engine(url, pool_size=5, schema=location)


def make_store(main: Engine, location: str) -> Engine:
    """A new, empty store at ``location`` (any leftover there removed), for the caller to
    migrate to head."""
    drop_store(main, location)
    if main.dialect.name == "sqlite":
        Path(location).parent.mkdir(mode=0o700, exist_ok=True)
    else:
        with main.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{location}"'))
            conn.commit()
    return open_store(main, location)


def drop_store(main: Engine, location: str) -> None:
    if main.dialect.name == "sqlite":
        for path in Path(location).parent.glob(Path(location).name + "*"):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        return
    with main.connect() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{location}" CASCADE'))
        conn.commit()


# -- reading a world of the tree -------------------------------------------------------------
class Stores:
    """The engines of the forks' stores of one main world, opened on first use."""

    def __init__(self, main: Engine) -> None:
        self.main = main
        self._engines: dict[str, Engine] = {}
        # By parent and tick: what the parent changed since the tick, and what its forks have
        # read of it as it was then (all the forks at one tick of one parent share them).
        self._since: dict[tuple[Identity, int], Since] = {}
        self._kept: dict[tuple[Identity, int], Kept] = {}
        self._at: dict[str, tuple[Identity, int]] = {}  # each fork's parent and tick
        self._written: dict[Identity, Written] = {}  # what each fork wrote
        self._lock = threading.Lock()  # requests open them from several threads

    def engine(self, fork: Fork) -> Engine:
        with self._lock:
            if fork.name not in self._engines:
                self._engines[fork.name] = open_store(self.main, fork.location)
            return self._engines[fork.name]

    def since(self, chain: list[Fork]) -> Since:
        """What the parent of ``chain``'s last fork (``lineage``) changed after the fork's
        tick, kept up across requests."""
        with self._lock:
            return self._since.setdefault(self._at_of(chain), Since(chain[-1].at_tick))

    def kept(self, chain: list[Fork]) -> Kept:
        """What has been read of the parent of ``chain``'s last fork as it was at the fork's
        tick, kept across requests."""
        with self._lock:
            return self._kept.setdefault(self._at_of(chain), Kept())

    def _at_of(self, chain: list[Fork]) -> tuple[Identity, int]:
        fork = chain[-1]
        parent = _identity(chain[-2]) if len(chain) > 1 else (MAIN_WORLD, "", 0, 0.0)
        self._at[fork.name] = (parent, fork.at_tick)
        return self._at[fork.name]

    def written(self, fork: Fork) -> Written:
        """What ``fork`` wrote, kept up across requests."""
        with self._lock:
            return self._written.setdefault(_identity(fork), Written())

    def forget(self, name: str) -> None:
        """Drop what is kept for fork ``name``: its engine, what it wrote, what is kept of its
        parent at its tick (other forks made there read it again) and what is kept of it."""
        with self._lock:
            engine = self._engines.pop(name, None)
            for fork in [k for k in self._written if k[0] == name]:
                del self._written[fork]
            at = self._at.pop(name, None)
            stale = [
                k for k in self._since.keys() | self._kept.keys() if k == at or k[0][0] == name
            ]
            for parent in stale:
                self._since.pop(parent, None)
                self._kept.pop(parent, None)
        if engine is not None:
            engine.dispose()

    def close(self) -> None:
        for name in list(self._engines):
            self.forget(name)

    @contextmanager
    def backend(self, main: Session, chain: list[Fork]) -> Iterator[tuple[Backend, Session]]:
        """The world at the end of ``chain`` (``lineage``) as it is now, and the session of
        its own store (``main`` for the main world): a fork reads through its parent as it
        was at the fork's tick."""
        with ExitStack() as stack:
            backend: Backend = SqlBackend(main)
            session = main
            for i, fork in enumerate(chain):
                own = stack.enter_context(session_factory(self.engine(fork))())
                past = parent_at(session, backend, fork, self.since(chain[: i + 1]))
                backend, session = ForkBackend(own, past, written=self.written(fork)), own
            yield backend, session


Identity = tuple[str, str, int, float]


def _identity(fork: Fork) -> Identity:
    """A fork's name and its making: a name deleted and made again (by another server of the
    same database, say) is another fork."""
    return (fork.name, fork.parent, fork.at_tick, fork.created_at)


def parent_at(
    session: Session, parent: Backend, fork: Fork, since: Since | None = None
) -> PastBackend:
    """``fork``'s parent as it was at the fork's tick: ``parent`` as it is now, over
    ``session`` of its store (which holds its log); ``since`` as for ``past_backend``."""
    past = past_backend(session, fork.at_tick, now=parent, since=since)
    if past is None:
        raise StoreError(f"the log cannot say the world at tick {fork.at_tick}")
    return past
