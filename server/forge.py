"""The forge inside the server: the pool draw at episode begin, a forge cycle as one world
transaction, pause, resume and configuration.

The forge's decisions are pure (``forge.cycle``, ``forge.pool``); this module loads what they
need from the store, writes what they decide and owns the transactions. A cycle asks the
optional language model (over HTTP) *before* it takes the world lock, so a slow model never
holds up steps.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from forge import critic, language, mutate
from forge import cycle as forge_cycle
from forge import pool as forge_pool
from forge import records as forge_records
from forge.config import ForgeConfig
from forge.cycle import Decision, Suggestion
from forge.errors import ConfigError, LanguageModelError
from forge.models import ForgeDecisionRow, ForgeStateRow
from forge.pool import PoolTask
from server import records as server_records
from server.errors import Conflict, Unprocessable
from server.runtime import Runtime
from world import rng, sampling, tasks
from world.contract import ErrorCode
from world.errors import TaskError, WorldError
from world.families import get_family
from world.snapshot import Snapshot
from world.state import World
from world.store import SqlBackend, WorldRow, records
from world.store.models import TaskRow

log = logging.getLogger("bigworld.server")
LIVE = ("active", "pending")


@dataclass(frozen=True)
class Drawn:
    """The task an episode begin got, and how: probe, trial, pool, fresh or requested."""

    task: tasks.Task
    row: TaskRow
    draw: str
    key: str | None  # the sampling key when a fresh task was sampled (logged for replay)
    length: int | None = None  # the oracle's plan length from here, when the draw planned it


# -- state and configuration -------------------------------------------------------------------
def state(session: Session) -> tuple[ForgeStateRow, ForgeConfig]:
    """The forge's row (created with the default config if missing; needs the world lock)."""
    row = forge_records.forge_state(session=session, config=ForgeConfig().to_json())
    assert row is not None
    return row, ForgeConfig.from_json(row.config)


def peek_state(session: Session) -> tuple[bool, int, int, ForgeConfig]:
    """(paused, cycle, draws, config) without writing anything."""
    row = forge_records.forge_state(session=session)
    if row is None:
        return False, 0, 0, ForgeConfig()
    return row.paused, row.cycle, row.draws, ForgeConfig.from_json(row.config)


def set_paused(runtime: Runtime, paused: bool) -> None:
    def work(session: Session, _world_row: WorldRow) -> None:
        row, _ = state(session)
        row.paused = paused
        session.commit()

    runtime.world_transaction(work)


def update_config(runtime: Runtime, patch: object) -> ForgeConfig:
    """Apply a partial update; a bad one is a 422 and changes nothing."""

    def work(session: Session, _world_row: WorldRow) -> ForgeConfig:
        row, config = state(session)
        try:
            new = config.updated(patch)
        except ConfigError as exc:
            raise Unprocessable(
                str(exc), code=ErrorCode.INVALID_CONFIG, details=exc.problems
            ) from exc
        row.config = new.to_json()
        session.commit()
        return new

    return runtime.world_transaction(work)


