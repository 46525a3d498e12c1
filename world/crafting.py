"""Planning craft tasks: expand the recipe tree against what is held and lying around, then
rehearse the gathering, fetching and crafting in order (a heuristic: an upper bound on the
shortest plan)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from world import dynamics
from world.actions import Action
from world.entities import Thing
from world.rehearsal import Builder, Goal, Impossible, Plan, Rehearsal, build_best
from world.snapshot import Snapshot, usable_tools


@dataclass
class Needs:
    """A recipe tree expanded into sources to visit and crafts to make."""

    takes: list[int] = field(default_factory=list)  # loose things to pick up
    gathers: list[tuple[int, int, str]] = field(default_factory=list)  # (resource, units, tool tag)
    tools: list[int] = field(default_factory=list)  # tools to pick up for gathering
    crafts: Counter[str] = field(default_factory=Counter)


def expand(snap: Snapshot, item: str, prefer_loose: bool) -> Needs | None:
    rules = snap.rules
    here = snap.me.place
    have: Counter[str] = Counter()
    for thing in snap.held():
        if not dynamics.is_rotten(thing):
            have[thing.type] += thing.quantity
    loose: dict[str, list[Thing]] = {}
    for thing in snap.loose():
        if not dynamics.is_rotten(thing):
            loose.setdefault(thing.type, []).append(thing)
    for things in loose.values():
        things.sort(key=lambda t: (snap.dist(here, snap.where(t)), t.id))
    left = {t.id: t.count("stock") for t in snap.things.values() if t.kind == "resource"}
    needs = Needs()
    version = snap.meta.version_at(snap.tick)
    known = {name: r for name, r in rules.recipes.items() if version.knows(r)}
    held_tags = {
        tag for t in snap.held() if not t.attrs.get("broken") for tag in rules.objects[t.type].tags
    }

    def need(type_name: str, units: int, top: bool = False) -> bool:
        if not top:
            use = min(have[type_name], units)
            have[type_name] -= use
            units -= use
        recipe = known.get(type_name)  # a locked, undiscovered recipe is no way to make it
        if units > 0 and not top and (recipe is None or prefer_loose):
            while units > 0 and loose.get(type_name):
                thing = loose[type_name].pop(0)
                needs.takes.append(thing.id)
                units -= thing.quantity
            if units < 0:
                have[type_name] += -units
                units = 0
        if units <= 0:
            return True
        if recipe is not None:
            times = -(-units // recipe.count)
            needs.crafts[type_name] += times
            have[type_name] += times * recipe.count - units
            return all(need(name, k * times) for name, k in sorted(recipe.inputs.items()))
        return gather(type_name, units)

    def gather(type_name: str, units: int) -> bool:
        sources = sorted(
            (
                t
                for t in snap.things.values()
                if t.kind == "resource"
                and rules.resources[t.type].yields == type_name
                and left[t.id] >= units
            ),
            key=lambda t: (snap.dist(here, snap.where(t)), t.id),
        )
        for resource in sources:
            tag = rules.resources[resource.type].tool
            if tag not in held_tags:
                tools = [
                    t
                    for t in usable_tools(snap, tag, units)
                    if t.holder is None and t.id not in needs.tools
                ]
                if not tools:
                    continue
                tools.sort(key=lambda t: (snap.dist(here, snap.where(t)), t.id))
                needs.tools.append(tools[0].id)
                held_tags.add(tag)
            left[resource.id] -= units
            needs.gathers.append((resource.id, units, tag))
            return True
        return False

    return needs if need(item, 1, top=True) else None


def _craft_builder(item: str, needs: Needs) -> Builder:
    def build(sim: Rehearsal) -> None:
        rules, snap = sim.snap.rules, sim.snap
        keep = {item, *needs.crafts, *(snap.things[i].type for i in needs.takes)}
        keep |= {rules.resources[snap.things[r].type].yields for r, _, _ in needs.gathers}
        keep |= {snap.things[i].type for i in needs.tools}
        takes = list(needs.tools) + list(needs.takes)
        gathers = list(needs.gathers)
        pending = Counter(needs.crafts)
        order = sorted(pending, key=lambda name: (rules.recipe_depth(name), name))

        def ready(name: str) -> bool:
            held: Counter[str] = Counter()
            for thing in sim.held():
                if not dynamics.is_rotten(thing):
                    held[thing.type] += thing.quantity
            return all(held[k] >= n for k, n in rules.recipes[name].inputs.items())

        def station_here(name: str) -> bool:
            station = rules.recipes[name].station
            return station is None or any(r.type == station for r in sim.world.things_at(sim.here))

        while pending[item] > 0:
            made = True
            while made:
                made = False
                for name in order:
                    if pending[name] > 0 and ready(name) and station_here(name):
                        sim.do(Action("craft", name))
                        pending[name] -= 1
                        made = True
                        break
            if pending[item] == 0:
                break
            tag_held = {
                tag
                for t in sim.held()
                if not t.attrs.get("broken")
                for tag in rules.objects[t.type].tags
            }
            moves: list[tuple[float, int, str, Any]] = []
            for thing_id in takes:
                moves.append(
                    (snap.dist(sim.here, snap.where(snap.things[thing_id])), 0, "take", thing_id)
                )
            for gather in gathers:
                if gather[2] in tag_held:
                    moves.append(
                        (
                            snap.dist(sim.here, snap.where(snap.things[gather[0]])),
                            1,
                            "gather",
                            gather,
                        )
                    )
            for name in order:
                station = rules.recipes[name].station
                if pending[name] > 0 and station is not None and ready(name):
                    for receptacle in snap.receptacles():
                        if receptacle.type == station and receptacle.place is not None:
                            moves.append(
                                (
                                    snap.dist(sim.here, receptacle.place),
                                    2,
                                    "station",
                                    receptacle.place,
                                )
                            )
            moves = [m for m in moves if m[0] < math.inf]
            if not moves:
                raise Impossible("no way forward in the recipe tree")
            _, _, kind, what = min(moves, key=lambda m: (m[0], m[1], str(m[3])))
            if kind == "take":
                takes.remove(what)
                sim.fetch(what, keep)
            elif kind == "gather":
                gathers.remove(what)
                resource = sim.world.thing(what[0])
                assert resource.place is not None
                sim.goto(resource.place)
                tool = next(
                    t
                    for t in sim.held()
                    if what[2] in rules.objects[t.type].tags and not t.attrs.get("broken")
                )
                for _ in range(what[1]):
                    sim.gather(resource, tool, keep)
            else:
                sim.goto(what)

    return build


def plan_craft(snap: Snapshot, item: str, goal: Goal, budget: int) -> Plan | None:
    """A plan that crafts ``item`` until ``goal`` holds (the recipe tree expanded with lying
    units first and with sub-recipes first, the shorter built), or None."""
    if item not in snap.rules.recipes:
        return None
    options: list[tuple[float, Builder]] = []
    for prefer_loose in (True, False):
        needs = expand(snap, item, prefer_loose)
        if needs is not None:
            estimate = (
                len(needs.takes)
                + len(needs.tools)
                + sum(needs.crafts.values())
                + sum(g[1] for g in needs.gathers)
            )
            options.append((estimate, _craft_builder(item, needs)))
    return build_best(snap, goal, options, budget, len(options))
