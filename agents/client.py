"""A typed HTTP client for the bigworld server (design §6): sync and async, with safe retries.

Every route is defined once, as a small generator ("flow") that yields the :class:`Request` it
needs and reads the :class:`Reply`; :class:`BigWorldClient` and :class:`AsyncBigWorldClient`
only differ in how they send a request. Retries (jittered exponential backoff for up to
``RetryPolicy.budget_s``, 30 s by default, long enough for a server to come back after a crash;
``Retry-After`` on 429 and 503) are safe because the server makes the calls that matter
idempotent:

- a step carries its index, so a resent step is either applied once or answered from the record;
- a resent ``POST /v1/episodes`` whose first try was applied meets a 409 "episode already open",
  and the client answers with that open episode instead of opening a second one;
- a resent abandon whose first try was applied meets a 409 and is answered from the record.

Calls that are not idempotent (``create_agent``, ``post_judgments``) are resent only when the
server cannot have applied them: a refused connection, a 429 or a 503.

:class:`StepBatcher` gathers the steps that concurrent tasks take with one async client into
``POST /v1/steps`` batches.

The answers it types are the server's own response models (``world.schemas``: ``TaskOut``,
``EpisodeStarted``, ``StepOut``, ``AgentCreated``); the records it passes through as JSON
(episodes, events, things) are described by the same module.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from agents.errors import ClientError, ConflictError, UnreachableError, error_for
from world.contract import DEFAULT_SERVER, MAIN_WORLD, WORLD_PATHS
from world.schemas import (
    MAX_BATCH_STEPS,
    AgentCreated,
    AgentInfo,
    EpisodeStarted,
    StepOut,
    StepsOut,
    TaskOut,
)

T = TypeVar("T")
Id = int | str
Record = dict[str, Any]
"""A server-defined record passed through as decoded JSON: an episode, event, thing, place, task."""


# --- requests, replies and retries ----------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One HTTP request. ``resendable``: safe to send again after the server may have applied it
    (the flow that sent it knows how to read a replay). ``retry``: retry at all."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    resendable: bool = True
    retry: bool = True


@dataclass(frozen=True)
class Reply:
    """The final answer to a request. ``maybe_applied``: an earlier try of the same request may
    have been applied by the server before its answer was lost."""

    status: int
    body: Any
    text: str
    maybe_applied: bool = False


Flow = Generator[Request, Reply, T]

# Connection failures where the request never reached the server.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often a request is retried (when its flags allow it at all).

    Retries go on until ``budget_s`` seconds have passed since the first try: the default
    outlasts a server's restart after a crash (5–7 s after kill -9 on SQLite). Before retry n
    the client waits ``base_delay * 2**(n-1)`` seconds, at most ``max_delay``, shortened by a
    random fraction of up to ``jitter`` so that clients cut off together do not come back in
    step; a ``Retry-After`` answer wins, and a retry it would push past the budget is not
    made. The last wait is cut to end at the budget. ``attempts`` caps the tries as well."""

    budget_s: float = 30.0  # seconds from the first try; no retry starts after it
    base_delay: float = 0.1  # seconds before the first retry
    max_delay: float = 2.0  # seconds; the longest wait between two tries (Retry-After aside)
    jitter: float = 0.5  # a fraction: each wait is drawn in [1 - jitter, 1] times its backoff
    attempts: int | None = None  # tries in all, the first included; None: as the budget allows

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``retry`` (1 for the first), before the budget's cut."""
        if retry_after is not None:
            return max(retry_after, 0.0)
        backoff = min(self.base_delay * 2 ** (retry - 1), self.max_delay)
        return backoff * (1 - self.jitter * random.random())

    def wait(self, retry: int, elapsed: float, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry ``retry``, ``elapsed`` seconds after the first try;
        None when the request is to be given up."""
        if self.attempts is not None and retry >= self.attempts:
            return None
        left = self.budget_s - elapsed
        delay = self.delay(retry, retry_after)
        if left <= 0 or (retry_after is not None and delay > left):
            return None
        return min(delay, left)


def _judge_error(request: Request, exc: httpx.TransportError) -> tuple[bool, bool]:
    """(retry?, may the server have applied it?) after a transport failure."""
    if isinstance(exc, httpx.UnsupportedProtocol):  # a URL without http(s)://: never will be
        return False, False
    if isinstance(exc, _NOT_SENT):
        return request.retry, False
    return request.retry and request.resendable, True


def _judge_status(request: Request, status: int) -> tuple[bool, bool]:
    """(retry?, may the server have applied it?) after an HTTP answer."""
    if status in (429, 503):  # refused before anything was applied
        return request.retry, False
    if status >= 500:
        return request.retry and request.resendable, True
    return False, False


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:  # the HTTP-date form
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _reply(response: httpx.Response, maybe_applied: bool) -> Reply:
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    return Reply(response.status_code, body, response.text, maybe_applied)


def _unreachable(
    request: Request, exc: Exception, maybe_applied: bool, tries: int, elapsed: float
) -> UnreachableError:
    applied = " (it may have been applied)" if maybe_applied else ""
    return UnreachableError(
        f"no answer to {request.method} {request.path}{applied} after {tries} "
        f"{'try' if tries == 1 else 'tries'} in {elapsed:.1f} s: {exc!r}"
    )


# --- the routes, once ------------------------------------------------------------------------


def _expect(reply: Reply) -> Any:
    if reply.status >= 400:
        raise error_for(reply.status, reply.body, reply.text)
    return reply.body


def _call(request: Request) -> Flow[Any]:
    reply = yield request
    return _expect(reply)


def _probe(path: str) -> Flow[bool]:
    reply = yield Request("GET", path, retry=False)
    return reply.status < 300


def _given(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _recorded_step(detail: Record, step: int, action: str) -> Record | None:
    for row in detail.get("steps") or ():
        if row["step"] == step and row["action"] == action:
            return row
    return None


def _start_from_detail(detail: Record) -> EpisodeStarted:
    """An :class:`EpisodeStarted` for an open episode read back with ``GET /v1/episodes/{id}``:
    its task and latest observation (step 0's, or the last acknowledged step's)."""
    steps = detail.get("steps") or []
    latest = steps[-1] if steps else detail
    return EpisodeStarted(
        episode_id=detail["id"],
        task=TaskOut.model_validate(detail["task"]),
        observation=latest["observation"],
        admissible_actions=latest["admissible_actions"],
        tick=latest["tick"] if steps else detail["begin_tick"],
    )


def _begin_flow(
    task_id: Id | None, family: str | None, task: Record | None = None
) -> Flow[EpisodeStarted]:
    body = _given(task_id=task_id, family=family, task=task)
    reply = yield Request("POST", "/v1/episodes", json=body)
    if reply.status == 409 and reply.maybe_applied:
        # Our own earlier try may have opened it: the 409 "episode_open" names the open episode.
        error = reply.body.get("error") if isinstance(reply.body, dict) else None
        details = error.get("details") if isinstance(error, dict) else None
        if isinstance(details, dict) and details.get("episode_id") is not None:
            detail = yield from _call(Request("GET", f"/v1/episodes/{details['episode_id']}"))
            return _start_from_detail(detail)
    return EpisodeStarted.model_validate(_expect(reply))


def _step_flow(
    episode_id: Id, step: int, action: str, record: Record | None = None
) -> Flow[StepOut]:
    # ``record``: what the trainer needs later (policy_version, prompt, completion,
    # parse_failed, mode, temperature); stored with the step.
    body = {**(record or {}), "step": step, "action": action}
    reply = yield Request("POST", f"/v1/episodes/{episode_id}/steps", json=body)
    if reply.status == 409 and reply.maybe_applied:
        # Our earlier try was applied (and perhaps ended the episode): read the recorded answer.
        detail = yield from _call(Request("GET", f"/v1/episodes/{episode_id}"))
        recorded = _recorded_step(detail, step, action)
        if recorded is not None:
            return StepOut.model_validate(recorded)
    return StepOut.model_validate(_expect(reply))


def _steps_flow(steps: Sequence[Record]) -> Flow[list[StepOut | ClientError]]:
    # Resent as a whole after a lost answer: each step is idempotent by its index, so the
    # steps applied the first time are answered from the record.
    reply = yield Request("POST", "/v1/steps", json=list(steps))
    answers = StepsOut.model_validate(_expect(reply)).items
    return [
        answer.result
        if answer.result is not None
        else error_for(
            answer.status, {"error": answer.error.model_dump() if answer.error else None}
        )
        for answer in answers
    ]


def _abandon_flow(episode_id: Id) -> Flow[Record]:
    reply = yield Request("POST", f"/v1/episodes/{episode_id}/abandon")
    if reply.status == 409 and reply.maybe_applied:
        detail = yield from _call(Request("GET", f"/v1/episodes/{episode_id}"))
        if detail.get("status") != "open":
            return detail
    return _expect(reply)


def _create_agent_flow(name: str, role: str, max_open_episodes: int | None) -> Flow[AgentCreated]:
    asked = {"name": name, "role": role, **_given(max_open_episodes=max_open_episodes)}
    body = yield from _call(Request("POST", "/v1/agents", json=asked, resendable=False))
    return AgentCreated.model_validate(body)


def _me_flow() -> Flow[AgentInfo]:
    body = yield from _call(Request("GET", "/v1/agents/me"))
    return AgentInfo.model_validate(body)


def _judgments_flow(episode_id: Id, judgments: list[Record]) -> Flow[Any]:
    return _call(
        Request("POST", f"/v1/episodes/{episode_id}/judgments", json=judgments, resendable=False)
    )


def _at(at_tick: int | None) -> dict[str, Any]:
    return _given(at_tick=at_tick)


def _fork_request(source: str, at_tick: int, name: str | None, state_hash: bool) -> Request:
    # Not resent: a fork made before a lost answer would meet its own name (409).
    body = {"from": source, "at_tick": at_tick, **_given(name=name)}
    if not state_hash:
        body["hash"] = False
    return Request("POST", "/v1/worlds", json=body, resendable=False)


def _world_request(at_tick: int | None, state_hash: bool) -> Request:
    return Request(
        "GET", "/v1/world", params={**_at(at_tick), **({"hash": "true"} if state_hash else {})}
    )


# --- the two clients -------------------------------------------------------------------------


@dataclass
class _Settings:
    base_url: str
    token: str | None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    world: str = MAIN_WORLD

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def path(self, path: str) -> str:
        """``path`` in this client's world: ``/v1/episodes`` is ``/v1/worlds/W/episodes``."""
        ours = any(path == route or path.startswith(route + "/") for route in WORLD_PATHS)
        if self.world == MAIN_WORLD or not ours:  # /v1/worlds is not /v1/world
            return path
        return f"/v1/worlds/{self.world}/" + path.removeprefix("/v1/")


class BigWorldClient:
    """A blocking client for one token. Use as a context manager or call :meth:`close`.

    ``world`` names the world it plays in and reads: ``main`` (the default) or a fork; the
    agents, policies and worlds routes are the same in every world.

    ``retry`` says how long a request is retried (``RetryPolicy(budget_s=60)``; the default
    retries for 30 s); ``timeout`` bounds each try. ``sleep`` and ``clock`` (monotonic
    seconds) are for tests."""

    def __init__(
        self,
        base_url: str = DEFAULT_SERVER,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        world: str = MAIN_WORLD,
    ) -> None:
        self.settings = _Settings(base_url.rstrip("/"), token, retry or RetryPolicy(), world)
        self._http = httpx.Client(
            base_url=self.settings.base_url,
            timeout=timeout,
            headers=self.settings.headers(),
            transport=transport,
        )
        self._sleep, self._clock = sleep, clock

    def __enter__(self) -> BigWorldClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, request: Request) -> Reply:
        """Send one request, retrying as its flags and the :class:`RetryPolicy` allow."""
        policy, maybe_applied, started = self.settings.retry, False, self._clock()
        for tries in itertools.count(1):
            try:
                response = self._http.request(
                    request.method,
                    self.settings.path(request.path),
                    params=request.params,
                    json=request.json,
                )
            except httpx.TransportError as exc:
                retry, applied = _judge_error(request, exc)
                maybe_applied |= applied
                elapsed = self._clock() - started
                wait = policy.wait(tries, elapsed) if retry else None
                if wait is None:
                    raise _unreachable(request, exc, maybe_applied, tries, elapsed) from exc
                self._sleep(wait)
                continue
            retry, applied = _judge_status(request, response.status_code)
            elapsed = self._clock() - started
            wait = policy.wait(tries, elapsed, _retry_after(response)) if retry else None
            if wait is None:
                return _reply(response, maybe_applied)
            maybe_applied |= applied
            self._sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    def run(self, flow: Flow[T]) -> T:
        """Drive a flow to its result, sending each request it yields."""
        try:
            request = next(flow)
            while True:
                request = flow.send(self.send(request))
        except StopIteration as stop:
            return stop.value

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[Record]:
        params = _given(**params)
        while True:
            page = self.run(_call(Request("GET", path, params=params)))
            yield from page["items"]
            if not page.get("next_cursor"):
                return
            params = {**params, "cursor": page["next_cursor"]}

    def healthz(self) -> bool:
        return self.run(_probe("/healthz"))

    def readyz(self) -> bool:
        return self.run(_probe("/readyz"))

    def world(self, at_tick: int | None = None, *, state_hash: bool = False) -> Record:
        """The world now, or as it was at the end of ``at_tick`` (with its ``state_hash``);
        the present's hash when asked, as it costs the server a read of the whole world."""
        return self.run(_call(_world_request(at_tick, state_hash)))

    def create_agent(
        self, name: str, role: str, *, max_open_episodes: int | None = None
    ) -> AgentCreated:
        """Register an agent (admin); a policy agent may be let hold ``max_open_episodes``
        open at once (the server's default: 1)."""
        return self.run(_create_agent_flow(name, role, max_open_episodes))

    def me(self) -> AgentInfo:
        """The agent this client's token is (its id, role, avatar, open-episode limit)."""
        return self.run(_me_flow())

    def revoke_agent(self, agent_id: Id) -> Record:
        """Refuse the agent's token from now on (admin); resending it changes nothing."""
        return self.run(_call(Request("DELETE", f"/v1/agents/{agent_id}")))

    def begin_episode(
        self, task_id: Id | None = None, family: str | None = None, task: Record | None = None
    ) -> EpisodeStarted:
        """Open an episode: of the pool's task ``task_id``, of the task spec ``task``
        (``{"family", "params"}``, added to the pool when new), or drawn (of ``family``)."""
        return self.run(_begin_flow(task_id, family, task))

    def step(self, episode_id: Id, step: int, action: str, record: Record | None = None) -> StepOut:
        return self.run(_step_flow(episode_id, step, action, record))

    def step_many(self, steps: Sequence[Record]) -> list[StepOut | ClientError]:
        """Up to 256 steps of this agent's open episodes in one request (``POST /v1/steps``),
        each ``{episode_id, step, action, ...}`` as :meth:`step`'s body with its episode. The
        answers, in order: each step's result, or the error it was refused with, returned
        rather than raised. A batch the server refuses whole (too many steps) raises."""
        return self.run(_steps_flow(steps))

    def abandon(self, episode_id: Id) -> Record:
        return self.run(_abandon_flow(episode_id))

    def episode(self, episode_id: Id) -> Record:
        return self.run(_call(Request("GET", f"/v1/episodes/{episode_id}")))

    def fork_world(
        self, source: str, at_tick: int, name: str | None = None, *, state_hash: bool = True
    ) -> Record:
        """Fork world ``source`` (``main`` or a fork) at the end of ``at_tick`` (admin); with
        ``state_hash=False`` the answer carries no hash, and the fork costs what it changes."""
        return self.run(_call(_fork_request(source, at_tick, name, state_hash)))

    def worlds(self, *, page_size: int | None = None) -> Iterator[Record]:
        """The main world, then its forks by name."""
        return self._pages("/v1/worlds", {"limit": page_size})

    def delete_world(self, name: str) -> Record:
        return self.run(_call(Request("DELETE", f"/v1/worlds/{name}")))

    def episodes(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]:
        """Every episode matching ``filters`` (the route's query parameters), page by page."""
        return self._pages("/v1/episodes", {**filters, "limit": page_size})

    def events(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]:
        """Every event matching ``filters`` (the route's query parameters), page by page."""
        return self._pages("/v1/events", {**filters, "limit": page_size})

    def thing(self, thing_id: Id, at_tick: int | None = None) -> Record:
        return self.run(_call(Request("GET", f"/v1/things/{thing_id}", params=_at(at_tick))))

    def place(self, place_id: Id, at_tick: int | None = None) -> Record:
        return self.run(_call(Request("GET", f"/v1/places/{place_id}", params=_at(at_tick))))

    def tasks(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]:
        return self._pages("/v1/tasks", {**filters, "limit": page_size})

    def task(self, task_id: Id) -> Record:
        return self.run(_call(Request("GET", f"/v1/tasks/{task_id}")))

    def post_judgments(self, episode_id: Id, judgments: list[Record]) -> Any:
        return self.run(_judgments_flow(episode_id, judgments))

    def resume(self, episode_id: Id) -> tuple[EpisodeStarted, list[Record]]:
        """An open episode as it stands (its latest observation) and its steps so far."""
        detail = self.episode(episode_id)
        return _start_from_detail(detail), list(detail.get("steps") or ())

    def expert(self, episode_id: Id) -> Record:
        """The oracle's next action for an open episode (trainer and admin tokens only)."""
        return self.run(_call(Request("GET", f"/v1/episodes/{episode_id}/expert")))

    def register_policy(self, **fields: Any) -> Record:
        """Register a model version: kind, path, parent, config, metrics (trainer)."""
        return self.run(_call(Request("POST", "/v1/policies", json=fields, resendable=False)))

    def latest_policy(self, kind: str = "policy") -> Record:
        return self.run(_call(Request("GET", "/v1/policies/latest", params={"kind": kind})))

    def policies(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]:
        return self._pages("/v1/policies", {**filters, "limit": page_size})

    def learning_metrics(self, **filters: Any) -> Record:
        """Learning curves and continual-learning metrics (``GET /v1/metrics/learning``)."""
        return self.run(_call(Request("GET", "/v1/metrics/learning", params=_given(**filters))))

    def decisions(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]:
        """The forge's decisions with the evidence behind them (``GET /v1/forge/decisions``)."""
        return self._pages("/v1/forge/decisions", {**filters, "limit": page_size})


