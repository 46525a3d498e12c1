"""Fixtures for the agent tests: one live server for the session, and a fresh agent per test."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.client import BigWorldClient
from agents.models.tiny import ModelSpec, init_model
from world.schemas import AgentCreated

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ is not a package
from live import LiveServer, live_server  # noqa: E402

STEP_BUDGET = 12


def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # A short step budget, so that a test can run an episode out of steps.
    env = {"BIGWORLD_STEP_BUDGET": str(STEP_BUDGET)}
    with live_server(tmp_path_factory.mktemp("bigworld-agents"), env=env) as running:
        yield running


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serve(tmp_path_factory)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server for one module, whose play would change what other modules' draws meet (go_to
    episodes by the dozen fill the pool with go_to tasks of a 2-step budget): the module
    defines a ``server`` fixture of module scope that returns it."""
    yield from serve(tmp_path_factory)


@pytest.fixture
def admin(server: LiveServer) -> Iterator[BigWorldClient]:
    with BigWorldClient(server.url, server.admin_token) as client:
        yield client


@pytest.fixture
def quiet_forge(server: LiveServer) -> Iterator[None]:
    """The server's forge paused for one test: a background cycle changes the main world (its
    dynamics), so a test that compares main's state hash before and after would race it."""
    with server.client(server.admin_token) as http:
        assert http.post("/v1/forge/pause").json()["paused"] is True
        try:
            yield
        finally:
            http.post("/v1/forge/resume")


@pytest.fixture
def make_agent(admin: BigWorldClient) -> Callable[..., AgentCreated]:
    """Register a new agent of a role (default policy): its own avatar, no episode open."""

    def make(role: str = "policy") -> AgentCreated:
        return admin.create_agent(f"{role}-{uuid.uuid4().hex[:8]}", role)

    return make


@pytest.fixture
def agent(make_agent: Callable[..., AgentCreated]) -> AgentCreated:
    return make_agent()


@pytest.fixture
def client(server: LiveServer, agent: AgentCreated) -> Iterator[BigWorldClient]:
    with BigWorldClient(server.url, agent.token) as policy:
        yield policy


# Tiny models for agent and trainer tests, built once per session (training the tokenizer
# on the world's corpus takes seconds).
TINY = ModelSpec(
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
    return {kind: init_model(kind, root / kind, TINY) for kind in ("policy", "reward")}
