"""Tasks as data: a family name plus JSON-able parameters, with a goal predicate over world state.

A :class:`Task` is a frozen, hashable value that can be stored, sent over HTTP and mutated by
the forge. Its goal predicate (:func:`goal_met`) reads the *real* world every time it is asked:
an object that was eaten or carried off by another avatar no longer counts. Predicates never
change the world: they read through :mod:`world.tasks` peek helpers that neither settle lazy
dynamics nor record changes (temperatures are judged as they would settle at the current tick).

Tasks are instantiated against the current state near an avatar by :mod:`world.sampling`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from world import dynamics
from world.entities import Avatar, Thing
from world.errors import TaskError
from world.rules import default_rules

if TYPE_CHECKING:
    from world.state import World

ALFRED_FAMILIES = (
    "pick_and_place",
    "clean_and_place",
    "heat_and_place",
    "cool_and_place",
    "examine_in_light",
    "pick_two_and_place",
)
# The families a draw of "any family" picks from. go_to, the bottom rung of the forge's
# curriculum, is asked for by name (or proposed by the forge) and stays out of this draw, so
# that a draw of any family hands out what it always did.
DRAWN_FAMILIES = (*ALFRED_FAMILIES, "craft", "gather_and_deliver", "cooperate")
FAMILIES = (*DRAWN_FAMILIES, "go_to")

# Families that put objects of one type into a receptacle, and the condition each object needs.
PLACE_CONDITION = {
    "pick_and_place": None,
    "clean_and_place": "clean",
    "heat_and_place": dynamics.HOT,
    "cool_and_place": dynamics.COLD,
    "pick_two_and_place": None,
}
_PLACE_KEYS = {
    "object": str,
    "receptacle": int,
    "receptacle_label": str,
    "place": str,
    "place_name": str,
}
# Parameter names and types per family; optional keys are listed in _OPTIONAL.
PARAMS: dict[str, dict[str, type]] = {
    **{family: _PLACE_KEYS for family in PLACE_CONDITION},
    "examine_in_light": {"object": str, "lamp": int, "lamp_label": str, "place": str, "place_name": str},
    "craft": {"item": str, "baseline": int},
    "gather_and_deliver": {
        "yields": str, "units": int, "baseline": int, "resource": int, "resource_label": str,
        "resource_place": str, "resource_place_name": str, "receptacle": int,
        "receptacle_label": str, "place": str, "place_name": str,
    },
    "cooperate": {"object": str, "avatar": str, "avatar_name": str, "baseline": int},
    "go_to": {"place": str, "place_name": str, "hops": int},
}  # fmt: skip
# "direction" ("north", ...) says that a place lies in the region next to the avatar's.
_OPTIONAL: dict[str, dict[str, type]] = {
    **{family: {"direction": str} for family in (*PLACE_CONDITION, "examine_in_light")},
    "gather_and_deliver": {"resource_direction": str, "direction": str},
    # budget: the task's own step budget; from_family: the family a forge curriculum came down
    # from, which it climbs back to once this rung is mastered.
    "go_to": {"direction": str, "budget": int, "from_family": str},
}


@dataclass(frozen=True)
class Task:
    """A family name and its parameters, kept as canonical JSON so the value is hashable."""

    family: str
    params_json: str

    @classmethod
    def make(cls, family: str, params: dict[str, Any]) -> Task:
        """Build a task, checking the family and its parameters."""
        _check(family, params)
        return cls(family, json.dumps(params, sort_keys=True, separators=(",", ":")))

    @property
    def params(self) -> dict[str, Any]:
        return json.loads(self.params_json)

    def spec(self) -> dict[str, Any]:
        return {"family": self.family, "params": self.params}

    @classmethod
    def from_spec(cls, spec: object) -> Task:
        """The task a spec (as made by :meth:`spec`) describes; raises TaskError on bad input."""
        if not isinstance(spec, dict) or set(spec) != {"family", "params"}:
            raise TaskError(f"expected a spec {{'family': ..., 'params': {{...}}}}, got {spec!r}")
        family, params = spec["family"], spec["params"]
        if not isinstance(params, dict):
            raise TaskError(f"expected params as a dict, got {type(params).__name__}")
        return cls.make(family, params)

    @property
    def id(self) -> str:
        """Stable id: the first 16 hex digits of the SHA-256 of the canonical spec JSON."""
        text = json.dumps(self.spec(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def text(self) -> str:
        """The task in ALFWorld's words, naming things as observations do."""
        return describe(self)

    def __str__(self) -> str:
        return self.text


def _check(family: object, params: dict[str, Any]) -> None:
    if family not in PARAMS:
        raise TaskError(f"expected a family in {FAMILIES}, got {family!r}")
    required, optional = PARAMS[str(family)], _OPTIONAL.get(str(family), {})
    missing = sorted(set(required) - set(params))
    unknown = sorted(set(params) - set(required) - set(optional))
    if missing or unknown:
        raise TaskError(
            f"{family}: expected params {sorted(required)}, missing {missing}, unknown {unknown}"
        )
    for name, value in params.items():
        kind = required.get(name) or optional[name]
        if type(value) is not kind or (kind is str and not value):
            raise TaskError(
                f"{family}: expected {name} as a non-empty {kind.__name__}, got {value!r}"
            )
    for name, least in (("units", 1), ("baseline", 0), ("hops", 1), ("budget", 1)):
        if name in params and params[name] < least:
            raise TaskError(f"{family}: expected {name} >= {least}, got {params[name]}")
    if params.get("from_family", DRAWN_FAMILIES[0]) not in DRAWN_FAMILIES:
        raise TaskError(
            f"{family}: expected from_family in {DRAWN_FAMILIES}, got {params['from_family']!r}"
        )


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _prep(world_label: str) -> str:
    spec = default_rules().receptacles.get(world_label.rsplit(" ", 1)[0])
    return spec.preposition if spec is not None else "in"