class AsyncBigWorldClient:
    """The asyncio twin of :class:`BigWorldClient`: same methods, awaited; lists are async
    iterators."""

    def __init__(
        self,
        base_url: str = DEFAULT_SERVER,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        world: str = MAIN_WORLD,
    ) -> None:
        self.settings = _Settings(base_url.rstrip("/"), token, retry or RetryPolicy(), world)
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            timeout=timeout,
            headers=self.settings.headers(),
            transport=transport,
        )
        self._sleep, self._clock = sleep, clock

    async def __aenter__(self) -> AsyncBigWorldClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, request: Request) -> Reply:
        policy, maybe_applied, started = self.settings.retry, False, self._clock()
        for tries in itertools.count(1):
            try:
                response = await self._http.request(
                    request.method,
                    self.settings.path(request.path),
                    params=request.params,
                    json=request.json,
                )
            except httpx.TransportError as exc:
                retry, applied = _judge_error(request, exc)
                maybe_applied |= applied
                elapsed = self._clock() - started
                wait = policy.wait(tries, elapsed) if retry else None
                if wait is None:
                    raise _unreachable(request, exc, maybe_applied, tries, elapsed) from exc
                await self._sleep(wait)
                continue
            retry, applied = _judge_status(request, response.status_code)
            elapsed = self._clock() - started
            wait = policy.wait(tries, elapsed, _retry_after(response)) if retry else None
            if wait is None:
                return _reply(response, maybe_applied)
            maybe_applied |= applied
            await self._sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    async def run(self, flow: Flow[T]) -> T:
        try:
            request = next(flow)
            while True:
                request = flow.send(await self.send(request))
        except StopIteration as stop:
            return stop.value

    async def _pages(self, path: str, params: dict[str, Any]) -> AsyncIterator[Record]:
        params = _given(**params)
        while True:
            page = await self.run(_call(Request("GET", path, params=params)))
            for item in page["items"]:
                yield item
            if not page.get("next_cursor"):
                return
            params = {**params, "cursor": page["next_cursor"]}

    async def healthz(self) -> bool:
        return await self.run(_probe("/healthz"))

    async def readyz(self) -> bool:
        return await self.run(_probe("/readyz"))

    async def world(self, at_tick: int | None = None, *, state_hash: bool = False) -> Record:
        return await self.run(_call(_world_request(at_tick, state_hash)))

    async def create_agent(
        self, name: str, role: str, *, max_open_episodes: int | None = None
    ) -> AgentCreated:
        return await self.run(_create_agent_flow(name, role, max_open_episodes))

    async def me(self) -> AgentInfo:
        return await self.run(_me_flow())

    async def revoke_agent(self, agent_id: Id) -> Record:
        return await self.run(_call(Request("DELETE", f"/v1/agents/{agent_id}")))

    async def begin_episode(
        self, task_id: Id | None = None, family: str | None = None, task: Record | None = None
    ) -> EpisodeStarted:
        return await self.run(_begin_flow(task_id, family, task))

    async def step(
        self, episode_id: Id, step: int, action: str, record: Record | None = None
    ) -> StepOut:
        return await self.run(_step_flow(episode_id, step, action, record))

    async def step_many(self, steps: Sequence[Record]) -> list[StepOut | ClientError]:
        return await self.run(_steps_flow(steps))

    async def abandon(self, episode_id: Id) -> Record:
        return await self.run(_abandon_flow(episode_id))

    async def episode(self, episode_id: Id) -> Record:
        return await self.run(_call(Request("GET", f"/v1/episodes/{episode_id}")))

    async def fork_world(
        self, source: str, at_tick: int, name: str | None = None, *, state_hash: bool = True
    ) -> Record:
        return await self.run(_call(_fork_request(source, at_tick, name, state_hash)))

    def worlds(self, *, page_size: int | None = None) -> AsyncIterator[Record]:
        return self._pages("/v1/worlds", {"limit": page_size})

    async def delete_world(self, name: str) -> Record:
        return await self.run(_call(Request("DELETE", f"/v1/worlds/{name}")))

    def episodes(self, *, page_size: int | None = None, **filters: Any) -> AsyncIterator[Record]:
        return self._pages("/v1/episodes", {**filters, "limit": page_size})

    def events(self, *, page_size: int | None = None, **filters: Any) -> AsyncIterator[Record]:
        return self._pages("/v1/events", {**filters, "limit": page_size})

    async def thing(self, thing_id: Id, at_tick: int | None = None) -> Record:
        return await self.run(_call(Request("GET", f"/v1/things/{thing_id}", params=_at(at_tick))))

    async def place(self, place_id: Id, at_tick: int | None = None) -> Record:
        return await self.run(_call(Request("GET", f"/v1/places/{place_id}", params=_at(at_tick))))

    def tasks(self, *, page_size: int | None = None, **filters: Any) -> AsyncIterator[Record]:
        return self._pages("/v1/tasks", {**filters, "limit": page_size})

    async def task(self, task_id: Id) -> Record:
        return await self.run(_call(Request("GET", f"/v1/tasks/{task_id}")))

    async def post_judgments(self, episode_id: Id, judgments: list[Record]) -> Any:
        return await self.run(_judgments_flow(episode_id, judgments))

    async def expert(self, episode_id: Id) -> Record:
        return await self.run(_call(Request("GET", f"/v1/episodes/{episode_id}/expert")))

    async def latest_policy(self, kind: str = "policy") -> Record:
        return await self.run(_call(Request("GET", "/v1/policies/latest", params={"kind": kind})))

    async def learning_metrics(self, **filters: Any) -> Record:
        return await self.run(
            _call(Request("GET", "/v1/metrics/learning", params=_given(**filters)))
        )

    def decisions(self, *, page_size: int | None = None, **filters: Any) -> AsyncIterator[Record]:
        return self._pages("/v1/forge/decisions", {**filters, "limit": page_size})


