"""Prometheus text exposition at /metrics (no token, as scrapers expect)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from server.dependencies import RuntimeDep, SessionDep
from world.store import read_world
from world.store.history import counts

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(runtime: RuntimeDep, session: SessionDep) -> PlainTextResponse:
    gauges: dict[str, float] = {}
    try:
        gauges["world_tick"] = read_world(session).meta.tick
        gauges.update({f"world_{k}": v for k, v in counts(session=session).items()})
    except Exception:
        gauges["database_up"] = 0
    else:
        gauges["database_up"] = 1
    return PlainTextResponse(runtime.metrics.render(gauges), media_type="text/plain; version=0.0.4")
