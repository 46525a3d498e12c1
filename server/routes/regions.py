"""GET /v1/regions: the materialised regions with what they hold now, for maps."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from server.dependencies import CallerDep, SessionDep
from server.routes.common import ERRORS, Limit
from world.schemas import Page, RegionOut
from world.store.history import list_regions

router = APIRouter(prefix="/regions", tags=["world"], responses=ERRORS)

RegionCursor = Annotated[
    str | None,
    Query(
        max_length=24,
        pattern=r"^-?[0-9]{1,9},-?[0-9]{1,9}$",
        description='next_cursor of the previous page ("rx,ry" of its last region)',
    ),
]


@router.get("", response_model=Page[RegionOut])
def regions(
    session: SessionDep, _caller: CallerDep, limit: Limit = 100, cursor: RegionCursor = None
) -> Page[RegionOut]:
    """Regions in (rx, ry) order with the number of places, things and avatars in each."""
    after = None
    if cursor is not None:
        rx, ry = cursor.split(",")
        after = (int(rx), int(ry))
    found = list_regions(session=session, limit=limit, cursor=after)
    return Page[RegionOut](
        items=[RegionOut.model_validate(r, from_attributes=True) for r in found.items],
        next_cursor=found.next_cursor,
    )
