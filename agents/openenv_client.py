"""A typed OpenEnv client for bigworld's ``/openenv`` endpoint (needs the ``interop`` extra).

OpenEnv's own ``GenericEnvClient(base_url=f"{url}/openenv")`` works unchanged with plain
dicts; this client gives the same session pydantic models::

    async with BigWorldOpenEnv(base_url=f"{url}/openenv") as env:
        result = await env.reset(token=token, family="go_to")
        while not result.done:
            result = await env.step(BigWorldAction(action=result.observation.admissible_actions[0]))

``BigWorldOpenEnv(...).sync()`` is the blocking form. The models mirror the server's
(``server/openenv/environment.py``); tests/server/test_openenv.py checks that they agree with
the schemas the server publishes at ``/openenv/schema``.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from world.contract import MAIN_WORLD


class BigWorldAction(Action):
    """One step: the action text, and optionally what a REST step body carries besides."""

    action: str = Field(description="the action, e.g. 'go to kitchen 1' (at most 512 characters)")
    step: int | None = Field(
        None,
        description="the index this step expects to be (from 1); default the session's next. "
        "Resending a step's index and action returns its recorded answer.",
    )
    policy_version: str | None = Field(None, description="model version that chose")
    prompt: str | None = Field(None, description="exact prompt shown")
    completion: str | None = Field(None, description="its answer")
    parse_failed: bool = Field(False, description="the answer could not be parsed")
    mode: str | None = Field(None, description="how the policy chose: rank or generate")
    temperature: float | None = Field(None, description="the temperature it sampled at")
    completion_ids: list[int] | None = Field(None, description="the completion's token ids")


class BigWorldObservation(Observation):
    """What the avatar sees; ``reward`` is the outcome (+1, -1) on the step that ends the
    episode and 0 before it (None at reset), ``done`` whether this step ended it."""

    text: str = Field("", description="the observation text (at reset, with the task)")
    admissible_actions: list[str] = Field(default_factory=list)
    episode_id: int = Field(0, description="the bigworld episode (GET /v1/episodes/{id})")
    step: int = Field(0, description="the step this answers; reset answers step 0")
    tick: int = Field(0, description="the world's tick at this answer")


class BigWorldState(State):
    """The session: its agent, episode, the avatar's place, the world's tick and name."""

    episode_id: int | None = None  # type: ignore[assignment]  # bigworld's ids are integers
    agent: str | None = None
    status: str | None = Field(None, description="open, succeeded, failed or abandoned")
    task_id: str | None = None
    family: str | None = None
    place: str | None = Field(None, description="the avatar's place id")
    place_name: str | None = None
    tick: int | None = None
    world: str = MAIN_WORLD


class BigWorldOpenEnv(EnvClient[BigWorldAction | str, BigWorldObservation, BigWorldState]):
    """OpenEnv's WebSocket client with bigworld's models; ``step`` takes an action or its text.
    ``reset(token=..., family=..., task=..., world=..., episode_id=...)`` as the server takes."""

    def _step_payload(self, action: BigWorldAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            action = BigWorldAction(action=action)
        return action.model_dump(exclude={"metadata"}, exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[BigWorldObservation]:
        observation = BigWorldObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> BigWorldState:
        return BigWorldState(**payload)
