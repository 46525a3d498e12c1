"""What a task family is: the contract every module of :mod:`world.families` fulfils, and the
words, reads and estimates that several families share.

A family is one object that carries everything about it: its parameters, how they are drawn
near an avatar, its description text, its goal check, its oracle plan, a cheap estimate of that
plan's length, and its neighbours (the one-change variants the forge tries when it wants a
task harder or easier). Every method takes the task's parameters, already checked against
:attr:`Family.params` by :class:`world.tasks.Task`, rather than the task: a family needs nothing
of :mod:`world.tasks`, which finds the families through the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from world.entities import Avatar, Thing
from world.rehearsal import Goal, Plan
from world.rules import default_rules
from world.snapshot import Snapshot
from world.state import World

Params = dict[str, Any]  # a task's parameters: JSON-able values by name
Spec = dict[str, Any]  # {"family": name, "params": {...}}, as world.tasks.Task.spec() makes one

NOT_TARGETS = ("desk lamp", "floor lamp")  # capacity-one lamps make poor delivery targets


@dataclass(frozen=True)
class Guide:
    """What a task shows at a decision: a sentence after the observation (``sign``, a trail's
    signpost) and an admissible action listed first (``lead``, a waymark's signposted move)."""

    sign: str | None = None
    lead: str | None = None


NO_GUIDE = Guide()


@dataclass(frozen=True, eq=False)
class Family(ABC):
    """One task family. A subclass implements the six methods below; an instance names the
    family and its parameters (required ``params`` and ``optional`` ones, with their types)."""

    name: str
    params: Mapping[str, type]
    optional: Mapping[str, type] = field(default_factory=dict)
    drawn: bool = True  # whether a draw of "any family" may pick it
    tries: int = 6  # candidates the sampler hands the oracle before it gives up here
    # Whether its candidates take ``hops``: a fresh draw asking for it by name then takes hops
    # in 1..go_to_hops (server.forge.fresh_hops); the other families ignore them.
    hopped: bool = False
    # Whether its candidates and plans look at things; go_to's only walk the place graph, so
    # its snapshots copy the places alone (Snapshot.of(things=False)).
    reads_things: bool = True

    @abstractmethod
    def describe(self, p: Params) -> str:
        """The task in ALFWorld's words, naming things as observations do."""

    @abstractmethod
    def goal(self, world: World, p: Params, avatar_id: str) -> bool:
        """Whether the goal holds in ``world`` now for the avatar doing the task. It reads the
        world through peek helpers, which neither settle lazy dynamics nor record changes."""

    @abstractmethod
    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        """Parameter sets that make sense near the snapshot's avatar, not yet checked by the
        oracle; ``hops`` is how far a go_to's target lies (other families ignore it)."""

    @abstractmethod
    def plan(self, snap: Snapshot, p: Params, budget: int) -> Plan | None:
        """The oracle's plan inside the snapshot, or None within ``budget`` (the search breadth:
        candidates ranked plus actions simulated)."""

    @abstractmethod
    def estimate(self, snap: Snapshot, p: Params) -> float:
        """A cheap guess at the plan length (moves, opens, station trips); inf if it cannot work.
        The forge orders variants by it before the oracle plans them."""

    @abstractmethod
    def neighbours(self, snap: Snapshot, p: Params) -> Iterator[Spec]:
        """Specs one change away from ``p`` near the snapshot's avatar, harder and easier alike
        (the forge keeps those its estimate and the oracle put in the direction it wants)."""

    def guide(self, world: World, p: Params, avatar_id: str) -> Guide:
        """What the world shows the avatar doing the task at each of its decisions (the first
        observation and every step that leaves the episode open) beyond the place itself:
        most families show nothing."""
        return NO_GUIDE

    def goal_of(self, p: Params) -> Goal:
        """The goal check for these parameters, as the planning library takes it."""
        return lambda world, avatar_id: self.goal(world, p, avatar_id)

    def keeping(self, snap: Snapshot, p: Params, keys: tuple[str, ...]) -> Iterator[Spec]:
        """This family's candidates that keep one of ``keys`` as ``p`` has it (all of them when
        ``keys`` is empty): variants that change the rest."""
        for c in self.candidates(snap, 1):
            if not keys or any(c.get(k) == p.get(k) for k in keys):
                yield {"family": self.name, "params": c}


# -- words -------------------------------------------------------------------------------------
def article(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def preposition(label: str) -> str:
    """ "in" or "on": how a thing goes into the receptacle labelled ``label`` ("shelf 1")."""
    spec = default_rules().receptacles.get(label.rsplit(" ", 1)[0])
    return spec.preposition if spec is not None else "in"


def where(name: str, direction: str | None) -> str:
    """A place by name, with the direction of the next region it lies in, if it does."""
    return f"the {name}" + (f" to the {direction}" if direction else "")


# -- reads for goal checks ---------------------------------------------------------------------
def units(things: list[Thing], type_name: str) -> int:
    """Units of a type among things (a stack of 3 wood is 3 units)."""
    return sum(t.quantity for t in things if t.type == type_name)


def avatar_or_none(world: World, avatar_id: str) -> Avatar | None:
    try:
        return world.avatar(avatar_id)
    except Exception:  # noqa: BLE001 - an unknown avatar simply does not meet a goal
        return None


# -- drawing parameters near the avatar --------------------------------------------------------
def place_names(snap: Snapshot, place: str) -> Params:
    """A place's parameters: its id and name, and its direction when it lies next door."""
    names = {"place": place, "place_name": snap.places[place].name}
    direction = snap.direction(place)
    return names if direction is None else {**names, "direction": direction}


def types_near(snap: Snapshot) -> list[str]:
    """Object types lying in the snapshot or held by its avatar."""
    return sorted({t.type for t in (*snap.loose(), *snap.held())})


# -- cheap estimates ---------------------------------------------------------------------------
def objects(snap: Snapshot, type_name: str, not_in: int | None) -> Iterable[Thing]:
    """Held or loose things of a type, but for those already in receptacle ``not_in``."""
    for thing in (*snap.held(), *snap.loose(type_name)):
        if thing.type == type_name and (not_in is None or thing.container != not_in):
            yield thing


def fetch_estimate(snap: Snapshot, thing: Thing, goal: str) -> float:
    """Moves to reach a thing (opening its container), then carry it to ``goal``."""
    start = snap.where(thing)
    return snap.dist(snap.me.place, start) + snap.closed(thing.container) + snap.dist(start, goal)
