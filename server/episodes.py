"""Episodes as world transactions: begin, step, abandon and the idle reaper.

Each call is one database transaction under the world lock (``Runtime.world_transaction``):
lock the world row, check what the request may do, open a World over the store, apply, commit
the world (state + events), write the episode's records, commit, answer. Holding the world
lock before checking the step index makes a replayed or concurrent request see every step
acknowledged before it, and hands out ticks in commit order, so a replay of the log is exact.
"""

from __future__ import annotations

import time
from typing import Any

from server import forge
from server.errors import Conflict, Forbidden, NotFound, Unprocessable
from server.runtime import Caller, Runtime
from server.schemas import EpisodeStarted, ExpertHint, StepIn, StepOut, TaskOut
from world import engine, oracle, tasks
from world.errors import ActionError, TaskError
from world.state import World
from world.store import SqlBackend, records
from world.store.models import EpisodeRow, StepRow, TaskRow

TASK_PROMPT = "\n\nYour task is to: "  # as ALFWorld appends the goal to the first observation


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
    """Open an episode for the caller's avatar: with the task ``task_id`` names, the task
    ``spec`` (added to the pool as requested when new), or one drawn from the forge's pool."""
    avatar = _avatar_of(caller)
    requested = _requested(task_id, spec)
    if family is not None and family not in tasks.FAMILIES:
        raise Unprocessable(
            f"expected a family in {list(tasks.FAMILIES)}, got {family!r}", code="unknown_family"
        )
    now = time.time()
    with runtime.world_transaction() as (session, meta):
        world = World(SqlBackend(session, meta), runtime.rules)
        current = records.open_episode(session=session, avatar_id=avatar)
        if (
            current is not None
            and current.updated_at < now - runtime.settings.episode_idle_timeout_s
        ):
            _end(runtime, session, world, current, "abandoned", -1, now)
            current = None
        if current is not None:
            raise Conflict(
                "this avatar already has an open episode",
                code="episode_open",
                details={"episode_id": current.id},
            )
        key, draw, length = None, "requested", None
        if task_id is not None:
            row = records.get_task(session=session, task_id=task_id)
            if row is None:
                raise NotFound(f"no task {task_id!r}")
            task = tasks.Task.from_spec({"family": row.family, "params": row.params})
        elif requested is not None:
            task = requested
            row = forge.admit_requested(session, world, avatar, task)
        else:
            key = f"{avatar}/{meta['txn_seq'] + 1}"  # unique per world transaction, logged
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
                    f"no task can be made near this avatar now: {exc}", code="no_task"
                ) from exc
            task, row, draw, key = drawn.task, drawn.row, drawn.draw, drawn.key
            length = drawn.length
        world.emit(
            "episode_begun",
            avatar,
            [f"avatar:{avatar}"],
            {"key": key, "family": family, "task": {"id": task.id, **task.spec()}, "draw": draw},
        )
        seen = engine.observe(world, avatar)
        distance = _distance(runtime, world, task, avatar, known=length)
        world.commit()
        observation = seen.text + TASK_PROMPT + task.text
        episode = records.add_episode(
            session=session,
            agent_id=caller.id,
            avatar_id=avatar,
            task_id=row.id,
            family=row.family,
            status="open",
            outcome=None,
            budget=tasks.step_budget(task, runtime.settings.step_budget),
            last_step=0,
            begin_tick=world.tick,
            end_tick=None,
            observation=observation,
            admissible=list(seen.admissible),
            updated_at=now,
            distance=distance,
        )
        session.commit()
        return EpisodeStarted(
            episode_id=episode.id,
            task=task_out(row),
            observation=observation,
            admissible_actions=list(seen.admissible),
            tick=world.tick,
        )


def _requested(task_id: str | None, spec: dict[str, Any] | None) -> tasks.Task | None:
    """The task a begin's ``task`` spec describes (a 422 when invalid or given with an id)."""
    if spec is None:
        return None
    if task_id is not None:
        raise Unprocessable("expected task_id or task, not both", code="task_and_task_id")
    try:
        return tasks.Task.from_spec(spec)
    except TaskError as exc:
        raise Unprocessable(str(exc), code="invalid_task") from exc


