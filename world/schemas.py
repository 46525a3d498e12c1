"""Every request and response body of the HTTP API (design §6) as a pydantic model, defined
once: the server validates and documents with them (so /openapi.json describes them all), and
the client (``agents.client``) parses its answers with them. Requests are strict: no type
coercion, no unknown fields."""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from world.contract import WORLD_NAME

MAX_ACTION_CHARS = 512  # same limit as world.actions; longer is a 422 before the world sees it
MAX_PROMPT_CHARS = 48 * 1024  # a step body stays under the 64 KiB request limit
MAX_COMPLETION_CHARS = 8 * 1024
MAX_COMPLETION_TOKENS = 1024  # ids of a longer answer are not sent (the body stays < 64 KiB)
MAX_OPEN_EPISODES = 4096  # the most episodes an admin may let one policy agent hold open at once
MAX_BATCH_STEPS = 256  # steps in one POST /v1/steps
Role = Literal["admin", "policy", "reward", "trainer", "observer"]
Status = Literal["open", "succeeded", "failed", "abandoned"]
# How a model chose: ranking the candidates (scores of each after the prompt) or generating text.
DecodeMode = Literal["rank", "generate"]
# The sampling temperature it chose at: 0 is greedy; finite, as a trainer divides by it.
Temperature = Annotated[float, Field(ge=0.0, le=1000.0, allow_inf_nan=False)]
# The token ids a generated answer sampled, so that the trainer need not re-tokenise its text
# (decoded text does not always encode back to the ids it came from).
TokenIds = Annotated[
    list[Annotated[int, Field(ge=0, lt=2**31)]],
    Field(max_length=MAX_COMPLETION_TOKENS, description="token ids of a generated answer"),
]
T = TypeVar("T")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, or half of a surrogate pair


def _unstorable(value: Any) -> str | None:
    """The first string in ``value`` (a dict's keys and values, a list's items, nested) that a
    database cannot store, or None: PostgreSQL text refuses NUL (SQLite keeps it), and no
    driver encodes a lone surrogate as UTF-8."""
    if isinstance(value, str):
        return value if _UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        for item in value:
            if (found := _unstorable(item)) is not None:
                return found
    return None


def storable(value: T, name: str = "text") -> T:
    """``value`` itself when every string in it can be stored, else a ``ValueError`` (a 422).
    Request bodies are held to this while they are parsed, before any world work, so both
    databases refuse the same bodies and a refused one changes nothing."""
    if (found := _unstorable(value)) is not None:
        raise ValueError(f"expected {name} without NUL or lone surrogates, got {found[:80]!r}")
    return value


class Request(BaseModel):
    """A request body: strict, no unknown fields, and every string in it :func:`storable`."""

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="after")
    def _storable(self) -> Self:
        for name, value in self:
            storable(value, name)
        return self


# A free-form JSON body (the forge's config patch) held to the same rule.
StorableJson = Annotated[dict[str, Any], AfterValidator(storable)]


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
    max_open_episodes: int = Field(
        1,
        ge=1,
        le=MAX_OPEN_EPISODES,
        description="policy agents: episodes it may hold open at once, each played by an avatar "
        "of its own (the first is named like the agent, the others NAME.2, NAME.3, ...); one "
        "more begin is refused with 429 open_episode_limit (409 episode_open at 1)",
    )


class AgentInfo(BaseModel):
    """The agent a token is (``GET /v1/agents/me``)."""

    model_config = ConfigDict(from_attributes=True)  # read from an agent row or a caller

    id: int
    name: str
    role: Role
    avatar_id: str | None
    max_open_episodes: int


class AgentCreated(AgentInfo):
    token: str = Field(description="shown only this once; stored hashed")


class AgentRevoked(BaseModel):
    id: int
    name: str
    role: Role
    avatar_id: str | None
    revoked_at: float = Field(description="unix seconds; the token is refused from then on")


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
    # SHA-256 of the logical state (world.state.World.state_hash): every stored entity, things
    # settled to ``tick``; equal for equal states, whichever database or replay holds them.
    # Answered for a past tick, and for the present when asked (?hash=true); else null.
    state_hash: str | None