# -- the draw at episode begin -----------------------------------------------------------------
def draw(
    session: Session,
    world: World,
    avatar: str,
    family: str | None,
    key: str,
    now: float,
    *,
    go_to_hops: int = 1,
) -> Drawn:
    """A task for the avatar from the pool (see ``forge.pool``), checked by the oracle from
    its current state; else a freshly sampled one added to the pool. Runs inside the world
    lock: it loads the live pool rows and plans at most ``draw_tries`` candidates.

    Without a family, once the curriculum has led the pool to a go_to rung
    (``forge.pool.rung``), the draw follows it: pool go_to tasks (besides probes and pending
    trials), else a fresh go_to near the avatar at the rung's hops. A fresh sample for a
    family whose candidates take hops (go_to, follow, trail) takes them uniformly in
    1..``go_to_hops``, from the world's generator.
    Raises TaskError when no task can be made near the avatar."""
    row, config = state(session)
    row.draws += 1
    number = row.draws
    here = world.avatar(avatar).place
    tasks = [
        PoolTask(**values)
        for values in records.pool_values(session=session, statuses=LIVE, family=family)
    ]
    current = None
    if family is None and config.curriculum:  # the rung is the whole pool's, not just near
        current = forge_pool.rung([t for t in tasks if t.family == "go_to"])
    live = [t for t in tasks if forge_pool.near(t, here)]
    begun = records.episodes_begun(
        session=session, task_ids=[t.id for t in live if t.status == "pending" or t.probe]
    )
    pool = [replace(t, begun=begun.get(t.id, 0)) for t in live]
    mode = forge_pool.draw_mode(
        config, seed=world.seed, draw=number, have_probes=any(t.probe for t in pool)
    )
    if mode != forge_pool.FRESH:
        order = forge_pool.candidates(
            pool, mode, config, seed=world.seed, draw=number, current=current
        )
        for candidate in order[: config.draw_tries]:
            length = mutate.check(world, candidate.task, avatar, config.plan_budget)
            if length:  # None: no plan from here; 0: its goal already holds
                found = records.get_task(session=session, task_id=candidate.id)
                assert found is not None  # read in this transaction
                if found.difficulty is None:
                    found.difficulty = length
                how = (
                    mode
                    if mode == forge_pool.PROBE
                    else ("trial" if found.status == "pending" else "pool")
                )
                return Drawn(candidate.task, found, how, None, length)
    task = _fresh(world, avatar, family, key, config, number, current, go_to_hops)
    existing = records.get_task(session=session, task_id=task.id)
    if existing is not None:
        return Drawn(task, existing, "fresh", key)
    probe = records.probe_count(session=session, family=task.family) < config.probes_per_family
    length = mutate.check(world, task, avatar, config.plan_budget)
    saved = records.save_task(
        session=session,
        task_id=task.id,
        spec=task.spec(),
        text=task.text,
        tick=world.tick,
        origin="probe" if probe else "sampled",
        probe=probe,
        reason="fixed probe set: measures forgetting" if probe else "sampled at a begin",
        difficulty=length,
    )
    if probe:
        forge_records.add_decision(
            session=session,
            cycle=row.cycle,
            tick=world.tick,
            kind="task.probe",
            task_id=task.id,
            candidate_id=None,
            verdict="chosen",
            evidence={
                "family": task.family,
                "spec": task.spec(),
                "probes_per_family": config.probes_per_family,
                "draw": number,
                "avatar": avatar,
            },
            created_at=now,
        )
    return Drawn(task, saved, "fresh", key, length)


def fresh_hops(seed: int, draw: int, go_to_hops: int) -> int:
    """The hops of a fresh go_to sampled for a begin that asked for go_to: uniform in
    1..``go_to_hops``, a pure function of (world seed, draw number)."""
    most = max(1, go_to_hops)
    return min(most, 1 + int(rng.uniform(seed, draw, "forge", "draw:go_to_hops") * most))


def _fresh(
    world: World,
    avatar: str,
    family: str | None,
    key: str,
    config: ForgeConfig,
    number: int,
    current: forge_pool.Rung | None,
    go_to_hops: int,
) -> tasks.Task:
    """A freshly sampled task for the draw: for a go_to, follow or trail request, one at
    ``fresh_hops``; without a family once the curriculum has a rung, a go_to at the rung's hops
    carrying its ``from_family`` (then any family); else a task of ``family`` (or of any drawn
    family). A go_to, follow or trail takes fewer hops where no place lies that far (down to one)."""
    budget = config.plan_budget
    if family is not None and get_family(family).hopped:
        hops = fresh_hops(world.seed, number, go_to_hops)
        return _walk_near(world, avatar, key, budget, hops, family)
    if current is not None:
        with contextlib.suppress(TaskError):
            task = _walk_near(world, avatar, key, budget, current.hops, "go_to")
            if current.from_family is None:
                return task
            return tasks.Task.make("go_to", {**task.params, "from_family": current.from_family})
    return sampling.sample_task(world, avatar, key=key, family=family, budget=budget)


def _walk_near(
    world: World, avatar: str, key: str, budget: int, hops: int, family: str
) -> tasks.Task:
    """A task of ``family`` (go_to, follow or trail) at ``hops`` from the avatar, else at fewer (down
    to one; TaskError when there is none)."""
    for rung in range(hops, 1, -1):
        with contextlib.suppress(TaskError):
            return sampling.sample_task(
                world, avatar, key=key, family=family, budget=budget, hops=rung
            )
    return sampling.sample_task(world, avatar, key=key, family=family, budget=budget, hops=1)


