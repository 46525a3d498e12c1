"""Episodes as world transactions: begin, step, abandon, the idle reaper, the heartbeat and
expert hints.

Each call is one world transaction (``Runtime.world_transaction``, a function of the session
and the world row run under the world lock): load the rows it needs, apply the rules of an
episode (``world.episodes``) to a World over the store, commit the world (state and events),
write the episode's records, commit, and answer once the writer has made it durable (it may
share its commit with other requests). Holding the world lock before checking the step index
makes a replayed or concurrent request see every step acknowledged before it, and hands out
ticks in commit order, so a replay of the log is exact.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from server import forge
from server import records as server_records
from server.credentials import Caller
from server.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    Unprocessable,
    own_error,
    schema_errors,
)
from server.runtime import Runtime
from world import engine, episodes, families, oracle, tasks
from world.contract import ErrorCode
from world.errors import ActionError, TaskError, UnknownEntityError
from world.schemas import (
    BatchStepIn,
    EpisodeStarted,
    ErrorDetail,
    ExpertHint,
    StepAnswer,
    StepIn,
    StepOut,
    StepsOut,
    TaskOut,
)
from world.state import World
from world.store import SqlBackend, Work, WorldRow, records
from world.store.models import EpisodeRow, StepRow, TaskRow
from world.store.regions import Scope


def task_out(row: TaskRow) -> TaskOut:
    return TaskOut(id=row.id, family=row.family, params=row.params, text=row.text)


def step_out(row: StepRow) -> StepOut:
    return StepOut(
        step=row.step,
        observation=row.observation,
        admissible_actions=list(row.admissible),
        done=row.done,
        success=row.success,
        outcome=row.outcome,
        tick=row.tick,
    )


def begin(
    runtime: Runtime,
    caller: Caller,
    task_id: str | None,
    family: str | None,
    spec: dict[str, Any] | None = None,
) -> EpisodeStarted:
    """Open an episode for one of the caller's free avatars: with the task ``task_id`` names,
    the task ``spec`` (added to the pool as requested when new), or one drawn from the forge's
    pool. An agent at its ``max_open_episodes`` is refused: 409 ``episode_open`` naming the
    episode when it may hold one, else 429 ``open_episode_limit`` with the limit."""
    _avatar_of(caller)
    requested = _requested(task_id, spec)
    if family is not None and family not in families.FAMILIES:
        raise Unprocessable(
            f"expected a family in {list(families.FAMILIES)}, got {family!r}",
            code=ErrorCode.UNKNOWN_FAMILY,
        )
    now = time.time()

    def work(session: Session, world_row: WorldRow) -> EpisodeStarted:
        world = World(runtime.backend(session, world_row), runtime.rules)
        avatar = _free_avatar(runtime, session, world, caller, now)
        try:
            world.avatar(avatar)  # loaded once for the begin: it looks around next
        except UnknownEntityError:  # a fork made before the agent was, or a further avatar
            world.add_avatar(avatar, caller.name if avatar == caller.avatar_id else avatar)
        key, draw, length = None, "requested", None
        if task_id is not None:
            row = records.get_task(session=session, task_id=task_id)
            if row is None:
                raise NotFound(f"no task {task_id!r}")
            task = records.task_of(row)
        elif requested is not None:
            task = requested
            row = forge.admit_requested(session, world, avatar, task)
        else:
            key = f"{avatar}/{world_row.txn_seq + 1}"  # unique per world transaction, logged
            try:
                drawn = forge.draw(
                    session,
                    world,
                    avatar,
                    family,
                    key,
                    now,
                    go_to_hops=runtime.settings.go_to_hops,
                )
            except TaskError as exc:
                raise Conflict(
                    f"no task can be made near this avatar now: {exc}", code=ErrorCode.NO_TASK
                ) from exc
            task, row, draw, key = drawn.task, drawn.row, drawn.draw, drawn.key
            length = drawn.length
        first = episodes.begin(world, avatar, task, key=key, family=family, draw=draw)
        distance = _distance(runtime, world, task, avatar, known=length)
        world.commit()
        episode = records.add_episode(
            session=session,
            agent_id=caller.id,
            avatar_id=avatar,
            task_id=row.id,
            family=row.family,
            status=episodes.OPEN,
            outcome=None,
            budget=tasks.step_budget(task, runtime.settings.step_budget),
            last_step=0,
            begin_tick=world.tick,
            end_tick=None,
            observation=first.text,
            admissible=list(first.admissible),
            updated_at=now,
            distance=distance,
        )
        session.commit()
        return EpisodeStarted(
            episode_id=episode.id,
            task=task_out(row),
            observation=first.text,
            admissible_actions=list(first.admissible),
            tick=world.tick,
        )

    return runtime.world_transaction(work)


def avatars_of(caller: Caller) -> list[str]:
    """The avatars a policy agent plays with, one per episode it may hold open: its own, then
    ``NAME.2``, ``NAME.3``, ... (a name never holds a dot, so no agent's avatar is one of
    these). Each joins the world when its first episode begins."""
    first = _avatar_of(caller)
    return [first, *(f"{first}.{k}" for k in range(2, caller.max_open_episodes + 1))]


def _free_avatar(
    runtime: Runtime, session: Session, world: World, caller: Caller, now: float
) -> str:
    """The first of the caller's avatars without an open episode (idle ones are abandoned
    first); an agent at its limit is refused."""
    current = []
    for episode_id, avatar, touched in records.open_avatars(session=session, agent_id=caller.id):
        if _untouched(runtime, touched, now):
            idle = records.get_episode(session=session, episode_id=episode_id)
            assert idle is not None  # read in this transaction
            _abandon(runtime, session, world, idle, now)
        else:
            current.append((episode_id, avatar))
    limit = caller.max_open_episodes
    if len(current) >= limit:
        if limit == 1:
            raise Conflict(
                "this avatar already has an open episode",
                code=ErrorCode.EPISODE_OPEN,
                details={"episode_id": current[0][0]},
            )
        raise RateLimited(
            f"expected at most {limit} open episodes for this agent, got a begin with "
            f"{len(current)} open; end one, or ask an admin for a higher limit",
            code=ErrorCode.OPEN_EPISODE_LIMIT,
            details={"limit": limit, "open": len(current)},
        )
    busy = {avatar for _, avatar in current}
    return next(avatar for avatar in avatars_of(caller) if avatar not in busy)


def _requested(task_id: str | None, spec: dict[str, Any] | None) -> tasks.Task | None:
    """The task a begin's ``task`` spec describes (a 422 when invalid or given with an id)."""
    if spec is None:
        return None
    if task_id is not None:
        raise Unprocessable("expected task_id or task, not both", code=ErrorCode.TASK_AND_TASK_ID)
    try:
        return tasks.Task.from_spec(spec)
    except TaskError as exc:
        raise Unprocessable(str(exc), code=ErrorCode.INVALID_TASK) from exc


