"""bigworld as an OpenEnv environment: one WebSocket session is one agent playing ordinary
episodes in the one persistent world (design §6, "OpenEnv").

``reset(token=..., family=..., task=..., world=...)`` authenticates the session with a policy
agent's bearer token (in the message, never in a URL) and begins a new episode where the
avatar stands; the world is never reset. ``reset(token=..., episode_id=N)`` continues the
agent's open episode N instead (after a lost connection or a server restart). ``step`` takes
one step. Both call the server's own :func:`server.episodes.begin` and
:func:`server.episodes.step`, so an episode played here has the rows, events, judgments,
metrics and exports of one played over REST, with the same idempotent step indices.

Refusals reach the client as OpenEnv error messages whose text starts with the REST
contract's error code (``unauthorized: the bearer token is not valid``), and change nothing.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    ServerMode,
)
from pydantic import ValidationError
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from starlette.concurrency import run_in_threadpool

from server import episodes
from server.auth import authenticate, check_role
from server.credentials import Caller
from server.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    Unauthorized,
    Unprocessable,
    install_error_handlers,
)
from server.openenv import peer
from server.runtime import Runtime
from world.contract import MAIN_WORLD, ErrorCode
from world.openenv_schemas import BigWorldAction, BigWorldObservation, BigWorldState
from world.schemas import StepIn, StepOut
from world.state import World
from world.store import SqlBackend, StoreError, records

log = logging.getLogger("bigworld.server")
RESET_ARGUMENTS = ("token", "family", "task", "world", "episode_id", "seed")


class Refused(Exception):
    """Raised to OpenEnv's server for a request bigworld refuses: its text, which OpenEnv sends
    as the error message, is the REST contract's error code, a colon and the message."""


