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
from sqlalchemy.orm import Session

from server import worlds
from server.dependencies import CallerDep, RuntimeDep, SessionDep
from server.routes.common import ERRORS, AtTick
from server.runtime import Runtime
from world.contract import MAIN_WORLD
from world.schemas import WorldInfo

router = APIRouter(prefix="/v1/world", tags=["world"], responses=ERRORS)
HashQuery = Annotated[
    bool, Query(alias="hash", description="answer the state hash of the world now too")
]


@router.get("", response_model=WorldInfo)
def main_world(
    session: SessionDep,
    runtime: RuntimeDep,
    _caller: CallerDep,
    at_tick: AtTick = None,
    with_hash: HashQuery = False,
) -> WorldInfo:
    return world_info(runtime, session, MAIN_WORLD, at_tick, with_hash)


def world_info(
    runtime: Runtime, session: Session, name: str, at_tick: int | None, with_hash: bool
) -> WorldInfo:
    state = worlds.read(runtime, session, name, at_tick, with_hash)
    return WorldInfo(
        seed=state.seed,
        tick=state.tick,
        season=state.season,
        day=state.day,
        rules_version=state.rules_version,
        state_hash=state.state_hash,
        **state.counts,
    )
