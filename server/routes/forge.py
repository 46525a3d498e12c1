"""The forge's routes (design §6): its decisions, a cycle now, pause, resume, configuration."""

from __future__ import annotations

from fastapi import APIRouter

from server.routes.common import ERRORS

router = APIRouter(prefix="/v1/forge", tags=["forge"], responses=ERRORS)
