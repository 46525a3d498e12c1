"""GET /v1/regions: the materialised regions, for maps."""

from __future__ import annotations

from fastapi import APIRouter

from server.routes.common import ERRORS

router = APIRouter(prefix="/v1/regions", tags=["world"], responses=ERRORS)
