"""Fixtures for the trainer tests: tiny models built once per session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agents.models.tiny import ModelSpec, init_model

SPEC = ModelSpec(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=2048,
    vocab_size=512,
)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {kind: init_model(kind, root / kind, SPEC) for kind in ("policy", "reward")}


@pytest.fixture
def models(tiny_models: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """Copies a test may change (the trainer never writes into them, but be safe)."""
    out = {}
    for kind, path in tiny_models.items():
        out[kind] = Path(shutil.copytree(path, tmp_path / f"start-{kind}"))
    return out
