"""follow: walk to a named place by the way the task spells out, one place after another.

A go_to whose text names every move: "go to the south road, then the tunnel 3, then the tunnel 4
to the south". Each step's right move is written in the task, so the observation shows what to
do at every step, while a walker choosing at random among the admissible actions (a dozen or
more at most places) almost never completes four in a row: the closed loop's rung where step
credit must matter (``bench/learning.py --rung follow_4``), as instructions name the turns of
a route in instruction-following navigation. From the third move on, the place just left is
usually named too (its exit leads back), so following the words takes knowing how far along
the way the avatar is, not just matching them.

The way is the shortest path from ``start``, the place the avatar stood when the task was
drawn, so the task is handed out only there (``forge.pool.near``). Like go_to it is asked for by
name, never drawn for "any family"; its difficulty is ``hops`` and its step budget 2 × hops.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from world.families.family import Params, where
from world.families.go_to import GoTo
from world.snapshot import Snapshot


@dataclass(frozen=True, eq=False)
class Follow(GoTo):
    def describe(self, p: Params) -> str:
        way = [f"the {label}" for label in p["route"].split(", ")] if "route" in p else []
        return "go to " + ", then ".join([*way, where(p["place_name"], p.get("direction"))])

    def candidates(self, snap: Snapshot, hops: int) -> Iterator[Params]:
        """go_to's targets at ``hops``, each with the labels of the moves before the last
        (``route``, absent for one hop: the target's name is the only move) and ``start``."""
        here = snap.me.place
        for c in super().candidates(snap, hops):
            path = snap.path(here, c["place"])
            assert path is not None  # go_to's candidates are reachable
            route = {"route": ", ".join(path[:-1])} if len(path) > 1 else {}
            yield {**c, **route, "start": here}


FOLLOW = Follow(
    name="follow",
    params={"place": str, "place_name": str, "hops": int, "start": str},
    # route: the labels of the moves before the last, joined by ", " (exit labels never hold
    # a comma); absent for one hop.
    optional={"direction": str, "route": str, "budget": int, "from_family": str},
    drawn=False,
    hopped=True,
    reads_things=False,
)
