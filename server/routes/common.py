"""Pieces every router shares: error responses for OpenAPI and the list query parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from server.schemas import ErrorBody

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
    Query(max_length=20, pattern=r"^[0-9]+$", description="next_cursor of the previous page"),
]
Tick = Annotated[int | None, Query(ge=0, le=2**62)]
