"""The world's mutable records: regions, places, things and avatars.

These are plain dataclasses so that a store can map each to one table row. Ids are
deterministic: places are ``"rx,ry:i"``; things carry an integer id allocated from the world's
counter in the order things come into being, so replaying the same inputs gives the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AttrValue = bool | int | float | str | None


def region_key(rx: int, ry: int) -> str:
    return f"{rx},{ry}"


def place_id(rx: int, ry: int, index: int) -> str:
    return f"{rx},{ry}:{index}"


def region_of(place: str) -> tuple[int, int]:
    """The region coordinates encoded in a place id."""
    coords = place.split(":", 1)[0]
    rx, ry = coords.split(",")
    return int(rx), int(ry)


@dataclass
class Region:
    rx: int
    ry: int
    kind: str
    n_places: int
    generated_tick: int

    @property
    def key(self) -> str:
        return region_key(self.rx, self.ry)


@dataclass
class Place:
    id: str
    kind: str
    name: str  # unique inside its region, e.g. "kitchen 2"
    exits: dict[str, str]  # label as seen from here -> place id ("kitchen 2", "north road")
    outdoor: bool = True
    # Attributes changed by rules or the forge, e.g. {"flooded_until": 900}.
    attrs: dict[str, AttrValue] = field(default_factory=dict)


@dataclass
class Thing:
    """Any object, receptacle or resource.

    Exactly one of ``place``/``holder`` says where it is: a thing lying in a place (inside the
    receptacle ``container`` when set), or held by the avatar ``holder``. ``tick`` is the tick at
    which its lazily applied dynamics were last brought up to date.
    """

    id: int
    type: str
    kind: str  # "object", "receptacle" or "resource"
    num: int  # label number, unique per type in the world
    place: str | None
    container: int | None = None
    holder: str | None = None
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    tick: int = 0

    @property
    def label(self) -> str:
        return f"{self.type} {self.num}"

    def number(self, name: str, default: float = 0.0) -> float:
        """A numeric attribute (freshness, stock, ticks) as a float."""
        value = self.attrs.get(name, default)
        return float(value) if isinstance(value, int | float) else default

    def count(self, name: str, default: int = 0) -> int:
        """An integer attribute (quantity, durability, ticks)."""
        return int(self.number(name, default))

    @property
    def quantity(self) -> int:
        """Units in this thing (a stack of 3 wood is 3)."""
        return self.count("quantity", 1)

    def copy(self) -> Thing:
        """An independent copy, its attributes too (``dataclasses.replace`` costs four times
        this, and a planner's snapshot copies hundreds)."""
        return Thing(
            self.id,
            self.type,
            self.kind,
            self.num,
            self.place,
            self.container,
            self.holder,
            dict(self.attrs),
            self.tick,
        )

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Thing:
        """The inverse of :meth:`row`."""
        return cls(**{**row, "attrs": dict(row["attrs"])})

    def row(self) -> dict[str, Any]:
        """A canonical, JSON-ready image of this thing (used for hashing and the event log)."""
        return {
            "id": self.id,
            "type": self.type,
            "kind": self.kind,
            "num": self.num,
            "place": self.place,
            "container": self.container,
            "holder": self.holder,
            "attrs": dict(sorted(self.attrs.items())),
            "tick": self.tick,
        }


@dataclass
class Avatar:
    id: str
    name: str
    place: str
    # Inventory slots under the rules it joined with (stored with it); the engine enforces the
    # rules in force, ``Rules.avatar_capacity``.
    capacity: int
    attrs: dict[str, AttrValue] = field(default_factory=dict)