def admit_requested(session: Session, world: World, avatar: str, task: tasks.Task) -> TaskRow:
    """The pool row of a task an agent asked for by spec; a new one must pass the oracle from
    the avatar's current state (else a 409) and joins the pool as ``requested``."""
    found = records.get_task(session=session, task_id=task.id)
    if found is not None:
        return found
    _, config = state(session)
    length = mutate.check(world, task, avatar, config.plan_budget)
    if not length:
        raise Conflict(
            "the oracle finds no plan for this task from here now"
            if length is None
            else "this task's goal already holds",
            code=ErrorCode.UNSOLVABLE_TASK,
        )
    return records.save_task(
        session=session,
        task_id=task.id,
        spec=task.spec(),
        text=task.text,
        tick=world.tick,
        origin="requested",
        reason="requested at a begin",
        difficulty=length,
    )


def _pool_task(row: TaskRow, **extra: Any) -> PoolTask:
    return PoolTask(
        id=row.id,
        family=row.family,
        params=row.params,
        status=row.status,
        origin=row.origin,
        probe=row.probe,
        parent_id=row.parent_id,
        accuracy=row.accuracy,
        rollouts=row.rollouts or 0,
        difficulty=row.difficulty,
        created_tick=row.created_tick,
        **extra,
    )


# -- a forge cycle -----------------------------------------------------------------------------
def run_cycle(runtime: Runtime, *, manual: bool = True) -> list[ForgeDecisionRow]:
    """One forge cycle as one world transaction; returns the decisions it stored.

    A manual cycle on a disabled or paused forge is a 409; the background job skips it."""
    if not runtime.settings.forge_enabled:
        raise Conflict("the forge is disabled on this server", code=ErrorCode.FORGE_DISABLED)
    suggestions = _ask_language_model(runtime)
    now = time.time()

    def work(session: Session, world_row: WorldRow) -> list[ForgeDecisionRow]:
        row, config = state(session)
        if row.paused:
            if manual:
                raise Conflict("the forge is paused", code=ErrorCode.FORGE_PAUSED)
            return []
        number = row.cycle + 1
        world = World(SqlBackend(session, world_row), runtime.rules)
        rows, pool, history = _load(session, config, number)
        result = forge_cycle.run_cycle(
            world,
            pool,
            history,
            config,
            number,
            traces=lambda ids: _traces(session, ids),
            suggestions=suggestions,
            known=records.KnownTasks(session),
        )
        world.commit()
        stored = _write(session, rows, result, number, world.tick, now)
        row.cycle, row.last_tick = number, world.tick
        session.commit()
        return stored

    return runtime.world_transaction(work)


def _load(
    session: Session, config: ForgeConfig, number: int
) -> tuple[dict[str, TaskRow], list[PoolTask], dict[str, list[critic.Rollout]]]:
    """The live pool's rows by id, as the forge sees them, and their recent rollouts."""
    rows = records.pool_tasks(session=session, statuses=LIVE)
    pending = [r.id for r in rows if r.status == "pending"]
    proposals = forge_records.proposals_of(session=session, candidate_ids=pending)
    last = forge_records.last_proposals(session=session, task_ids=[r.id for r in rows])
    pool = [
        _pool_task(
            r,
            baseline=proposals.get(r.id, {}).get("accuracy"),
            last_proposal_cycle=last.get(r.id),
        )
        for r in rows
    ]
    history = rollouts(session, [r.id for r in rows], max(config.window, config.trial_size))
    return {r.id: r for r in rows}, pool, history


def rollouts(
    session: Session, task_ids: Sequence[str], per_task: int
) -> dict[str, list[critic.Rollout]]:
    """Each task's newest ended rollouts, newest first, as the critic reads them."""
    history: dict[str, list[critic.Rollout]] = {t: [] for t in task_ids}
    for r in server_records.recent_rollouts(session=session, task_ids=task_ids, per_task=per_task):
        history[r["task_id"]].append(
            critic.Rollout(
                episode_id=r["id"],
                task_id=r["task_id"],
                avatar_id=r["avatar_id"],
                success=r["status"] == "succeeded",
                policy_version=r["policy_version"],
                steps=r["last_step"],
                end_tick=r["end_tick"] or 0,
                judged_steps=r["judged_steps"],
                negative_steps=r["negative_steps"],
            )
        )
    return history


