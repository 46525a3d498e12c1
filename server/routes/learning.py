"""GET /v1/metrics/learning: learning curves and continual-learning metrics from history."""

from __future__ import annotations

from fastapi import APIRouter

from server.routes.common import ERRORS

router = APIRouter(prefix="/v1/metrics", tags=["metrics"], responses=ERRORS)