class StepBatcher:
    """Sends the steps that concurrent tasks take through one :class:`AsyncBigWorldClient`
    together: for callers that each play an episode of one agent at once (a verifiers run's
    concurrent rollouts). The steps asked for within ``window_s`` seconds of the first, or
    while a batch is in flight, go as one ``POST /v1/steps`` of at most ``MAX_BATCH_STEPS``;
    each caller gets its own step's answer, or its own step's error raised."""

    def __init__(self, client: AsyncBigWorldClient, window_s: float = 0.002) -> None:
        self.client, self.window_s = client, window_s
        self._waiting: list[tuple[Record, asyncio.Future[StepOut]]] = []
        self._sending: asyncio.Task[None] | None = None  # the task sending, while steps wait

    async def step(
        self, episode_id: Id, step: int, action: str, record: Record | None = None
    ) -> StepOut:
        """:meth:`AsyncBigWorldClient.step`, sent in a batch with the steps of other callers."""
        answer: asyncio.Future[StepOut] = asyncio.get_running_loop().create_future()
        body = {**(record or {}), "episode_id": episode_id, "step": step, "action": action}
        self._waiting.append((body, answer))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send())
        return await answer

    async def _send(self) -> None:
        """Send the waiting steps, a batch at a time, until none wait."""
        while self._waiting:
            await asyncio.sleep(self.window_s)
            batch = self._waiting[:MAX_BATCH_STEPS]
            del self._waiting[:MAX_BATCH_STEPS]
            answers: list[StepOut | Exception]
            try:
                answers = list(await self.client.step_many([body for body, _ in batch]))
            except Exception as exc:  # the batch went unanswered or was refused whole
                answers = [exc] * len(batch)
            for (_, future), answer in zip(batch, answers, strict=True):
                if future.done():  # its caller was cancelled
                    continue
                if isinstance(answer, Exception):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
        self._sending = None


__all__ = [
    "AsyncBigWorldClient",
    "BigWorldClient",
    "ClientError",
    "ConflictError",
    "Reply",
    "Request",
    "RetryPolicy",
    "StepBatcher",
]