def step(runtime: Runtime, caller: Caller, episode_id: int, body: StepIn) -> StepOut:
    """Apply step ``body.step`` of an episode, or answer it from the record if already applied.
    The policy's prompt, completion and version, when sent, are stored with the step."""
    started = time.perf_counter()
    out = runtime.world_transaction(*_step_transaction(runtime, caller, episode_id, body))
    runtime.metrics.step(time.perf_counter() - started)
    return out


async def step_async(runtime: Runtime, caller: Caller, episode_id: int, body: StepIn) -> StepOut:
    """:func:`step` for the event loop (the REST route), waiting without a thread."""
    started = time.perf_counter()
    out = await runtime.world_transaction_async(
        *_step_transaction(runtime, caller, episode_id, body)
    )
    runtime.metrics.step(time.perf_counter() - started)
    return out


async def steps_async(runtime: Runtime, caller: Caller, items: list[Any]) -> StepsOut:
    """A batch of steps, of any of the caller's episodes, as one submission to the writer (one
    commit where the store allows): each step is its own transaction, applied or answered
    from the record exactly as :func:`step` would, and answered in its place with its result
    or its own error (a malformed one with 422 ``validation_error``). A failure that is not a
    step's own (the database unavailable) fails the batch as a whole; resending it is safe,
    as every step is idempotent by its index."""
    started = time.perf_counter()
    answers: list[StepAnswer | None] = [None] * len(items)
    bodies, placed = [], []
    for i, item in enumerate(items):
        try:
            bodies.append(BatchStepIn.model_validate(item))
        except ValidationError as exc:
            answers[i] = _answer(
                Unprocessable(
                    "the step does not match the schema",
                    code=ErrorCode.VALIDATION_ERROR,
                    details=schema_errors(exc.errors()),
                )
            )
            continue
        placed.append(i)
    # The steps' reads are made ahead, together, where the writer's batch allows
    reads = records.StepReads([(b.episode_id, b.step) for b in bodies], _crowd(runtime))
    works = [_step_transaction(runtime, caller, b.episode_id, b, reads) for b in bodies]
    results = await runtime.world_transactions_async(works) if works else []
    elapsed = time.perf_counter() - started
    for i, result in zip(placed, results, strict=True):
        if isinstance(result, BaseException):
            refused = own_error(result)
            if refused is None:
                raise result
            answers[i] = _answer(refused)
        else:
            answers[i] = StepAnswer(status=200, result=result)
            runtime.metrics.step(elapsed)
    return StepsOut(items=[answer for answer in answers if answer is not None])