class BigWorldEnvironment(Environment):
    """One OpenEnv session: an agent authenticated at reset, and its current episode."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self.runtime = runtime
        self._token: str | None = None
        self._caller: Caller | None = None
        self._episode: int | None = None
        self._step = 0  # the last step this session knows was taken; begin is step 0
        self._status: str | None = None
        self._task: tuple[str, str] | None = None  # (task id, family)

    # OpenEnv calls the async methods when a subclass defines them, on its event loop, where
    # the mount's ``peer.address`` is visible; the database work runs in the server's thread pool.
    async def reset_async(self, **kwargs: Any) -> BigWorldObservation:
        address = peer.address.get()
        return await run_in_threadpool(functools.partial(self._reset, address, **kwargs))

    async def step_async(self, action: BigWorldAction, **kwargs: Any) -> BigWorldObservation:
        address = peer.address.get()
        return await run_in_threadpool(self._step_with, address, action)

    def reset(self, **kwargs: Any) -> BigWorldObservation:
        return self._reset("unknown", **kwargs)

    def step(self, action: BigWorldAction, **kwargs: Any) -> BigWorldObservation:
        return self._step_with("unknown", action)

    @property
    def state(self) -> BigWorldState:
        # OpenEnv reads this on its event loop: two primary-key reads, no world lock.
        if self._caller is None:
            return BigWorldState()
        place = place_name = None
        with refusals(), self.runtime.sessions() as session:
            world = World(SqlBackend(session))  # read only: never committed
            tick = world.tick
            if self._caller.avatar_id is not None:
                place = world.avatar(self._caller.avatar_id).place
                place_name = world.place(place).name
        task_id, family = self._task or (None, None)
        return BigWorldState(
            episode_id=self._episode,
            step_count=self._step,
            agent=self._caller.name,
            status=self._status,
            task_id=task_id,
            family=family,
            place=place,
            place_name=place_name,
            tick=tick,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="bigworld",
            description="One persistent, never-resetting text world: reset(token=...) begins an "
            "episode where the agent's avatar stands; step({'action': ...}) takes one step.",
            version="1.0.0",
        )

    def close(self) -> None:
        """The session ended: abandon its open episode (outcome -1), as the Gymnasium adapter
        does, so the avatar is free for the next session."""
        if self._caller is None or self._episode is None or self._status != "open":
            return
        try:
            with refusals():
                episodes.abandon(self.runtime, self._caller, self._episode)
        except Refused as exc:  # ended meanwhile (idle timeout), or the database is away
            log.info("OpenEnv session left episode %s: %s", self._episode, exc)
        self._status = "abandoned"

    def _reset(
        self,
        address: str,
        *,
        token: Any = None,
        family: Any = None,
        task: Any = None,
        world: Any = None,
        episode_id: Any = None,
        seed: Any = None,  # accepted as OpenEnv clients send it; the world has its own seed
        **unknown: Any,
    ) -> BigWorldObservation:
        with refusals():
            if unknown:
                raise Unprocessable(
                    f"expected reset arguments among {', '.join(RESET_ARGUMENTS)}, "
                    f"got {', '.join(sorted(unknown))}",
                    code=ErrorCode.VALIDATION_ERROR,
                )
            if not isinstance(token, str) or not token.strip():
                raise Unauthorized("expected reset(token=<a policy agent's bearer token>)")
            caller = check_role(authenticate(self.runtime, f"Bearer {token}", address), ("policy",))
            if world not in (None, MAIN_WORLD):
                raise NotFound(
                    f"expected world {MAIN_WORLD!r} (the one this server serves), got {world!r}"
                )
            if family is not None and not isinstance(family, str):
                raise Unprocessable(
                    f"expected family as text, got {family!r}", code=ErrorCode.VALIDATION_ERROR
                )
            if episode_id is not None and (family is not None or task is not None):
                raise Unprocessable(
                    "expected episode_id (to continue it) or family/task (to begin), not both",
                    code=ErrorCode.VALIDATION_ERROR,
                )
            if self._caller is not None and self._caller.id != caller.id:
                self.close()  # the session changes agent: it leaves the other's episode
                self._caller = self._episode = None
            if episode_id is not None:
                answer = self._continue(caller, episode_id)
            else:
                answer = self._begin(caller, family, task)
            self._token, self._caller = token, caller
            return answer

    def _begin(self, caller: Caller, family: str | None, task: Any) -> BigWorldObservation:
        task_id, spec = _task_request(task)
        try:
            started = episodes.begin(self.runtime, caller, task_id, family, spec)
        except Conflict as exc:
            if exc.code != "episode_open":
                raise
            open_id = exc.details["episode_id"]
            if open_id != self._episode:  # a REST client's, or a session's the server lost
                raise Conflict(
                    f"{exc.message} ({open_id}); reset(token=..., episode_id={open_id}) "
                    "continues it",
                    code=exc.code,
                    details=exc.details,
                ) from exc
            # A reset ends this session's open episode (abandoned, outcome -1) and begins anew;
            # an unknown task id must be refused before that, as begin refuses it after.
            if task_id is not None:
                self._require_task(task_id)
            episodes.abandon(self.runtime, caller, open_id)
            started = episodes.begin(self.runtime, caller, task_id, family, spec)
        self._episode, self._step, self._status = started.episode_id, 0, "open"
        self._task = (started.task.id, started.task.family)
        return BigWorldObservation(
            text=started.observation,
            admissible_actions=started.admissible_actions,
            episode_id=started.episode_id,
            step=0,
            tick=started.tick,
        )

    def _continue(self, caller: Caller, episode_id: Any) -> BigWorldObservation:
        """Pick up the agent's open episode where its last acknowledged step left it."""
        if not isinstance(episode_id, int) or isinstance(episode_id, bool):
            raise Unprocessable(
                f"expected episode_id as an integer, got {episode_id!r}",
                code=ErrorCode.VALIDATION_ERROR,
            )
        with self.runtime.sessions() as session:
            episode = records.get_episode(session=session, episode_id=episode_id)
            if episode is None:
                raise NotFound(f"no episode {episode_id}")
            if episode.agent_id != caller.id:
                raise Forbidden(f"episode {episode_id} belongs to another agent")
            if episode.status != "open":
                raise Conflict(
                    f"episode {episode_id} has ended ({episode.status})",
                    code=ErrorCode.EPISODE_ENDED,
                    details={"status": episode.status, "outcome": episode.outcome},
                )
            last = records.get_step(session=session, episode_id=episode.id, step=episode.last_step)
            text, admissible = episode.observation, list(episode.admissible)
            tick = episode.begin_tick
            if last is not None:
                text, admissible, tick = last.observation, list(last.admissible), last.tick
            self._episode, self._step, self._status = episode.id, episode.last_step, "open"
            self._task = (episode.task_id, episode.family)
        return BigWorldObservation(
            text=text,
            admissible_actions=admissible,
            episode_id=episode_id,
            step=self._step,
            tick=tick,
        )

    def _require_task(self, task_id: str) -> None:
        with self.runtime.sessions() as session:
            if records.get_task(session=session, task_id=task_id) is None:
                raise NotFound(f"no task {task_id!r}")

    def _step_with(self, address: str, action: BigWorldAction) -> BigWorldObservation:
        with refusals():
            if self._token is None or self._episode is None:
                raise Unauthorized("expected reset(token=...) before the first step")
            # Every step authenticates again, as every REST request does: a revoked token stops
            # within auth_cache_s, and steps count against the token's rate limit.
            caller = authenticate(self.runtime, f"Bearer {self._token}", address)
            fields = action.model_dump(exclude={"metadata", "step"})
            try:
                body = StepIn.model_validate({**fields, "step": action.step or self._step + 1})
            except ValidationError as exc:
                raise Unprocessable(_described(exc), code=ErrorCode.VALIDATION_ERROR) from exc
            out = episodes.step(self.runtime, caller, self._episode, body)
            self._step = max(self._step, out.step)
            if out.done:
                self._status = "succeeded" if out.success else "failed"
            return _observation(out, self._episode)


