"""The task families, one module each (the five place families share one), listed here.

Adding a family is one module with a :class:`~world.families.family.Family` in it, its rules
data if it needs any, its line below and its tests; ``docs/design.md`` ("Adding a task family")
walks through :mod:`world.families.go_to`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from world.errors import TaskError
from world.families.cooperate import COOPERATE
from world.families.craft import CRAFT
from world.families.examine import EXAMINE_IN_LIGHT
from world.families.family import Family
from world.families.follow import FOLLOW
from world.families.gather import GATHER_AND_DELIVER
from world.families.go_to import GO_TO
from world.families.place import (
    CLEAN_AND_PLACE,
    COOL_AND_PLACE,
    HEAT_AND_PLACE,
    PICK_AND_PLACE,
    PICK_TWO_AND_PLACE,
)
from world.families.trail import TRAIL, WAYMARK

# In this order: a draw of "any family" permutes DRAWN_FAMILIES, so the order is part of what
# a seed draws.
REGISTRY: Mapping[str, Family] = MappingProxyType(
    {
        family.name: family
        for family in (
            PICK_AND_PLACE,
            CLEAN_AND_PLACE,
            HEAT_AND_PLACE,
            COOL_AND_PLACE,
            EXAMINE_IN_LIGHT,
            PICK_TWO_AND_PLACE,
            CRAFT,
            GATHER_AND_DELIVER,
            COOPERATE,
            GO_TO,
            FOLLOW,
            TRAIL,
            WAYMARK,
        )
    }
)
FAMILIES = tuple(REGISTRY)
# The families a draw of "any family" picks from: every one but go_to, the bottom rung of the
# forge's curriculum, which is asked for by name (or proposed by the forge), follow, trail and
# waymark.
DRAWN_FAMILIES = tuple(name for name, family in REGISTRY.items() if family.drawn)


def get_family(name: object) -> Family:
    """The family called ``name``; raises TaskError when there is none."""
    found = REGISTRY.get(name) if isinstance(name, str) else None
    if found is None:
        raise TaskError(f"expected a family in {FAMILIES}, got {name!r}")
    return found
