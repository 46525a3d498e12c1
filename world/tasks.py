"""Tasks as data: a family name plus JSON-able parameters, with a goal predicate over world state.

A :class:`Task` is a frozen, hashable value that can be stored, sent over HTTP and mutated by
the forge. Its goal predicate (:func:`goal_met`) reads the *real* world every time it is asked:
an object that was eaten or carried off by another avatar no longer counts. Predicates never
change the world: they read through the world's peek helpers, which neither settle lazy
dynamics nor record changes (temperatures are judged as they would settle at the current tick).

What each family's parameters, text and goal are is its module's to say (:mod:`world.families`).
Tasks are instantiated against the current state near an avatar by :mod:`world.sampling`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from world.errors import TaskError
from world.families import DRAWN_FAMILIES, get_family
from world.families.family import Guide
from world.state import World


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

    @property
    def places(self) -> tuple[str, ...]:
        """The places the task names (its target, its resource's place): a snapshot to plan
        it in must reach them besides the avatar's surroundings."""
        p = self.params
        return tuple(p[k] for k in ("place", "resource_place") if k in p)

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
    found = get_family(family)
    required, optional = found.params, found.optional
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


def describe(task: Task) -> str:
    return get_family(task.family).describe(task.params)


def step_budget(task: Task, default: int) -> int:
    """The steps an episode of ``task`` may take: ``default`` (the server's budget), or the
    task's own ``budget`` when it names a smaller one."""
    own = task.params.get("budget")
    return min(default, own) if isinstance(own, int) else default


def goal_met(world: World, task: Task, avatar_id: str) -> bool:
    """Whether the task's goal holds in the world now, for the avatar doing it. Changes nothing."""
    return get_family(task.family).goal(world, task.params, avatar_id)


def guide(world: World, task: Task, avatar_id: str) -> Guide:
    """What the task's family shows at a decision now (a trail's signpost, a waymark's move
    listed first). Changes nothing."""
    return get_family(task.family).guide(world, task.params, avatar_id)
