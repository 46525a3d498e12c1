"""Pieces every router shares: error responses for OpenAPI and the typed path and query
parameters (page size, cursors, ids, ticks), each bounded so that no value reaches a query that
the database cannot hold."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import AfterValidator

from world.schemas import ErrorBody

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "malformed request"),
        (401, "missing or bad token"),
        (403, "wrong role or someone else's resource"),
        (404, "not found"),
        (409, "conflict with the current state"),
        (413, "body over 64 KiB"),
        (422, "validation error"),
        (429, "rate limited"),
        (503, "database unavailable"),
    )
}

# The largest integer a BIGINT column (SQLite and PostgreSQL alike) holds: a larger id or
# cursor overflows the driver (OverflowError on SQLite), so it is a 422 before any query.
MAX_ID = 2**63 - 1
# A tick in a query is compared and bucketed; this tighter bound leaves room for that arithmetic.
MAX_TICK = 2**62


def _fits_bigint(cursor: str | None) -> str | None:
    if cursor is not None and int(cursor) > MAX_ID:
        raise ValueError(f"expected an id of at most {MAX_ID}, got {cursor}")
    return cursor


Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Cursor = Annotated[
    str | None,
    Query(
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:,-]*$",
        description="next_cursor of the previous page",
    ),
]
# Lists keyed by an integer id page with the last id seen.
IdCursor = Annotated[
    str | None,
    Query(max_length=19, pattern=r"^[0-9]+$", description="next_cursor of the previous page"),
    AfterValidator(_fits_bigint),
]
Tick = Annotated[int | None, Query(ge=0, le=MAX_TICK)]
AtTick = Annotated[int | None, Query(ge=0, le=MAX_TICK, description="as it was at this tick")]
# A row id in the path (episodes, things) or as a filter (an agent's id).
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
IdQuery = Annotated[int | None, Query(ge=1, le=MAX_ID)]