def _answer(refused: ApiError) -> StepAnswer:
    error = ErrorDetail(code=refused.code, message=refused.message, details=refused.details)
    return StepAnswer(status=refused.status, error=error)


def _crowd(runtime: Runtime) -> int | None:
    """How many of those beside a step's avatar its read brings (``records.read_step``): the
    main world's are read with the episode, a fork's not (they may lie in its parent)."""
    return runtime.rules.crowd_shown if not runtime.lineage else None


def _step_transaction(
    runtime: Runtime,
    caller: Caller,
    episode_id: int,
    body: StepIn,
    reads: records.StepReads | None = None,
) -> tuple[Work[StepOut], Scope | None]:
    """A step as a world transaction, and the scope it locks; ``reads``: its batch's (a step
    alone reads its own)."""
    index, action = body.step, body.action
    now = time.time()
    if reads is None:
        reads = records.StepReads([(episode_id, index)], _crowd(runtime))

    def work(session: Session, world_row: WorldRow) -> StepOut:
        read = reads.read(session=session, episode_id=episode_id, step=index)
        episode = _owned(caller, episode_id, read.episode if read is not None else None)
        assert read is not None  # _owned refused a missing episode
        recorded = read.recorded
        if recorded is not None:
            if recorded.action != action:
                raise Conflict(
                    f"step {index} was already taken with another action",
                    code=ErrorCode.STEP_MISMATCH,
                    details={"step": index, "recorded_action": recorded.action},
                )
            return step_out(recorded)
        backend = runtime.backend(session, world_row)
        if read.around is not None and isinstance(backend, SqlBackend):
            backend.read_around(episode.avatar_id, read.around, read.crowd, read.contents)
        world = World(backend, runtime.rules)
        if _idle(runtime, episode, now):
            _abandon(runtime, session, world, episode, now)
            world.commit()
            session.commit()
        _require_open(episode)
        expected = episode.last_step + 1
        if index != expected:
            raise Conflict(
                f"expected step {expected}, got {index}",
                code=ErrorCode.STEP_OUT_OF_ORDER,
                details={"expected": expected},
            )
        task = records.task_of(read.task)
        try:
            taken = episodes.advance(world, _rules_view(episode), task, action, index)
        except ActionError as exc:
            raise Unprocessable(str(exc), code=ErrorCode.INVALID_ACTION) from exc
        distance = 0 if taken.success else _distance(runtime, world, task, episode.avatar_id)
        world.commit()
        changed: dict[str, Any] = {"last_step": index, "updated_at": now}
        if taken.ending is not None:
            changed.update(_ended(runtime, taken.ending, world.tick, now))
        out = StepOut(
            step=index,
            observation=taken.result.observation,
            admissible_actions=list(taken.result.admissible),
            done=taken.done,
            success=taken.success,
            outcome=taken.outcome,
            tick=taken.result.tick,
        )
        records.record_step(
            session=session,
            episode=episode,
            changed=changed,
            episode_id=episode.id,
            step=index,
            action=action,
            observation=out.observation,
            admissible=out.admissible_actions,
            tick=out.tick,
            done=out.done,
            success=out.success,
            outcome=out.outcome,
            policy_version=body.policy_version,
            prompt=body.prompt,
            completion=body.completion,
            parse_failed=body.parse_failed,
            mode=body.mode,
            temperature=body.temperature,
            completion_ids=body.completion_ids,
            distance=distance,
        )
        session.commit()
        return out

    # A step locks what its avatar can reach (PostgreSQL); planning the distance after it may
    # read anywhere, so that takes the world, and so does a step of an agent with several
    # avatars, whose episode's avatar is not known before the episode is read.
    avatar = caller.avatar_id if caller.max_open_episodes == 1 else None
    scope = None if runtime.settings.record_distance or avatar is None else Scope(avatar)
    return work, scope


def abandon(runtime: Runtime, caller: Caller, episode_id: int) -> EpisodeRow:
    def work(session: Session, world_row: WorldRow) -> EpisodeRow:
        episode = _owned(
            caller, episode_id, records.get_episode(session=session, episode_id=episode_id)
        )
        _require_open(episode)
        world = World(runtime.backend(session, world_row), runtime.rules)
        _abandon(runtime, session, world, episode, time.time())
        world.commit()
        session.commit()
        return episode

    return runtime.world_transaction(work)


def reap_idle(runtime: Runtime) -> int:
    """End every open episode idle past the timeout as abandoned; returns how many."""
    now = time.time()

    def work(session: Session, world_row: WorldRow) -> int:
        idle = records.idle_episodes(
            session=session, before=now - runtime.settings.episode_idle_timeout_s
        )
        world = World(runtime.backend(session, world_row), runtime.rules)
        for episode in idle:
            _abandon(runtime, session, world, episode, now)
        world.commit()
        session.commit()
        return len(idle)

    return runtime.world_transaction(work)


