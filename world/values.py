"""The world's plain values: its one row, the event log's entries and what a transaction changed.

They sit below :mod:`world.state`, :mod:`world.dynamics` and :mod:`world.worldgen`, which all
read them, so that none of those has to import another for a type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from world.entities import Avatar, Place, Region, Thing
from world.rules import RulesVersion, Versions


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
    versions: Versions = field(default_factory=Versions)

    def version_at(self, tick: int) -> RulesVersion:
        return self.versions.at(tick)

    def copy(self) -> WorldMeta:
        """An independent copy (the versions are immutable, so the copy shares them)."""
        return dataclasses.replace(self, counters=dict(self.counters))

    def row(self, *, versions: bool = True) -> dict[str, Any]:
        """The row's columns; without the versions where ``versions`` is false (a world that has
        run for days holds thousands, so a store writes them only when one is published)."""
        row: dict[str, Any] = {
            "seed": self.seed,
            "tick": self.tick,
            "next_thing_id": self.next_thing_id,
            "counters": dict(sorted(self.counters.items())),
        }
        if versions:
            row["versions"] = self.versions.rows()
        return row


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
