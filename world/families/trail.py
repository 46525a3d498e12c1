"""trail: walk to a named place by signposts, each showing the next move from where one stands.

A go_to whose way is signposted: at every decision of the episode the observation ends with a
signpost naming the exit on a shortest way to the target from the avatar's place ("A signpost
here reads: for the kitchen 1, go to north road."), as waymarks guide a walker turn by turn.
Each step's right move is in the observation in front of the avatar, whatever it did before, so
no memory of the way is needed, while a walker choosing at random among the admissible actions
(a dozen or more at most places) almost never completes four moves in a row: the closed loop's
rung where step credit must matter (``bench/learning.py --rung trail_4``). Where ``follow``
spells the whole way out in the task, and so asks how far along it the avatar is, a trail
shows one move at a time.

Like go_to it is asked for by name, never drawn for "any family"; its parameters, difficulty
(``hops``), step budget (2 × hops) and neighbours are go_to's.

waymark: a trail whose signposted move is also listed first among the admissible actions. A
policy that reads the signpost gains nothing from it; one that cannot yet (the cold tiny policy
does not learn to in thousands of perfectly rewarded decisions, ``bench/step_ceiling.py``)
can still learn each step's right move by its place in the list, so the step is learnable while
its chain, at random, stays as rare as a trail's: the rung ``waymark_4`` asks whether step credit
teaches a learnable step faster than outcomes do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from world.families.family import NO_GUIDE, Guide, Params, avatar_or_none, where
from world.families.go_to import GO_TO, GoTo
from world.snapshot import Snapshot
from world.state import World


@dataclass(frozen=True, eq=False)
class Trail(GoTo):
    def describe(self, p: Params) -> str:
        return f"follow the signposts to {where(p['place_name'], p.get('direction'))}"

    def guide(self, world: World, p: Params, avatar_id: str) -> Guide:
        """A signpost naming the first move of a shortest way from the avatar's place to the
        target (the oracle's, over the place graph alone); none at the target or where no way
        is known."""
        avatar = avatar_or_none(world, avatar_id)
        if avatar is None or avatar.place == p["place"]:
            return NO_GUIDE
        snap = Snapshot.of(world, avatar_id, (p["place"],), things=False)
        way = snap.path(avatar.place, p["place"])
        return self.guided(p, way[0]) if way else NO_GUIDE

    def guided(self, p: Params, exit_label: str) -> Guide:
        """What a decision shows where a shortest way leaves by ``exit_label``."""
        return Guide(sign=f"A signpost here reads: for the {p['place_name']}, go to {exit_label}.")


@dataclass(frozen=True, eq=False)
class Waymark(Trail):
    def guided(self, p: Params, exit_label: str) -> Guide:
        """A trail's signpost, and its move listed first."""
        return replace(super().guided(p, exit_label), lead=f"go to {exit_label}")


TRAIL = Trail(
    name="trail",
    params=GO_TO.params,
    optional=GO_TO.optional,
    drawn=False,
    hopped=True,
    reads_things=False,
)
WAYMARK = Waymark(
    name="waymark",
    params=GO_TO.params,
    optional=GO_TO.optional,
    drawn=False,
    hopped=True,
    reads_things=False,
)