def _where(name: str, direction: str | None) -> str:
    return f"the {name}" + (f" to the {direction}" if direction else "")


def describe(task: Task) -> str:
    p, f = task.params, task.family
    if f in PLACE_CONDITION:
        target = f"{_prep(p['receptacle_label'])} {p['receptacle_label']} in {_where(p['place_name'], p.get('direction'))}"
        if f == "pick_two_and_place":
            return f"put two {p['object']} {target}"
        if f == "pick_and_place":
            return f"put {_a(p['object'])} {target}"
        if f == "clean_and_place":
            return f"put a clean {p['object']} {target}"
        verb = "heat" if f == "heat_and_place" else "cool"
        return f"{verb} some {p['object']} and put it {target}"
    if f == "examine_in_light":
        return f"look at {p['object']} under the {p['lamp_label']} in {_where(p['place_name'], p.get('direction'))}"
    if f == "craft":
        return f"craft {_a(p['item'])}"
    if f == "gather_and_deliver":
        source = _where(p["resource_place_name"], p.get("resource_direction"))
        target = _where(p["place_name"], p.get("direction"))
        return (
            f"gather {p['units']} {p['yields']} from {p['resource_label']} in {source} and put "
            f"{'it' if p['units'] == 1 else 'them'} {_prep(p['receptacle_label'])} "
            f"{p['receptacle_label']} in {target}"
        )
    if f == "go_to":
        return f"go to {_where(p['place_name'], p.get('direction'))}"
    return f"bring {_a(p['object'])} to {p['avatar_name']} and give it to them"


def step_budget(task: Task, default: int) -> int:
    """The steps an episode of ``task`` may take: ``default`` (the server's budget), or the
    task's own ``budget`` when it names a smaller one."""
    own = task.params.get("budget")
    return min(default, own) if isinstance(own, int) else default


def temperature(thing: Thing, tick: int) -> str:
    """The temperature a thing has at ``tick`` (what settling it then would give)."""
    temp = str(thing.attrs.get("temp", dynamics.ROOM))
    if temp in (dynamics.HOT, dynamics.COLD) and tick >= int(
        cast(int, thing.attrs.get("temp_until", tick))
    ):
        return dynamics.ROOM
    return temp


def satisfies(thing: Thing, condition: str | None, tick: int) -> bool:
    """Whether an object meets a place family's condition (None, "clean", "hot", "cold")."""
    if condition is None:
        return True
    if condition == "clean":
        return bool(thing.attrs.get("clean", True))
    return temperature(thing, tick) == condition


def units(things: list[Thing], type_name: str) -> int:
    """Units of a type among things (a stack of 3 wood is 3 units)."""
    return sum(t.quantity for t in things if t.type == type_name)


def contents(world: World, place_id: str, receptacle: int) -> list[Thing]:
    return [t for t in world.peek_things_at(place_id) if t.container == receptacle]


def _avatar(world: World, avatar_id: str) -> Avatar | None:
    try:
        return world.avatar(avatar_id)
    except Exception:  # noqa: BLE001 - an unknown avatar simply does not meet a goal
        return None


# -- goal predicates ---------------------------------------------------------------------------
def _placed(world: World, task: Task, avatar_id: str) -> bool:
    p = task.params
    need = 2 if task.family == "pick_two_and_place" else 1
    condition = PLACE_CONDITION[task.family]
    inside = contents(world, p["place"], p["receptacle"])
    ok = [t for t in inside if t.type == p["object"] and satisfies(t, condition, world.tick)]
    return len(ok) >= need


def _examined(world: World, task: Task, avatar_id: str) -> bool:
    p = task.params
    avatar = _avatar(world, avatar_id)
    if avatar is None or avatar.place != p["place"]:
        return False
    lamp = next((t for t in world.peek_things_at(p["place"]) if t.id == p["lamp"]), None)
    held = world.peek_inventory(avatar_id)
    return bool(lamp and lamp.attrs.get("on")) and any(t.type == p["object"] for t in held)


def _crafted(world: World, task: Task, avatar_id: str) -> bool:
    p = task.params
    return units(world.peek_inventory(avatar_id), p["item"]) > p["baseline"]


def _delivered(world: World, task: Task, avatar_id: str) -> bool:
    p = task.params
    inside = contents(world, p["place"], p["receptacle"])
    return units(inside, p["yields"]) >= p["baseline"] + p["units"]


def _given(world: World, task: Task, avatar_id: str) -> bool:
    p = task.params
    return units(world.peek_inventory(p["avatar"]), p["object"]) > p["baseline"]


def _arrived(world: World, task: Task, avatar_id: str) -> bool:
    avatar = _avatar(world, avatar_id)
    return avatar is not None and avatar.place == task.params["place"]


GOALS: dict[str, Callable[[World, Task, str], bool]] = {
    **{family: _placed for family in PLACE_CONDITION},
    "examine_in_light": _examined,
    "craft": _crafted,
    "gather_and_deliver": _delivered,
    "cooperate": _given,
    "go_to": _arrived,
}


def goal_met(world: World, task: Task, avatar_id: str) -> bool:
    """Whether the task's goal holds in the world now, for the avatar doing it. Changes nothing."""
    return GOALS[task.family](world, task, avatar_id)
