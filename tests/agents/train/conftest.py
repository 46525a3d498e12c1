"""Fixtures for the trainer tests: private copies of the session's tiny models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def models(tiny_models: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """Copies a test may change (the trainer never writes into them, but be safe)."""
    out = {}
    for kind, path in tiny_models.items():
        out[kind] = Path(shutil.copytree(path, tmp_path / f"start-{kind}"))
    return out