def step(runtime: Runtime, caller: Caller, episode_id: int, body: StepIn) -> StepOut:
    """Apply step ``body.step`` of an episode, or answer it from the record if already applied.
    The policy's prompt, completion and version, when sent, are stored with the step."""
    index, action = body.step, body.action
    started = time.perf_counter()
    now = time.time()
    with runtime.world_transaction() as (session, meta):
        episode = _owned(session, caller, episode_id)
        recorded = records.get_step(session=session, episode_id=episode.id, step=index)
        if recorded is not None:
            if recorded.action != action:
                raise Conflict(
                    f"step {index} was already taken with another action",
                    code="step_mismatch",
                    details={"step": index, "recorded_action": recorded.action},
                )
            return step_out(recorded)
        world = World(SqlBackend(session, meta), runtime.rules)
        if (
            episode.status == "open"
            and episode.updated_at < now - runtime.settings.episode_idle_timeout_s
        ):
            _end(runtime, session, world, episode, "abandoned", -1, now)
            world.commit()
            session.commit()
        if episode.status != "open":
            raise Conflict(
                f"episode {episode.id} has ended ({episode.status})",
                code="episode_ended",
                details={"status": episode.status, "outcome": episode.outcome},
            )
        expected = episode.last_step + 1
        if index != expected:
            raise Conflict(
                f"expected step {expected}, got {index}",
                code="step_out_of_order",
                details={"expected": expected},
            )
        try:
            result = engine.step(world, episode.avatar_id, action)
        except ActionError as exc:
            raise Unprocessable(str(exc), code="invalid_action") from exc
        task_row = records.get_task(session=session, task_id=episode.task_id)
        assert task_row is not None
        spec = {"family": task_row.family, "params": task_row.params}
        task = tasks.Task.from_spec(spec)
        success = tasks.goal_met(world, task, episode.avatar_id)
        world.emit(
            "goal_check",
            episode.avatar_id,
            [f"avatar:{episode.avatar_id}"],
            {
                "episode": episode.id,
                "step": index,
                "task": spec,
                "task_id": task_row.id,
                "met": success,
            },
        )
        done = success or index >= episode.budget
        outcome = (1 if success else -1) if done else None
        distance = 0 if success else _distance(runtime, world, task, episode.avatar_id)
        episode.last_step, episode.updated_at = index, now
        if done:
            _end(
                runtime,
                session,
                world,
                episode,
                "succeeded" if success else "failed",
                outcome or -1,
                now,
            )
        world.commit()
        row = records.add_step(
            session=session,
            episode_id=episode.id,
            step=index,
            action=action,
            observation=result.observation,
            admissible=list(result.admissible),
            tick=result.tick,
            done=done,
            success=success,
            outcome=outcome,
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
    runtime.metrics.step(time.perf_counter() - started)
    return step_out(row)


def abandon(runtime: Runtime, caller: Caller, episode_id: int) -> EpisodeRow:
    with runtime.world_transaction() as (session, meta):
        episode = _owned(session, caller, episode_id)
        if episode.status != "open":
            raise Conflict(
                f"episode {episode.id} has already ended ({episode.status})",
                code="episode_ended",
                details={"status": episode.status, "outcome": episode.outcome},
            )
        world = World(SqlBackend(session, meta), runtime.rules)
        _end(runtime, session, world, episode, "abandoned", -1, time.time())
        world.commit()
        session.commit()
        return episode


def reap_idle(runtime: Runtime) -> int:
    """End every open episode idle past the timeout as abandoned; returns how many."""
    now = time.time()
    with runtime.world_transaction() as (session, meta):
        idle = records.idle_episodes(
            session=session, before=now - runtime.settings.episode_idle_timeout_s
        )
        world = World(SqlBackend(session, meta), runtime.rules)
        for episode in idle:
            _end(runtime, session, world, episode, "abandoned", -1, now)
        world.commit()
        session.commit()
    return len(idle)


def heartbeat(runtime: Runtime) -> int:
    """Advance the world's tick by one, logged as a ``tick`` input; returns the new tick."""
    with runtime.world_transaction() as (session, meta):
        world = World(SqlBackend(session, meta), runtime.rules)
        tick = engine.heartbeat(world)
        world.commit()
        session.commit()
    return tick


def _end(
    runtime: Runtime,
    session: Any,
    world: World,
    episode: EpisodeRow,
    status: str,
    outcome: int,
    now: float,
) -> None:
    """End an episode and log an ``episode_ended`` event (trainers follow these); the caller
    commits ``world`` and the session."""
    records.end_episode(
        session=session, episode=episode, status=status, outcome=outcome, tick=world.tick, now=now
    )
    world.emit(
        "episode_ended",
        episode.avatar_id,
        [f"avatar:{episode.avatar_id}"],
        {
            "episode_id": episode.id,
            "status": status,
            "outcome": outcome,
            "family": episode.family,
            "task_id": episode.task_id,
            "steps": episode.last_step,
        },
    )
    runtime.metrics.episode_ended(status)


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


def expert(runtime: Runtime, caller: Caller, episode_id: int) -> ExpertHint:
    """The oracle's next action for an open episode; every use is recorded."""
    with runtime.world_transaction() as (session, meta):
        episode = records.get_episode(session=session, episode_id=episode_id)
        if episode is None:
            raise NotFound(f"no episode {episode_id}")
        if episode.status != "open":
            raise Conflict(
                f"episode {episode.id} has ended ({episode.status})",
                code="episode_ended",
                details={"status": episode.status, "outcome": episode.outcome},
            )
        task_row = records.get_task(session=session, task_id=episode.task_id)
        assert task_row is not None
        task = tasks.Task.from_spec({"family": task_row.family, "params": task_row.params})
        world = World(SqlBackend(session, meta), runtime.rules)  # read only: never committed
        found = oracle.plan(world, task, episode.avatar_id)
        action = found.actions[0] if found and found.actions else None
        hint = ExpertHint(
            episode_id=episode.id,
            step=episode.last_step + 1,
            action=action,
            plan_length=len(found) if found is not None else None,
            tick=world.tick,
        )
        records.add_expert_hint(
            session=session, agent_id=caller.id, created_at=time.time(), **hint.model_dump()
        )
        session.commit()
        return hint


def _avatar_of(caller: Caller) -> str:
    if caller.avatar_id is None:
        raise Forbidden("this agent has no avatar (only policy agents act in the world)")
    return caller.avatar_id


def _owned(session: Any, caller: Caller, episode_id: int) -> EpisodeRow:
    episode = records.get_episode(session=session, episode_id=episode_id)
    if episode is None:
        raise NotFound(f"no episode {episode_id}")
    if episode.agent_id != caller.id:
        raise Forbidden(f"episode {episode_id} belongs to another agent")
    return episode
