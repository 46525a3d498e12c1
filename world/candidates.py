"""Candidate task parameters near an avatar, per family, for the task sampler to try (each is
checked by the oracle before it becomes a task)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from world.crafting import expand
from world.snapshot import Snapshot, usable_tools
from world.tasks import PLACE_CONDITION

STATION_FOR = {"clean_and_place": "clean", "heat_and_place": "heat", "cool_and_place": "cool"}
TAG_FOR = {
    "clean_and_place": "cleanable",
    "heat_and_place": "heatable",
    "cool_and_place": "coolable",
}
CRAFT_CLEARANCE = 3  # no craft task for an item lying within this many moves of the avatar
NOT_TARGETS = ("desk lamp", "floor lamp")  # capacity-one lamps make poor delivery targets


def candidates(snap: Snapshot, family: str, *, hops: int = 1) -> list[dict[str, Any]]:
    """Parameter sets of ``family`` that make sense near the avatar (not yet checked);
    ``hops`` is the distance of a go_to's target, in ``go to`` moves."""
    if family == "go_to":
        return list(go_to_candidates(snap, hops))
    return list(_CANDIDATES[family](snap, family))


def go_to_candidates(snap: Snapshot, hops: int) -> Iterator[dict[str, Any]]:
    """Places exactly ``hops`` moves away whose last move is ``go to`` their own name (a road
    is labelled by its direction, not by the hub it leads to), so that the move that finishes
    a one-hop go_to is word for word among the admissible actions. Its budget is 2 × hops."""
    here = snap.me.place
    for place in sorted(snap.places):
        path = snap.path(here, place)
        if path is None or len(path) != hops or path[-1] != snap.places[place].name:
            continue
        yield {**_names(snap, place), "hops": hops, "budget": 2 * hops}


def _names(snap: Snapshot, place: str) -> dict[str, Any]:
    names = {"place": place, "place_name": snap.places[place].name}
    direction = snap.direction(place)
    return names if direction is None else {**names, "direction": direction}


def _types_near(snap: Snapshot) -> list[str]:
    return sorted({t.type for t in (*snap.loose(), *snap.held())})


def _place_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    tag = TAG_FOR.get(family)
    types = [t for t in _types_near(snap) if tag is None or tag in snap.rules.objects[t].tags]
    if family == "pick_two_and_place":
        counts = Counter(t.type for t in (*snap.loose(), *snap.held()))
        types = [t for t in types if counts[t] >= 2]
    if family in STATION_FOR and not snap.receptacles(STATION_FOR[family]):
        return
    for receptacle in snap.receptacles():
        if receptacle.type in NOT_TARGETS or receptacle.place is None:
            continue
        for type_name in types:
            yield {
                "object": type_name,
                "receptacle": receptacle.id,
                "receptacle_label": receptacle.label,
                **_names(snap, receptacle.place),
            }


def _examine_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for lamp in snap.receptacles("light"):
        assert lamp.place is not None
        for type_name in _types_near(snap):
            yield {
                "object": type_name,
                "lamp": lamp.id,
                "lamp_label": lamp.label,
                **_names(snap, lamp.place),
            }


def _craft_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
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


def _gather_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for resource in sorted(
        (t for t in snap.things.values() if t.kind == "resource"), key=lambda t: t.id
    ):
        spec = snap.rules.resources[resource.type]
        units = resource.count("stock")
        if units < 1 or not usable_tools(snap, spec.tool, 1):
            continue
        assert resource.place is not None
        source = {
            "resource": resource.id,
            "resource_label": resource.label,
            "resource_place": resource.place,
            "resource_place_name": snap.places[resource.place].name,
            "yields": spec.yields,
        }
        if snap.direction(resource.place):
            source["resource_direction"] = str(snap.direction(resource.place))
        for receptacle in snap.receptacles():
            if receptacle.type in NOT_TARGETS or receptacle.place is None:
                continue
            inside = [t for t in snap.things.values() if t.container == receptacle.id]
            params = {
                **source,
                "receptacle": receptacle.id,
                "receptacle_label": receptacle.label,
                **_names(snap, receptacle.place),
                "units": 1 + (resource.id + receptacle.id) % min(3, units),
                "baseline": sum(t.quantity for t in inside if t.type == spec.yields),
            }
            yield params


def _cooperate_candidates(snap: Snapshot, family: str) -> Iterator[dict[str, Any]]:
    for other in sorted(snap.avatars.values(), key=lambda a: a.id):
        if other.id == snap.avatar_id or len(snap.held(other.id)) >= snap.rules.avatar_capacity:
            continue  # nobody can hand a thing to full hands
        theirs: Counter[str] = Counter()
        for thing in snap.held(other.id):
            theirs[thing.type] += thing.quantity
        for type_name in _types_near(snap):
            yield {
                "object": type_name,
                "avatar": other.id,
                "avatar_name": other.name,
                "baseline": theirs[type_name],
            }


_CANDIDATES: dict[str, Callable[[Snapshot, str], Iterator[dict[str, Any]]]] = {
    **{family: _place_candidates for family in PLACE_CONDITION},
    "examine_in_light": _examine_candidates,
    "craft": _craft_candidates,
    "gather_and_deliver": _gather_candidates,
    "cooperate": _cooperate_candidates,
}
