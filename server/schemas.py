"""Every request and response body of the HTTP API as a pydantic model (so /openapi.json
describes them all). Requests are strict: no type coercion, no unknown fields."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

MAX_ACTION_CHARS = 512  # same limit as world.actions; longer is a 422 before the world sees it
Role = Literal["admin", "policy", "reward", "trainer", "observer"]
Status = Literal["open", "succeeded", "failed", "abandoned"]
T = TypeVar("T")


class Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(
        None, description="pass as `cursor` for the next page; null at the end"
    )


# -- health --------------------------------------------------------------------------------
class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    revision: str | None
    head: str


# -- agents --------------------------------------------------------------------------------
class AgentCreate(Request):
    name: str = Field(
        pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="lowercase; also the avatar's name"
    )
    role: Role


class AgentCreated(BaseModel):
    id: int
    name: str
    role: Role
    avatar_id: str | None
    token: str = Field(description="shown only this once; stored hashed")


# -- world ---------------------------------------------------------------------------------
class WorldInfo(BaseModel):
    seed: int
    tick: int
    season: str
    day: bool
    rules_version: int
    regions: int
    places: int
    things: int
    avatars: int


# -- tasks ---------------------------------------------------------------------------------
class TaskOut(BaseModel):
    id: str
    family: str
    params: dict[str, Any]
    text: str


class TaskStats(BaseModel):
    episodes: int
    open: int
    succeeded: int
    failed: int
    abandoned: int
    success_rate: float | None = Field(
        description="succeeded / ended episodes; null before any ended"
    )


class TaskDetail(TaskOut):
    created_tick: int
    stats: TaskStats


# -- episodes ------------------------------------------------------------------------------
class EpisodeBegin(Request):
    task_id: str | None = Field(None, max_length=64)
    family: str | None = Field(None, max_length=32)


class EpisodeStarted(BaseModel):
    episode_id: int
    task: TaskOut
    observation: str
    admissible_actions: list[str]
    tick: int


class StepIn(Request):
    step: int = Field(ge=1, le=1_000_000, description="the index this step expects to be (from 1)")
    action: str = Field(min_length=1, max_length=MAX_ACTION_CHARS)


class StepOut(BaseModel):
    step: int
    observation: str
    admissible_actions: list[str]
    done: bool
    success: bool
    outcome: int | None
    tick: int


class StepRecord(StepOut):
    action: str


class JudgmentIn(Request):
    step: int = Field(ge=1, le=1_000_000)
    score: Literal[-1, 0, 1]
    rationale: str = Field("", max_length=8192)
    model_version: str = Field(max_length=128)


class JudgmentOut(BaseModel):
    id: int
    step: int
    score: int
    rationale: str
    model_version: str
    agent_id: int


class JudgmentsAccepted(BaseModel):
    accepted: int
    judgments: list[JudgmentOut]


class EpisodeOut(BaseModel):
    id: int
    agent_id: int
    avatar_id: str
    task: TaskOut
    family: str
    status: Status
    outcome: int | None
    budget: int
    last_step: int
    begin_tick: int
    end_tick: int | None


class EpisodeDetail(EpisodeOut):
    observation: str = Field(description="the step-0 observation answered at begin")
    admissible_actions: list[str]
    steps: list[StepRecord]
    judgments: list[JudgmentOut]


# -- history -------------------------------------------------------------------------------
class EventOut(BaseModel):
    id: int
    txn: int
    tick: int
    kind: str
    actor: str | None
    entities: list[str]
    payload: dict[str, Any]


class ThingOut(BaseModel):
    id: int
    type: str
    kind: str
    num: int
    label: str
    place: str | None
    container: int | None
    holder: str | None
    attrs: dict[str, Any]
    tick: int
    as_of_tick: int | None = Field(None, description="tick of the state event read (time travel)")


class PlaceOut(BaseModel):
    id: str
    kind: str
    name: str
    exits: dict[str, str]
    outdoor: bool
    attrs: dict[str, Any]
    as_of_tick: int | None = None
