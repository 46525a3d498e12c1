"""bigworld's world: a pure, deterministic, lazily materialised text world.

Nothing here reads the wall clock or global randomness, and nothing outside ``world.store``
imports SQLAlchemy. The public value types (observations, tasks, the action grammar) may be
imported by agents; the store, the forge and the server may not be.
"""
