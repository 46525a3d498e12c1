"""Forks: POST /v1/worlds makes one at a tick of any world, GET /v1/worlds lists them with the
main world, DELETE /v1/worlds/{name} removes one, GET /v1/worlds/{name}/world reads one as
GET /v1/world reads the main world."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from server import worlds
from server.dependencies import AdminDep, CallerDep, RuntimeDep, SessionDep, WorldPath
from server.routes.common import ERRORS, AtTick, Limit
from server.routes.world import HashQuery, world_info
from world.contract import MAIN_WORLD
from world.schemas import (
    ForkCreate,
    ForkDeleted,
    ForkOut,
    Page,
    WorldInfo,
    WorldListed,
    WorldSize,
)

router = APIRouter(prefix="/v1/worlds", tags=["worlds"], responses=ERRORS)


@router.post("", response_model=ForkOut, status_code=status.HTTP_201_CREATED)
def create_fork(
    body: ForkCreate, session: SessionDep, runtime: RuntimeDep, _admin: AdminDep
) -> ForkOut:
    """Fork a world at the end of a tick: the fork's state and hash are the parent's then, and
    nothing done in it changes the parent."""
    fork = worlds.create(runtime, session, body.from_, body.at_tick, body.name)
    state_hash = worlds.hashed(runtime, session, fork.name) if body.hash else None
    return ForkOut(
        name=fork.name,
        parent=fork.parent,
        at_tick=fork.at_tick,
        tick=fork.at_tick,  # a fork starts at the end of its tick
        state_hash=state_hash,
        created_at=fork.created_at,
    )


@router.get("", response_model=Page[WorldListed])
def list_worlds(
    session: SessionDep,
    runtime: RuntimeDep,
    _caller: CallerDep,
    limit: Limit = 50,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
) -> Page[WorldListed]:
    listed = worlds.listing(runtime, session, cursor, limit)
    items = [
        WorldListed(
            name=w.fork.name if w.fork else MAIN_WORLD,
            parent=w.fork.parent if w.fork else None,
            at_tick=w.fork.at_tick if w.fork else None,
            tick=w.tick,
            created_at=w.fork.created_at if w.fork else None,
            size=WorldSize(rows=w.rows, events=w.events),
        )
        for w in listed[:limit]
    ]
    return Page(items=items, next_cursor=items[-1].name if len(listed) > limit else None)


@router.delete("/{name}", response_model=ForkDeleted)
def delete_fork(
    name: WorldPath, session: SessionDep, runtime: RuntimeDep, _admin: AdminDep
) -> ForkDeleted:
    """Remove a fork and everything only it holds; never main, never a fork with forks."""
    fork = worlds.delete(runtime, session, name)
    return ForkDeleted(
        name=fork.name, parent=fork.parent, at_tick=fork.at_tick, created_at=fork.created_at
    )


@router.get("/{name}/world", response_model=WorldInfo)
def fork_info(
    name: WorldPath,
    session: SessionDep,
    runtime: RuntimeDep,
    _caller: CallerDep,
    at_tick: AtTick = None,
    with_hash: HashQuery = False,
) -> WorldInfo:
    return world_info(runtime, session, name, at_tick, with_hash)
