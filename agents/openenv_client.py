"""A typed OpenEnv client for bigworld's ``/openenv`` endpoint (needs the ``interop`` extra).

OpenEnv's own ``GenericEnvClient(base_url=f"{url}/openenv")`` works unchanged with plain
dicts; this client gives the same session pydantic models::

    async with BigWorldOpenEnv(base_url=f"{url}/openenv") as env:
        result = await env.reset(token=token, family="go_to")
        while not result.done:
            result = await env.step(BigWorldAction(action=result.observation.admissible_actions[0]))

``BigWorldOpenEnv(...).sync()`` is the blocking form. Its models are the server's own
(``world.openenv_schemas``).
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from world.openenv_schemas import BigWorldAction, BigWorldObservation, BigWorldState


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
