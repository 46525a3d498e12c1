"""Replay when the clock skips: on PostgreSQL a transaction's advance draws the next tick from
a sequence that other regions' transactions draw from too, so a step may move the clock by
more than one. The action logs where it started (``from_tick``) and the replay starts it
there, reaching the same state hash (design §4, Region locks)."""

from __future__ import annotations

import random
from typing import Any

from world import engine
from world.replay import replay, started_at
from world.state import MemoryBackend, World
from world.values import ChangeSet


class Interleaved(MemoryBackend):
    """A world whose every advance finds that two other transactions drew a tick meanwhile;
    keeps its log as the database does (a ``txn`` per commit)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.log: list[dict[str, Any]] = []
        self._txn = 0

    def next_tick(self, tick: int) -> int:
        return tick + 2

    def save(self, changes: ChangeSet) -> None:
        super().save(changes)
        self._txn += 1
        self.log.extend(
            {"txn": self._txn, "tick": e.tick, "kind": e.kind, "actor": e.actor,
             "payload": e.payload}
            for e in changes.events
        )  # fmt: skip


def test_a_replay_starts_each_step_where_it_started_live() -> None:
    live = Interleaved(11)
    world = World(live)
    world.add_avatar("a", "Ann")
    world.commit()
    chooser = random.Random(5)
    for i in range(80):
        world = World(live)
        if i % 13 == 12:
            engine.heartbeat(world)
        else:
            options = engine.observe(world, "a").admissible
            roads = [o for o in options if o.endswith(" road")]
            engine.step(
                world, "a", chooser.choice(roads if roads and chooser.random() < 0.4 else options)
            )
        world.commit()
    actions = [e for e in live.log if e["kind"] in ("action", "tick")]
    assert all(started_at(e) == e["tick"] - 3 for e in actions)  # 2 skipped, 1 advanced
    rebuilt = MemoryBackend(11)
    replay(live.log, rebuilt)
    assert World(rebuilt).state_hash() == World(live).state_hash()
    assert rebuilt.meta.tick == live.meta.tick
