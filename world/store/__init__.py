"""Persistence of the world in SQLite or PostgreSQL through SQLAlchemy 2.x (the only SQL in world/)."""

from world.store.backend import SqlBackend, WorldRow, append_events, read_world
from world.store.database import (
    ensure_world,
    lock_world,
    make_engine,
    session_factory,
)
from world.store.errors import StoreError
from world.store.writer import Work, Writer

__all__ = [
    "SqlBackend",
    "StoreError",
    "Work",
    "WorldRow",
    "Writer",
    "append_events",
    "ensure_world",
    "lock_world",
    "make_engine",
    "read_world",
    "session_factory",
]
