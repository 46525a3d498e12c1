"""Fixtures for the pure world tests: an in-memory world driven one transaction per call.

The server opens one :class:`World` per step over its store and commits it; :class:`Sim` does
the same over a :class:`MemoryBackend`, so lazy dynamics settle exactly as they would in
production. Nothing here touches a database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from world import engine
from world.engine import Observation, StepResult
from world.entities import Thing
from world.rules import Rules, default_rules
from world.state import ORIGIN, MemoryBackend, World

KITCHEN = "0,0:2"  # region (0, 0) is always a village: square 1 - living room 1 - kitchen 1 ...
MARKET_STALL = "1,1:2"  # seed 7: region (1, 1) is a market; this place holds its stall 1


class Sim:
    """A world in memory where every method call is one committed transaction."""

    def __init__(self, seed: int = 7) -> None:
        self.backend = MemoryBackend(seed)

    @contextmanager
    def tx(self) -> Iterator[World]:
        """One transaction: a fresh World over the backend, committed on leaving."""
        world = World(self.backend)
        yield world
        world.commit()

    def join(self, avatar_id: str, name: str | None = None, place: str = ORIGIN) -> None:
        with self.tx() as world:
            world.add_avatar(avatar_id, name or avatar_id.capitalize(), place)

    def step(self, avatar_id: str, text: str) -> StepResult:
        with self.tx() as world:
            return engine.step(world, avatar_id, text)

    def observe(self, avatar_id: str) -> Observation:
        with self.tx() as world:
            return engine.observe(world, avatar_id)

    def heartbeat(self, ticks: int = 1) -> None:
        """Advance the clock without acting (one logged transaction per tick)."""
        for _ in range(ticks):
            with self.tx() as world:
                engine.heartbeat(world)

    def skip(self, ticks: int) -> None:
        """Advance the clock in one unlogged jump (cheap; for dynamics over many ticks)."""
        with self.tx() as world:
            world.advance(ticks)

    def teleport(self, avatar_id: str, place: str) -> None:
        with self.tx() as world:
            world.place(place)
            avatar = world.avatar(avatar_id)
            avatar.place = place
            world.touch(avatar)

    def spawn(
        self,
        type_name: str,
        *,
        into: str | None = None,
        holder: str | None = None,
        place: str = KITCHEN,
        **attrs: Any,
    ) -> Thing:
        """Create a thing held by ``holder``, inside receptacle label ``into`` at ``place``, or
        (for receptacles and resources) standing in ``place``. Extra attributes are set."""
        with self.tx() as world:
            if holder is not None:
                thing = world.create_thing(type_name, holder=holder)
            elif into is not None:
                host = self.find(world, into, place)
                thing = world.create_thing(type_name, place=place, container=host.id)
            else:
                thing = world.create_thing(type_name, place=place)
            thing.attrs.update(attrs)
            return thing

    @staticmethod
    def find(world: World, label: str, place: str = KITCHEN) -> Thing:
        matches = [t for t in world.things_at(place) if t.label == label]
        assert matches, f"no {label!r} in {place}"
        return matches[0]

    def thing(self, thing_id: int) -> Thing:
        """A thing, settled to the current tick (loading it is what settles it)."""
        with self.tx() as world:
            return world.thing(thing_id)

    def trades(self, avatar_id: str) -> set[str]:
        """The admissible ``trade`` actions of the avatar."""
        return {a for a in self.observe(avatar_id).admissible if a.startswith("trade ")}

    def labels_at(self, place: str) -> set[str]:
        with self.tx() as world:
            return {t.label for t in world.things_at(place)}

    def held(self, avatar_id: str) -> list[Thing]:
        with self.tx() as world:
            return world.inventory(avatar_id)

    @property
    def tick(self) -> int:
        return self.backend.meta.tick

    def hash(self) -> str:
        return World(self.backend).state_hash()


@pytest.fixture(scope="session")
def rules() -> Rules:
    return default_rules()


@pytest.fixture
def sim() -> Sim:
    """A world with avatar ``a`` (Alice) standing in kitchen 1 of the origin village."""
    s = Sim(seed=7)
    s.join("a", "Alice")
    s.teleport("a", KITCHEN)
    return s


@pytest.fixture
def stall_sim(sim: Sim) -> Sim:
    """The ``sim`` world with Alice standing at a market stall (``stall 1``, which sells
    bread, cheese, rope and fishing rods) instead of the kitchen."""
    sim.teleport("a", MARKET_STALL)
    return sim


@pytest.fixture
def make_sim() -> type[Sim]:
    """The :class:`Sim` class, for tests that need their own seeds or several worlds."""
    return Sim