# -- worlds (forks) ------------------------------------------------------------------------
WorldName = Annotated[str, Field(pattern=WORLD_NAME, max_length=32)]


class ForkCreate(Request):
    from_: WorldName = Field(alias="from", description="the world forked: main or a fork")
    at_tick: int = Field(ge=0, le=2**62, description="the fork is that world at the end of it")
    name: WorldName | None = Field(None, description="generated when absent")
    hash: bool = Field(
        True,
        description="answer the fork's state hash (a read of the whole world, which costs what "
        "the world holds); false makes a fork cost only what it changes",
    )


class ForkOut(BaseModel):
    name: str
    parent: str
    at_tick: int
    tick: int
    state_hash: str | None = Field(
        description="the fork's, equal to the parent's at at_tick; null when not asked for"
    )
    created_at: float = Field(description="unix seconds")


class ForkDeleted(BaseModel):
    name: str
    parent: str
    at_tick: int
    created_at: float


class WorldSize(BaseModel):
    rows: int = Field(description="entity rows the world's own store holds")
    events: int = Field(description="events of its own log")


class WorldListed(BaseModel):
    name: str
    parent: str | None = Field(description="null for main")
    at_tick: int | None = Field(description="the parent's tick it was forked at; null for main")
    tick: int
    created_at: float | None
    size: WorldSize


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


TaskStatus = Literal["active", "pending", "retired"]


class TaskDetail(TaskOut):
    created_tick: int
    stats: TaskStats
    status: TaskStatus = Field(description="its place in the forge's pool")
    origin: str = Field(description="sampled, requested, probe, harder or easier")
    parent_id: str | None = Field(description="the task this one is a variant of")
    reason: str | None = Field(description="why it was admitted, or why its status last changed")
    probe: bool = Field(description="in the fixed probe set (never mutated or retired)")
    difficulty: int | None = Field(description="the oracle's plan length when admitted")
    accuracy: float | None = Field(
        description="the critic's accuracy over its recent rollouts at the last forge cycle"
    )
    rollouts: int = Field(description="ended rollouts that accuracy was measured over")
    status_tick: int | None = Field(description="tick of its last status change")


class DecisionOut(BaseModel):
    id: int
    cycle: int
    tick: int
    kind: str = Field(description="task.harder, task.easier, task.trial, task.retire, task.probe, world.*")  # fmt: skip
    task_id: str | None = Field(description="the task judged")
    candidate_id: str | None = Field(description="the variant proposed or tried")
    verdict: str
    evidence: dict[str, Any]


class TaskWithDecisions(TaskDetail):
    decisions: list[DecisionOut] = Field(description="forge decisions about it, oldest first")


# -- episodes ------------------------------------------------------------------------------
class EpisodeBegin(Request):
    task_id: str | None = Field(None, max_length=64)
    family: str | None = Field(None, max_length=32)
    task: dict[str, Any] | None = Field(
        None,
        description='a task spec {"family": ..., "params": {...}} to do (added to the pool as '
        "requested when new); exclusive with task_id",
    )


class EpisodeStarted(BaseModel):
    episode_id: int
    task: TaskOut
    observation: str
    admissible_actions: list[str]
    tick: int


class StepIn(Request):
    step: int = Field(ge=1, le=1_000_000, description="the index this step expects to be (from 1)")
    action: str = Field(min_length=1, max_length=MAX_ACTION_CHARS)
    # What the trainer needs later; optional so that any client can step.
    policy_version: str | None = Field(None, max_length=128, description="model version that chose")
    prompt: str | None = Field(None, max_length=MAX_PROMPT_CHARS, description="exact prompt shown")
    completion: str | None = Field(None, max_length=MAX_COMPLETION_CHARS, description="its answer")
    parse_failed: bool = Field(
        False, description="the answer could not be parsed; action fell back"
    )
    mode: DecodeMode | None = Field(None, description="how the policy chose: rank or generate")
    temperature: Temperature | None = Field(None, description="the temperature it sampled at")
    completion_ids: TokenIds | None = None


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
    policy_version: str | None
    prompt: str | None
    completion: str | None
    parse_failed: bool
    mode: DecodeMode | None
    temperature: float | None
    completion_ids: list[int] | None
    distance: int | None = Field(description="oracle plan length after the step, when recorded")


