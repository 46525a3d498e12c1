"""craft: make one more of an item than the avatar holds, down its recipe tree, as TextCraft.

The recipes, their inputs and stations are rules data (``world/data/recipes.yaml``); the
recipe tree is expanded and rehearsed by :mod:`world.crafting`. Plans are **heuristic** (an
upper bound on the shortest): the tree is expanded with held units first, then either lying
units or sub-recipes (both strategies are built and the shorter kept); sources are visited
nearest-first and each craft is made as soon as its inputs are held at a place with its
station.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from world.crafting import expand, plan_craft
from world.families.family import Family, Params, Spec, article, units
from world.rehearsal import Plan
from world.snapshot import Snapshot
from world.state import World

CRAFT_CLEARANCE = 3  # no craft task for an item lying within this many moves of the avatar


@dataclass(frozen=True, eq=False)
class Craft(Family):
    def describe(self, p: Params) -> str:
        return f"craft {article(p['item'])}"

    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        return units(world.peek_inventory(avatar_id), p["item"]) > p["baseline"]

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        held: Counter[str] = Counter()
        for thing in snap.held():
            held[thing.type] += thing.quantity
        # Picking up one that lies close by would do: that is not a crafting task.
        here = snap.me.place
        lying = {t.type for t in snap.loose() if snap.dist(here, snap.where(t)) <= CRAFT_CLEARANCE}
        for item in sorted(snap.rules.recipes):
            if item in lying:
                continue
            if expand(snap, item, True) or expand(snap, item, False):  # the tree bottoms out here
                yield {"item": item, "baseline": held[item]}

    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        return plan_craft(snap, p["item"], self.goal_of(p), budget)

    def estimate(self, snap: Snapshot, p: Params) -> float:
        recipe = snap.rules.recipes.get(p["item"])
        if recipe is None:
            return math.inf
        return 3.0 * snap.rules.recipe_depth(p["item"]) + sum(recipe.inputs.values())

    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Any other item: a longer or a shorter recipe chain."""
        return self.keeping(snap, p, ())


CRAFT = Craft(
    name="craft",
    params={"item": str, "baseline": int},
    # Crafting has few candidates, and whether a recipe tree can be completed here is only
    # known by planning it.
    tries=16,
)
