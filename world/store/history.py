"""Reading what happened: the event log by filter, entities and the whole world as they were
at a past tick, and summary counts of the world as it is (in all and per region).

Time travel needs no snapshots: every world transaction appends a ``state`` event carrying the
after-image of each entity it changed, so an entity at tick T is its image in the last
``state`` event at or before T that names it; the whole world at T is the log's inputs up to T
replayed (``world.replay``), which reproduces the state the live transactions left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from world.replay import replay
from world.rules import Rules
from world.state import MemoryBackend
from world.store.backend import read_world
from world.store.models import (
    AvatarRow,
    EventEntityRow,
    EventRow,
    PlaceRow,
    RegionRow,
    ThingRow,
)
from world.store.records import Page, page


@dataclass(frozen=True)
class EventFilter:
    """Filters of the event log; ``None`` means "any". Ticks are inclusive."""

    from_tick: int | None = None
    to_tick: int | None = None
    kind: str | None = None
    entity: str | None = None  # "thing:7", "place:0,0:3", "avatar:ann"
    region: str | None = None  # "0,0"
    actor: str | None = None


def list_events(*, session: Session, where: EventFilter, limit: int, cursor: str | None) -> Page:
    stmt = select(EventRow)
    if where.from_tick is not None:
        stmt = stmt.where(EventRow.tick >= where.from_tick)
    if where.to_tick is not None:
        stmt = stmt.where(EventRow.tick <= where.to_tick)
    if where.kind is not None:
        stmt = stmt.where(EventRow.kind == where.kind)
    if where.actor is not None:
        stmt = stmt.where(EventRow.actor == where.actor)
    for entity in (where.entity, f"region:{where.region}" if where.region is not None else None):
        if entity is not None:
            linked = select(EventEntityRow.event_id).where(EventEntityRow.entity == entity)
            stmt = stmt.where(EventRow.id.in_(linked))
    return page(session, stmt, EventRow.id, limit=limit, cursor=cursor)


def events_in_order(*, session: Session, batch: int = 2000) -> Any:
    """Every event in id order, streamed (for replays and exports)."""
    table = EventRow.__table__
    result = session.execute(select(table).order_by(table.c.id).execution_options(yield_per=batch))
    return result.mappings()


def world_at(*, session: Session, tick: int, rules: Rules | None = None) -> MemoryBackend:
    """The world as it stood at ``tick`` (at most the world's own), rebuilt in memory from the
    inputs of every transaction that ended by then; its clock is ``tick``, logged or not.

    A transaction belongs to the tick its events carry; on PostgreSQL, where distant regions
    commit side by side, one that drew a tick at or before ``tick`` and has not committed yet
    is not seen. The cost is a replay of the log up to ``tick``."""
    seed = read_world(session).meta.seed
    table = EventRow.__table__
    later = select(table.c.txn).where(table.c.tick > tick)
    stmt = (
        select(table)
        .where(table.c.tick <= tick, table.c.txn.not_in(later))
        .order_by(table.c.id)
        .execution_options(yield_per=2000)
    )
    backend = MemoryBackend(seed, rules)
    events: Iterable[Mapping[str, Any]] = session.execute(stmt).mappings()  # type: ignore[assignment]
    replay(events, backend)
    backend.meta.tick = tick
    return backend


class Gone(Exception):
    """Raised when the entity existed before the tick asked for but had been removed by then."""


def image_at(*, session: Session, kind: str, entity_id: str, at_tick: int) -> dict[str, Any] | None:
    """The after-image of ``kind`` ("thing" or "place") ``entity_id`` as of ``at_tick``.

    ``None`` when no state event up to that tick names it (it did not exist yet); raises
    :class:`Gone` when the last one removed it.
    """
    entity = f"{kind}:{entity_id}"
    stmt = (
        select(EventRow)
        .join(EventEntityRow, EventEntityRow.event_id == EventRow.id)
        .where(EventEntityRow.entity == entity, EventRow.kind == "state", EventRow.tick <= at_tick)
        .order_by(EventRow.id.desc())
        .limit(1)
    )
    event = session.scalars(stmt).first()
    if event is None:
        return None
    payload = event.payload
    if kind == "thing":
        if int(entity_id) in payload.get("removed", ()):
            raise Gone(entity)
        images = payload.get("things", ())
    else:
        images = payload.get("places", ())
    for image in images:
        if str(image["id"]) == entity_id:
            return dict(image, as_of_tick=event.tick)
    return None


def thing_now(*, session: Session, thing_id: int) -> dict[str, Any] | None:
    table = ThingRow.__table__
    row = session.execute(select(table).where(table.c.id == thing_id)).mappings().first()
    return None if row is None else dict(row)


def place_now(*, session: Session, place_id: str) -> dict[str, Any] | None:
    table = PlaceRow.__table__
    row = session.execute(select(table).where(table.c.id == place_id)).mappings().first()
    if row is None:
        return None
    return {k: v for k, v in row.items() if k not in ("rx", "ry")}


def counts(*, session: Session) -> dict[str, int]:
    """How many regions, places, things and avatars are stored."""
    out = {}
    for name, model in (
        ("regions", RegionRow),
        ("places", PlaceRow),
        ("things", ThingRow),
        ("avatars", AvatarRow),
    ):
        out[name] = session.scalar(select(func.count()).select_from(model)) or 0
    return out


@dataclass(frozen=True)
class RegionSummary:
    """A materialised region with how many places, things and avatars it holds now. Things
    count where they lie (in a container or not); held things travel with their avatar."""

    rx: int
    ry: int
    kind: str
    generated_tick: int
    places: int
    things: int
    avatars: int


def list_regions(*, session: Session, limit: int, cursor: tuple[int, int] | None) -> Page:
    """Regions in (rx, ry) order after ``cursor``, counted in SQL: correlated subqueries run
    only for the page's rows and use the places-by-region, things-by-place and
    avatars-by-place indexes. ``next_cursor`` is ``"rx,ry"`` of the page's last region."""
    stmt = select(
        RegionRow.rx,
        RegionRow.ry,
        RegionRow.kind,
        RegionRow.generated_tick,
        _count_in_region(PlaceRow),
        _count_in_region(ThingRow, ThingRow.place),
        _count_in_region(AvatarRow, AvatarRow.place),
    )
    if cursor is not None:
        rx, ry = cursor
        stmt = stmt.where(or_(RegionRow.rx > rx, and_(RegionRow.rx == rx, RegionRow.ry > ry)))
    rows = session.execute(stmt.order_by(RegionRow.rx, RegionRow.ry).limit(limit + 1)).all()
    items = [RegionSummary(*row) for row in rows[:limit]]
    more = len(rows) > limit
    return Page(items, f"{items[-1].rx},{items[-1].ry}" if more else None)


def _count_in_region(model: type, place: Any = None) -> Any:
    """How many ``model`` rows lie in the enclosing query's region; ``place`` is the column
    naming the place a row lies in (none for places themselves)."""
    stmt = select(func.count()).select_from(model)
    if place is not None:
        stmt = stmt.join(PlaceRow, place == PlaceRow.id)
    return stmt.where(PlaceRow.rx == RegionRow.rx, PlaceRow.ry == RegionRow.ry).scalar_subquery()
