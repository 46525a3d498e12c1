"""Liveness and readiness (database reachable, migrations at head). No token needed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from migrations import current_revision, head_revision
from server.dependencies import RuntimeDep
from server.errors import error_body
from world.contract import ErrorCode
from world.schemas import ErrorBody, Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": ErrorBody}})
def readyz(runtime: RuntimeDep) -> Readiness | JSONResponse:
    head = head_revision()
    try:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            revision = current_revision(conn)
    except Exception:
        return JSONResponse(
            error_body(503, "the database is unreachable", code=ErrorCode.DATABASE_UNAVAILABLE), 503
        )
    if revision != head:
        return JSONResponse(
            error_body(
                503,
                f"migrations at {revision}, expected {head}",
                code=ErrorCode.NOT_MIGRATED,
                details={"revision": revision, "head": head},
            ),
            503,
        )
    return Readiness(status="ready", revision=revision, head=head)
