"""The dashboard page at ``/``."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["dashboard"])
