"""GET /v1/world: the clock, the season, how much of the world is stored and the hash of its
state, now or as it was at a past tick.

The hash reads and settles every stored entity (some 35 us a thing: 350 ms for a world of
10,000 things), and the route is what dashboards, samplers and the demo's live view poll; so
the present world's hash is computed when asked (``?hash=true``), a past tick's always. A past
tick is read from the tables and the images of what changed since (``world.store.past``), or,
for a log older than its ``counters`` events, by a replay (``world.store.history.world_at``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from server.dependencies import CallerDep, RuntimeDep, SessionDep
from server.errors import Unprocessable
from server.routes.common import ERRORS, AtTick
from server.schemas import WorldInfo
from world.state import World
from world.store import SqlBackend
from world.store.history import counts, world_at
from world.store.past import past_backend

router = APIRouter(prefix="/v1/world", tags=["world"], responses=ERRORS)


@router.get("", response_model=WorldInfo)
def world_info(
    session: SessionDep,
    runtime: RuntimeDep,
    _caller: CallerDep,
    at_tick: AtTick = None,
    with_hash: Annotated[
        bool, Query(alias="hash", description="answer the state hash of the world now too")
    ] = False,
) -> WorldInfo:
    world = World(SqlBackend(session), runtime.rules)  # read-only: never committed
    stored = counts(session=session)
    if at_tick is not None:
        if at_tick > world.tick:
            raise Unprocessable(
                f"expected a tick up to the world's, {world.tick}; got {at_tick}",
                code="tick_in_future",
                details={"tick": world.tick},
            )
        past = past_backend(session, at_tick) or world_at(
            session=session, tick=at_tick, rules=runtime.rules
        )
        world = World(past, runtime.rules)
        stored = dict.fromkeys(("regions", "places", "things", "avatars"), 0)
        for table, _row in past.dump():
            if table != "world":
                stored[table + "s"] += 1
    version = world.dynamics
    return WorldInfo(
        seed=world.seed,
        tick=world.tick,
        season=world.season,
        day=version.is_day(world.tick),
        rules_version=version.version,
        state_hash=world.state_hash() if with_hash or at_tick is not None else None,
        **stored,
    )