def _traces(session: Session, episode_ids: Sequence[int]) -> dict[int, list[critic.StepTrace]]:
    steps = records.steps_of_episodes(session=session, episode_ids=episode_ids)
    return {
        episode: [critic.StepTrace(s.step, s.action, s.observation, s.distance) for s in rows]
        for episode, rows in steps.items()
    }


def _write(
    session: Session,
    rows: Mapping[str, TaskRow],
    result: forge_cycle.CycleResult,
    number: int,
    tick: int,
    now: float,
) -> list[ForgeDecisionRow]:
    for task_id, fb in result.feedback.items():
        rows[task_id].accuracy, rows[task_id].rollouts = fb.accuracy, fb.rollouts
    for new in result.new_tasks:
        records.save_task(
            session=session,
            task_id=new.task.id,
            spec=new.task.spec(),
            text=new.task.text,
            tick=tick,
            status="pending",
            origin=new.origin,
            parent_id=new.parent_id,
            reason=new.reason,
            difficulty=new.difficulty,
        )
    for change in result.changes:
        records.set_task_status(
            session=session,
            row=rows[change.task_id],
            status=change.status,
            reason=change.reason,
            tick=tick,
        )
    return [_store(session, d, number, tick, now) for d in result.decisions]


def _store(
    session: Session, decision: Decision, number: int, tick: int, now: float
) -> ForgeDecisionRow:
    return forge_records.add_decision(
        session=session,
        cycle=number,
        tick=tick,
        kind=decision.kind,
        task_id=decision.task_id,
        candidate_id=decision.candidate_id,
        verdict=decision.verdict,
        evidence=decision.evidence,
        created_at=now,
    )


# -- the language model, asked before the world lock is taken ------------------------------
def _ask_language_model(runtime: Runtime) -> Mapping[str, Suggestion]:
    """Variants and failure summaries from the configured model for the tasks this cycle will
    propose for (as far as a read of the store now can tell); {} when none is configured."""
    with runtime.sessions() as session:
        paused, number, _, config = peek_state(session)
        wants_rewrite = config.rewriter == "language_model"
        if config.lm_url is None or paused or not (wants_rewrite or config.lm_summaries):
            return {}
        _, pool, history = _load(session, config, number + 1)
        feedback = {t.id: critic.feedback(t.id, history.get(t.id, ()), config) for t in pool}
        world = World(SqlBackend(session), runtime.rules)  # read only: never committed
        model = language.LanguageModel(config.lm_url, config.lm_model, config.lm_timeout_s)
        out: dict[str, Suggestion] = {}
        try:
            for task, way in forge_cycle.due(pool, feedback, config, number + 1):
                out[task.id] = _suggest(world, session, model, task, way, feedback[task.id], history.get(task.id, []), config, wants_rewrite)  # fmt: skip
        finally:
            model.close()
        return out


def _suggest(
    world: World,
    session: Session,
    model: language.LanguageModel,
    task: PoolTask,
    way: str,
    fb: critic.Feedback,
    history: Sequence[critic.Rollout],
    config: ForgeConfig,
    wants_rewrite: bool,
) -> Suggestion:
    failed = [r.episode_id for r in history if not r.success][: config.summary_rollouts]
    traces = _traces(session, failed)
    failures = [critic.failure_summary(traces[i]) for i in failed if traces.get(i)]
    summary = None
    if config.lm_summaries and failures:
        try:
            summary = language.summarize(model, task.task, failures)
        except LanguageModelError as exc:
            log.warning("forge: language-model summary failed: %s", exc)
    if not wants_rewrite or fb.last_avatar is None:
        return Suggestion(summary=summary)
    examples: list[tasks.Task] = []
    with contextlib.suppress(WorldError):  # examples are a courtesy to the model
        snap = Snapshot.of(world, fb.last_avatar)
        examples = mutate.variants(snap, task.task)[: language.EXAMPLES]
    evidence = {**fb.evidence(), "failures": [f["text"] for f in failures]}
    try:
        made = language.rewrite(model, task.task, way, evidence, examples)
        return Suggestion(spec=made.spec(), summary=summary)
    except LanguageModelError as exc:
        return Suggestion(error=str(exc), summary=summary)
