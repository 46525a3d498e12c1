"""GET /v1/things/{id} and /v1/places/{id}: an entity now, or as it was at ``at_tick``
(rebuilt from the ``state`` events of the log)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from server.dependencies import CallerDep, SessionDep
from server.errors import NotFound
from server.routes.common import ERRORS, AtTick, IdPath
from world.contract import ErrorCode
from world.schemas import PlaceOut, ThingOut
from world.store.history import Gone, image_at, place_now, thing_now

router = APIRouter(tags=["entities"], responses=ERRORS)


def _at(session: SessionDep, kind: str, entity_id: str, at_tick: int) -> dict[str, Any]:
    try:
        image = image_at(session=session, kind=kind, entity_id=entity_id, at_tick=at_tick)
    except Gone as exc:
        raise NotFound(
            f"{kind} {entity_id} was gone by tick {at_tick}", code=ErrorCode.GONE
        ) from exc
    if image is None:
        raise NotFound(f"no {kind} {entity_id} at tick {at_tick}")
    return image


@router.get("/things/{thing_id}", response_model=ThingOut)
def read_thing(
    thing_id: IdPath,
    session: SessionDep,
    _caller: CallerDep,
    at_tick: AtTick = None,
) -> ThingOut:
    if at_tick is None:
        row = thing_now(session=session, thing_id=thing_id)
        if row is None:
            raise NotFound(f"no thing {thing_id}")
    else:
        row = _at(session, "thing", str(thing_id), at_tick)
    return ThingOut(label=f"{row['type']} {row['num']}", **row)


@router.get("/places/{place_id}", response_model=PlaceOut)
def read_place(
    place_id: Annotated[str, Path(max_length=64, pattern=r"^-?\d+,-?\d+:\d+$")],
    session: SessionDep,
    _caller: CallerDep,
    at_tick: AtTick = None,
) -> PlaceOut:
    if at_tick is None:
        row = place_now(session=session, place_id=place_id)
        if row is None:
            raise NotFound(f"no place {place_id}")
    else:
        row = _at(session, "place", place_id, at_tick)
    return PlaceOut(**row)