def _observation(out: StepOut, episode_id: int) -> BigWorldObservation:
    return BigWorldObservation(
        text=out.observation,
        admissible_actions=out.admissible_actions,
        episode_id=episode_id,
        step=out.step,
        tick=out.tick,
        reward=float(out.outcome or 0) if out.done else 0.0,
        done=out.done,
    )


def _task_request(task: Any) -> tuple[str | None, dict[str, Any] | None]:
    """reset's ``task``: a task id (text) or a task spec ``{"family", "params"}``."""
    if task is None:
        return None, None
    if isinstance(task, str):
        return task, None
    if isinstance(task, dict):
        return None, task
    raise Unprocessable(
        f"expected task as a task id or a task spec object, got {task!r}",
        code=ErrorCode.VALIDATION_ERROR,
    )


def _described(exc: ValidationError) -> str:
    """A step body's validation errors in one line: where, and what was expected."""
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'step'}: {error['msg']}"
        for error in exc.errors()
    )


@contextmanager
def refusals() -> Iterator[None]:
    """Turn what the REST routes answer with an error body into :class:`Refused`, with the
    same codes (server/errors.py); anything unexpected is logged and refused as internal."""
    try:
        yield
    except Refused:
        raise
    except ApiError as exc:
        details = f" {json.dumps(exc.details, default=str)}" if exc.details else ""
        raise Refused(f"{exc.code}: {exc.message}{details}") from exc
    except IntegrityError as exc:
        raise Refused("conflict: the request conflicts with what is stored") from exc
    except DataError as exc:
        raise Refused("invalid_value: a value in the request cannot be stored") from exc
    except DBAPIError as exc:
        log.warning("database unavailable: %s", exc.__class__.__name__)
        raise Refused("database_unavailable: the database is unavailable; retry later") from exc
    except StoreError as exc:
        raise Refused(f"world_unavailable: {exc}") from exc
    except Exception as exc:
        log.exception("OpenEnv session failed", exc_info=exc)
        raise Refused("internal_error: internal error") from exc


class _Server(HTTPEnvServer):
    """openenv-core's server with bigworld's refusal at its session limit (pinned 0.3.0)."""

    async def _create_session(self) -> Any:
        try:
            return await super()._create_session()
        except SessionCapacityError as exc:
            raise SessionCapacityError(
                exc.active_sessions,
                exc.max_sessions,
                message=f"rate_limited: expected at most {exc.max_sessions} OpenEnv sessions at "
                "once (BIGWORLD_OPENENV_MAX_SESSIONS), got one more; close one or retry later",
            ) from exc


# openenv-core's MCP routes let anyone hold a session slot without a WebSocket; bigworld
# serves the WebSocket protocol and the read-only routes only.
SERVED = {
    "/ws",
    "/health",
    "/schema",
    "/metadata",
    "/docs",
    "/docs/oauth2-redirect",
    "/openapi.json",
}


def build_app(runtime: Runtime) -> FastAPI:
    """The OpenEnv app mounted at /openenv: openenv-core's server in its production mode (no
    stateless HTTP /reset and /step: a session is a WebSocket), errors in bigworld's shape."""
    app = FastAPI(title="bigworld OpenEnv", version="1.0.0", redoc_url=None)
    server = _Server(
        functools.partial(BigWorldEnvironment, runtime),
        BigWorldAction,
        BigWorldObservation,
        max_concurrent_envs=runtime.settings.openenv_max_sessions,
    )
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) in SERVED]
    install_error_handlers(app)
    return app