def heartbeat(runtime: Runtime) -> int:
    """Advance the world's tick by one, logged as a ``tick`` input; returns the new tick."""

    def work(session: Session, world_row: WorldRow) -> int:
        world = World(runtime.backend(session, world_row), runtime.rules)
        tick = engine.heartbeat(world)
        world.commit()
        session.commit()
        return tick

    return runtime.world_transaction(work)


def expert(runtime: Runtime, caller: Caller, episode_id: int) -> ExpertHint:
    """The oracle's next action for an open episode; every use is recorded."""

    def work(session: Session, world_row: WorldRow) -> ExpertHint:
        episode = records.get_episode(session=session, episode_id=episode_id)
        if episode is None:
            raise NotFound(f"no episode {episode_id}")
        _require_open(episode)
        task = records.episode_task(session=session, episode=episode)
        world = World(
            runtime.backend(session, world_row), runtime.rules
        )  # read only: never committed
        found = oracle.plan(world, task, episode.avatar_id)
        action = found.actions[0] if found and found.actions else None
        hint = ExpertHint(
            episode_id=episode.id,
            step=episode.last_step + 1,
            action=action,
            plan_length=len(found) if found is not None else None,
            tick=world.tick,
        )
        server_records.add_expert_hint(
            session=session, agent_id=caller.id, created_at=time.time(), **hint.model_dump()
        )
        session.commit()
        return hint

    return runtime.world_transaction(work)


def _rules_view(episode: EpisodeRow) -> episodes.Episode:
    """What the rules of an episode know of its row."""
    return episodes.Episode(
        id=episode.id,
        avatar=episode.avatar_id,
        task_id=episode.task_id,
        family=episode.family,
        budget=episode.budget,
        last_step=episode.last_step,
    )


def _idle(runtime: Runtime, episode: EpisodeRow, now: float) -> bool:
    """Whether an open episode has gone untouched past the idle timeout (it is then
    abandoned by the next request that meets it, or by the reaper)."""
    return episode.status == episodes.OPEN and _untouched(runtime, episode.updated_at, now)


def _untouched(runtime: Runtime, touched: float, now: float) -> bool:
    """Whether an episode last touched at ``touched`` has been idle past the timeout."""
    return touched < now - runtime.settings.episode_idle_timeout_s


def _abandon(
    runtime: Runtime, session: Session, world: World, episode: EpisodeRow, now: float
) -> None:
    """Abandon an open episode (logged as ``episode_ended``); the caller commits ``world``
    and the session."""
    ending = episodes.abandon(world, _rules_view(episode))
    changed = _ended(runtime, ending, world.tick, now)
    records.update_episode(session=session, episode=episode, **changed)


def _ended(runtime: Runtime, ending: episodes.Ending, tick: int, now: float) -> dict[str, Any]:
    """The episode's columns ``ending`` writes; the ending is counted in the metrics."""
    runtime.metrics.episode_ended(ending.status)
    return records.ended(status=ending.status, outcome=ending.outcome, tick=tick, now=now)


def _require_open(episode: EpisodeRow) -> None:
    """A 409 ``episode_ended`` unless the episode is open."""
    if episode.status != episodes.OPEN:
        raise Conflict(
            f"episode {episode.id} has ended ({episode.status})",
            code=ErrorCode.EPISODE_ENDED,
            details={"status": episode.status, "outcome": episode.outcome},
        )


def _distance(
    runtime: Runtime, world: World, task: tasks.Task, avatar: str, known: int | None = None
) -> int | None:
    """The oracle's plan length from here: ``known`` when the caller has just planned it from
    this state (a begin's draw does: recorded always, the trainer groups by it), else a plan
    of its own when the server records distances (``--record-distance``), else None."""
    if known is not None:
        return known
    if not runtime.settings.record_distance:
        return None
    found = oracle.plan(world, task, avatar)
    return len(found) if found is not None else None


def _avatar_of(caller: Caller) -> str:
    if caller.avatar_id is None:
        raise Forbidden("this agent has no avatar (only policy agents act in the world)")
    return caller.avatar_id


def _owned(caller: Caller, episode_id: int, episode: EpisodeRow | None) -> EpisodeRow:
    """``episode`` (read by id ``episode_id``) if the caller owns it: a 404 or 403 otherwise."""
    if episode is None:
        raise NotFound(f"no episode {episode_id}")
    if episode.agent_id != caller.id:
        raise Forbidden(f"episode {episode_id} belongs to another agent")
    return episode