class BatchStepIn(StepIn):
    """One step of a batch (``POST /v1/steps``): a step body and the episode it is of."""

    episode_id: int = Field(ge=1, lt=2**63, description="the episode this step is of")


class StepAnswer(BaseModel):
    """One step's answer in a batch: the status it would have had alone, and its result (200)
    or its error (any other status)."""

    status: int = Field(description="200, or the status of the step's error")
    result: StepOut | None = None
    error: ErrorDetail | None = None


class StepsOut(BaseModel):
    items: list[StepAnswer] = Field(description="one answer per step sent, in the order sent")


class JudgmentIn(Request):
    step: int = Field(ge=1, le=1_000_000)
    vote: int = Field(
        0, ge=0, le=63, description="j of the m votes on this step; a slot is filled once"
    )
    score: Literal[-1, 0, 1]
    rationale: str = Field("", max_length=8192)
    model_version: str = Field(max_length=128)
    mode: DecodeMode | None = Field(None, description="how the judge chose: rank or generate")
    temperature: Temperature | None = Field(None, description="the temperature it sampled at")
    completion_ids: TokenIds | None = None


class JudgmentOut(BaseModel):
    id: int
    step: int
    vote: int
    score: int
    rationale: str
    model_version: str
    mode: DecodeMode | None
    temperature: float | None
    completion_ids: list[int] | None
    agent_id: int


class JudgmentsAccepted(BaseModel):
    accepted: int
    duplicates: int = Field(description="judgments whose (step, vote) slot was already filled")
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
    distance: int | None = Field(description="oracle plan length at begin, when recorded")
    steps: list[StepRecord]
    judgments: list[JudgmentOut]


class ExpertHint(BaseModel):
    episode_id: int
    step: int = Field(description="the step index the advice is for")
    action: str | None = Field(description="the oracle's next action; null when it finds no plan")
    plan_length: int | None
    tick: int


# -- model registry ------------------------------------------------------------------------
ModelKind = Literal["policy", "reward"]


class PolicyIn(Request):
    kind: ModelKind
    path: str = Field(min_length=1, max_length=4096, description="where the weights are")
    parent: int | None = Field(
        None, ge=1, le=2**31 - 1, description="the version this one was trained from"
    )
    config: dict[str, Any] = Field(default_factory=dict, description="the run's configuration")
    metrics: dict[str, Any] = Field(default_factory=dict, description="its training figures")


class PolicyOut(BaseModel):
    kind: ModelKind
    version: int
    path: str
    parent: int | None
    config: dict[str, Any]
    metrics: dict[str, Any]
    agent_id: int
    created_tick: int


# -- regions -------------------------------------------------------------------------------
class RegionOut(BaseModel):
    rx: int
    ry: int = Field(description="north is +ry, east is +rx")
    kind: str = Field(description="village, farm, forest, mine, lake, market, …")
    generated_tick: int = Field(description="tick at which it was first generated")
    places: int
    things: int = Field(description="things lying in its places (held things are not counted)")
    avatars: int


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


# -- the forge -------------------------------------------------------------------------------
class ForgeInfo(BaseModel):
    enabled: bool = Field(description="the server runs forge cycles (setting forge_enabled)")
    interval_s: float = Field(description="seconds between automatic cycles")
    paused: bool
    cycle: int = Field(description="cycles run so far")
    draws: int = Field(description="episode begins that drew from the pool so far")
    config: dict[str, Any]


class CycleOut(BaseModel):
    cycle: int
    decisions: list[DecisionOut]
