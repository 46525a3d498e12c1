"""GET /v1/world: the clock, the season and how much of the world is stored."""

from __future__ import annotations

from fastapi import APIRouter

from server.dependencies import CallerDep, SessionDep
from server.routes.common import ERRORS
from server.schemas import WorldInfo
from world.state import World
from world.store import SqlBackend
from world.store.history import counts

router = APIRouter(prefix="/v1/world", tags=["world"], responses=ERRORS)


@router.get("", response_model=WorldInfo)
def world_info(session: SessionDep, _caller: CallerDep) -> WorldInfo:
    world = World(SqlBackend(session))  # read-only: never committed
    version = world.dynamics
    return WorldInfo(
        seed=world.seed,
        tick=world.tick,
        season=world.season,
        day=version.is_day(world.tick),
        rules_version=version.version,
        **counts(session=session),
    )
