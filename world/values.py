"""The world's plain values: its one row, the event log's entries and what a transaction changed.

They sit below :mod:`world.state`, :mod:`world.dynamics` and :mod:`world.worldgen`, which all
read them, so that none of those has to import another for a type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from world.entities import Avatar, Place, Region, Thing
from world.rules import RulesVersion


@dataclass(frozen=True)
class Event:
    """One entry of the append-only event log."""

    tick: int
    kind: str
    actor: str | None
    entities: tuple[str, ...]
    payload: dict[str, Any]


@dataclass
class WorldMeta:
    """The world's single row: seed, clock, id counters and dynamics versions."""

    seed: int
    tick: int = 0
    next_thing_id: int = 1
    counters: dict[str, int] = field(default_factory=dict)  # type -> last label number
    versions: list[RulesVersion] = field(default_factory=list)

    def version_at(self, tick: int) -> RulesVersion:
        current = self.versions[0]
        for version in self.versions:
            if version.since_tick <= tick:
                current = version
        return current

    def copy(self) -> WorldMeta:
        """An independent copy (versions are frozen, so the copy shares them)."""
        return dataclasses.replace(self, counters=dict(self.counters), versions=list(self.versions))

    def row(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "tick": self.tick,
            "next_thing_id": self.next_thing_id,
            "counters": dict(sorted(self.counters.items())),
            "versions": [dataclasses.asdict(v) for v in self.versions],
        }


@dataclass
class ChangeSet:
    """What one transaction changed, for a backend to persist."""

    meta: WorldMeta
    regions: list[Region] = field(default_factory=list)
    places: dict[str, Place] = field(default_factory=dict)
    things: dict[int, Thing] = field(default_factory=dict)
    removed: set[int] = field(default_factory=set)
    avatars: dict[str, Avatar] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
