"""GET /v1/events: the append-only event log, filtered, in cursor pages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from server.dependencies import CallerDep, SessionDep
from server.routes.common import ERRORS, IdCursor, Limit, Tick
from world.schemas import EventOut, Page
from world.store.history import EventFilter, list_events

router = APIRouter(prefix="/events", tags=["events"], responses=ERRORS)


@router.get("", response_model=Page[EventOut])
def events(
    session: SessionDep,
    _caller: CallerDep,
    from_tick: Tick = None,
    to_tick: Tick = None,
    kind: Annotated[str | None, Query(max_length=32)] = None,
    entity: Annotated[
        str | None, Query(max_length=96, description='e.g. "thing:7", "place:0,0:3"')
    ] = None,
    region: Annotated[str | None, Query(max_length=40, pattern=r"^-?\d+,-?\d+$")] = None,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    cursor: IdCursor = None,
) -> Page[EventOut]:
    where = EventFilter(
        from_tick=from_tick, to_tick=to_tick, kind=kind, entity=entity, region=region, actor=actor
    )
    found = list_events(session=session, where=where, limit=limit, cursor=cursor)
    items = [
        EventOut(
            id=e.id,
            txn=e.txn,
            tick=e.tick,
            kind=e.kind,
            actor=e.actor,
            entities=list(e.entities),
            payload=e.payload,
        )
        for e in found.items
    ]
    return Page[EventOut](items=items, next_cursor=found.next_cursor)
