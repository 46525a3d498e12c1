"""The OpenEnv session's messages (design §6, "OpenEnv"), defined once: the server's mount
(``server/openenv``) speaks them and the typed client (``agents.openenv_client``) parses them.
They build on openenv-core's base models, so importing this module needs the ``interop`` extra.
"""

from __future__ import annotations

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
