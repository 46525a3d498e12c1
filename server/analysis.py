"""Reading histories for analysis: the queries behind the learning metrics and the report.

Each function returns plain frozen records (no ORM rows), so that the metrics computed from
them (``server/learning.py``) are pure functions, testable on hand-built histories. Large
tables are aggregated in SQL (outcomes per tick bucket, votes per distinct value), and every
per-item query is capped (the ``MAX_*`` constants), so one call costs about the same on a
history of a thousand episodes as on one of millions.

Conventions shared with the metrics:

- an episode *counts* once it has ended (succeeded, failed or abandoned; abandoned is a
  failure) and counts *at its end tick*: tick ranges and tick buckets use ``end_tick``;
- an episode's ``policy_version`` is the one recorded on its last step (the version that
  finished it), ``None`` when it has no step or the client sent none;
- "in order" means in begin order, ``(begin_tick, id)``: "the first N episodes of a task" are
  the first N it began (that have ended).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, case, func, select
from sqlalchemy.orm import Session, aliased

from forge.models import ForgeDecisionRow
from server.models import AgentRow, JudgmentRow, PolicyRow
from world.store.models import EpisodeRow, StepRow, TaskRow

FORGED_ORIGINS = ("harder", "easier")
MAX_PROBE_TASKS = 200  # probe tasks measured for forgetting
MAX_WINDOWS = 50  # windows of a probe task looked back over for its best earlier rate
MAX_FORGED_TASKS = 200  # most recently forged tasks measured for forward transfer
MAX_WORLD_CHANGES = 200  # most recent world changes measured for adaptation and recovery
HORIZON_WINDOWS = 10  # windows of episodes followed after a world change
REWARD_EPISODES = 5000  # most recent ended episodes whose judgments are scored
MAX_DECISIONS = 20000  # most recent forge decisions the report draws


@dataclass(frozen=True)
class Scope:
    """Which history to analyse; ``None`` means "any". Ticks are inclusive end ticks."""

    from_tick: int | None = None
    to_tick: int | None = None
    family: str | None = None


@dataclass(frozen=True)
class Outcome:
    """``episodes`` ended episodes that share an end tick, a family, a policy version and an
    outcome (read from SQL, one record per tick bucket and value; by hand, one per episode)."""

    end_tick: int
    family: str
    policy_version: str | None
    success: bool
    episodes: int = 1


@dataclass(frozen=True)
class EpisodeOutcome:
    """One ended episode, for metrics that follow episodes in order."""

    id: int
    task_id: str
    begin_tick: int
    end_tick: int
    success: bool


@dataclass(frozen=True)
class ForgedTask:
    """A task the forge derived from ``parent_id`` (origin harder or easier) at ``created_tick``."""

    id: str
    origin: str
    parent_id: str | None
    created_tick: int


@dataclass(frozen=True)
class Decision:
    """A forge decision without its evidence."""

    id: int
    cycle: int
    tick: int
    kind: str
    task_id: str | None
    verdict: str


@dataclass(frozen=True)
class StepVotes:
    """``votes`` judgments with one score on steps whose oracle plan distance went from
    ``before`` (after the previous step; the episode's own at step 1) to ``after``."""

    score: int
    before: int
    after: int
    votes: int = 1


@dataclass(frozen=True)
class EpisodeVotes:
    """``episodes`` ended, judged episodes sharing an end tick, the sign of their summed votes
    (``vote_sum``; any value of that sign) and an outcome (+1 or -1)."""

    end_tick: int
    vote_sum: int
    outcome: int
    episodes: int = 1


@dataclass(frozen=True)
class History:
    """What the learning metrics read, for one scope."""

    tick: int
    outcomes: list[Outcome]
    probe_tasks: list[str]
    probe_episodes: list[EpisodeOutcome]
    forged_tasks: list[ForgedTask]
    transfer_episodes: list[EpisodeOutcome]
    world_changes: list[Decision]
    change_episodes: list[EpisodeOutcome]
    step_votes: list[StepVotes]
    judged_steps: int
    episode_votes: list[EpisodeVotes]


def load_history(
    *, session: Session, scope: Scope, tick: int, bucket_ticks: int, window: int
) -> History:
    """Everything the learning metrics need. ``window`` is their N (episodes per window)."""
    forged = forged_tasks(session=session, scope=scope)
    changes = world_changes(session=session, scope=scope)
    probes = probe_tasks(session=session, scope=scope)
    return History(
        tick=tick,
        outcomes=outcomes(session=session, scope=scope, bucket_ticks=bucket_ticks),
        probe_tasks=probes,
        probe_episodes=tail_episodes(session=session, scope=scope, task_ids=probes, window=window),
        forged_tasks=forged,
        transfer_episodes=transfer_episodes(
            session=session, scope=scope, tasks=forged, window=window
        ),
        world_changes=changes,
        change_episodes=change_episodes(
            session=session, scope=scope, changes=changes, window=window
        ),
        step_votes=step_votes(session=session, scope=scope),
        judged_steps=judged_steps(session=session, scope=scope),
        episode_votes=episode_votes(session=session, scope=scope, bucket_ticks=bucket_ticks),
    )


# -- episodes --------------------------------------------------------------------------------
def _ended(stmt: Select[Any], scope: Scope, *, family_index: bool = True) -> Select[Any]:
    """Only ended episodes in scope. ``family_index=False`` words the family test so that no
    index serves it (``family || ''``): for queries that walk the begin-tick index a few rows
    at a time, which SQLite (without statistics) would otherwise trade for the family index
    and a sort of the whole family, once per query."""
    family = EpisodeRow.family if family_index else EpisodeRow.family + ""
    stmt = stmt.where(EpisodeRow.status != "open")
    if scope.from_tick is not None:
        stmt = stmt.where(EpisodeRow.end_tick >= scope.from_tick)
    if scope.to_tick is not None:
        stmt = stmt.where(EpisodeRow.end_tick <= scope.to_tick)
    if scope.family is not None:
        stmt = stmt.where(family == scope.family)
    return stmt


def _success() -> Any:
    return case((EpisodeRow.status == "succeeded", 1), else_=0)


def outcomes(*, session: Session, scope: Scope, bucket_ticks: int) -> list[Outcome]:
    """Ended episodes counted per tick bucket (reported at the bucket's first tick), family,
    policy version and outcome: one pass over the episodes in scope, one row per group."""
    last = aliased(StepRow)
    inner = (
        _ended(
            select(
                ((EpisodeRow.end_tick // bucket_ticks) * bucket_ticks).label("bucket"),
                EpisodeRow.family.label("family"),
                last.policy_version.label("version"),
                _success().label("success"),
            ),
            scope,
        )
        .outerjoin(last, and_(last.episode_id == EpisodeRow.id, last.step == EpisodeRow.last_step))
        .subquery()
    )
    rows = session.execute(
        select(inner.c.bucket, inner.c.family, inner.c.version, inner.c.success, func.count())
        .group_by(inner.c.bucket, inner.c.family, inner.c.version, inner.c.success)
        .order_by(inner.c.bucket, inner.c.family, inner.c.version, inner.c.success)
    )
    return [Outcome(int(b), f, v, bool(s), int(n)) for b, f, v, s, n in rows]


def _episode_outcomes(session: Session, stmt: Select[Any]) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(int(i), t, int(b), int(e), bool(s))
        for i, t, b, e, s in session.execute(stmt)
    ]


def _outcome_columns() -> tuple[Any, ...]:
    return (
        EpisodeRow.id,
        EpisodeRow.task_id,
        EpisodeRow.begin_tick,
        EpisodeRow.end_tick,
        _success().label("success"),
    )


def _ranked(scope: Scope, task_ids: Sequence[str], *, newest_first: bool, keep: int) -> Select[Any]:
    """Per task, its ``keep`` first (or last) ended episodes in scope, in begin order."""
    order = (
        (EpisodeRow.begin_tick.desc(), EpisodeRow.id.desc())
        if newest_first
        else (EpisodeRow.begin_tick, EpisodeRow.id)
    )
    rank = func.row_number().over(partition_by=EpisodeRow.task_id, order_by=order)
    inner = _ended(
        select(*_outcome_columns(), rank.label("rank")).where(
            EpisodeRow.task_id.in_(list(task_ids))
        ),
        scope,
    ).subquery()
    return (
        select(inner.c.id, inner.c.task_id, inner.c.begin_tick, inner.c.end_tick, inner.c.success)
        .where(inner.c.rank <= keep)
        .order_by(inner.c.begin_tick, inner.c.id)
    )


def probe_tasks(*, session: Session, scope: Scope) -> list[str]:
    stmt = select(TaskRow.id).where(TaskRow.probe.is_(True))
    if scope.family is not None:
        stmt = stmt.where(TaskRow.family == scope.family)
    return list(session.scalars(stmt.order_by(TaskRow.id).limit(MAX_PROBE_TASKS)))


def tail_episodes(
    *, session: Session, scope: Scope, task_ids: Sequence[str], window: int
) -> list[EpisodeOutcome]:
    """The last ``MAX_WINDOWS`` windows of ended episodes of each task, in begin order."""
    if not task_ids:
        return []
    stmt = _ranked(scope, task_ids, newest_first=True, keep=window * MAX_WINDOWS)
    return _episode_outcomes(session, stmt)


def forged_tasks(*, session: Session, scope: Scope) -> list[ForgedTask]:
    """The most recently forged tasks (origin harder or easier), oldest first."""
    stmt = select(TaskRow.id, TaskRow.origin, TaskRow.parent_id, TaskRow.created_tick).where(
        TaskRow.origin.in_(FORGED_ORIGINS)
    )
    if scope.family is not None:
        stmt = stmt.where(TaskRow.family == scope.family)
    stmt = stmt.order_by(TaskRow.created_tick.desc(), TaskRow.id.desc()).limit(MAX_FORGED_TASKS)
    return sorted(
        (ForgedTask(i, o, p, int(c)) for i, o, p, c in session.execute(stmt)),
        key=lambda t: (t.created_tick, t.id),
    )


def transfer_episodes(
    *, session: Session, scope: Scope, tasks: Sequence[ForgedTask], window: int
) -> list[EpisodeOutcome]:
    """Each forged task's first ``window`` ended episodes, and its parent's last ``window``
    that ended at or before the tick the task was created."""
    if not tasks:
        return []
    found = {
        e.id: e
        for e in _episode_outcomes(
            session, _ranked(scope, [t.id for t in tasks], newest_first=False, keep=window)
        )
    }
    for task in tasks:
        if task.parent_id is None:
            continue
        stmt = (
            _ended(select(*_outcome_columns()), scope)
            .where(EpisodeRow.task_id == task.parent_id, EpisodeRow.end_tick <= task.created_tick)
            .order_by(EpisodeRow.begin_tick.desc(), EpisodeRow.id.desc())
            .limit(window)
        )
        found.update((e.id, e) for e in _episode_outcomes(session, stmt))
    return sorted(found.values(), key=lambda e: (e.begin_tick, e.id))


def world_changes(*, session: Session, scope: Scope) -> list[Decision]:
    """The most recent ``world.*`` decisions in the tick range, oldest first."""
    stmt = _decisions(scope).where(ForgeDecisionRow.kind.like("world.%"))
    stmt = stmt.order_by(ForgeDecisionRow.id.desc()).limit(MAX_WORLD_CHANGES)
    return sorted(_decision_records(session, stmt), key=lambda d: d.id)


def change_episodes(
    *, session: Session, scope: Scope, changes: Sequence[Decision], window: int
) -> list[EpisodeOutcome]:
    """Around each change at tick t: the last ``window`` ended episodes begun before t and
    ended by t, and the first ``HORIZON_WINDOWS * window`` begun at or after t (the begin-tick index serves
    both)."""
    found: dict[int, EpisodeOutcome] = {}
    columns = select(*_outcome_columns())
    for change in changes:
        before = (
            _ended(columns, scope, family_index=False)
            .where(EpisodeRow.begin_tick < change.tick, EpisodeRow.end_tick <= change.tick)
            .order_by(EpisodeRow.begin_tick.desc(), EpisodeRow.id.desc())
            .limit(window)
        )
        after = (
            _ended(columns, scope, family_index=False)
            .where(EpisodeRow.begin_tick >= change.tick)
            .order_by(EpisodeRow.begin_tick, EpisodeRow.id)
            .limit(HORIZON_WINDOWS * window)
        )
        for stmt in (before, after):
            found.update((e.id, e) for e in _episode_outcomes(session, stmt))
    return sorted(found.values(), key=lambda e: (e.begin_tick, e.id))


# -- judgments -------------------------------------------------------------------------------
def _judged_episode_ids(scope: Scope) -> Select[Any]:
    """The ``REWARD_EPISODES`` most recent ended episodes in scope."""
    inner = (
        _ended(select(EpisodeRow.id), scope)
        .order_by(EpisodeRow.id.desc())
        .limit(REWARD_EPISODES)
        .subquery()
    )
    return select(inner.c.id)


def _votes_with_distances(scope: Scope, *columns: Any) -> Select[Any]:
    """``columns`` over judgments joined to their step, the step before it and the episode,
    keeping those whose distances before and after the step are both known."""
    previous = aliased(StepRow)
    before = case((StepRow.step == 1, EpisodeRow.distance), else_=previous.distance)
    stmt = (
        select(*columns, before.label("before"))
        .select_from(JudgmentRow)
        .join(
            StepRow,
            and_(StepRow.episode_id == JudgmentRow.episode_id, StepRow.step == JudgmentRow.step),
        )
        .join(EpisodeRow, EpisodeRow.id == JudgmentRow.episode_id)
        .outerjoin(
            previous,
            and_(previous.episode_id == StepRow.episode_id, previous.step == StepRow.step - 1),
        )
        .where(
            JudgmentRow.episode_id.in_(_judged_episode_ids(scope)),
            StepRow.distance.is_not(None),
            before.is_not(None),
        )
    )
    return stmt


def step_votes(*, session: Session, scope: Scope) -> list[StepVotes]:
    """Votes on steps with known distances, counted per (score, before, after)."""
    inner = _votes_with_distances(
        scope, JudgmentRow.score.label("score"), StepRow.distance.label("after")
    ).subquery()
    rows = session.execute(
        select(inner.c.score, inner.c.before, inner.c.after, func.count())
        .group_by(inner.c.score, inner.c.before, inner.c.after)
        .order_by(inner.c.score, inner.c.before, inner.c.after)
    )
    return [StepVotes(int(s), int(b), int(a), int(n)) for s, b, a, n in rows]


def judged_steps(*, session: Session, scope: Scope) -> int:
    """How many distinct steps :func:`step_votes` counts votes on."""
    inner = (
        _votes_with_distances(scope, JudgmentRow.episode_id, JudgmentRow.step).distinct().subquery()
    )
    return int(session.scalar(select(func.count()).select_from(inner)) or 0)


def episode_votes(*, session: Session, scope: Scope, bucket_ticks: int) -> list[EpisodeVotes]:
    """Judged ended episodes counted per tick bucket, sign of summed votes and outcome."""
    sums = (
        select(JudgmentRow.episode_id, func.sum(JudgmentRow.score).label("total"))
        .where(JudgmentRow.episode_id.in_(_judged_episode_ids(scope)))
        .group_by(JudgmentRow.episode_id)
        .subquery()
    )
    sign = case((sums.c.total > 0, 1), (sums.c.total < 0, -1), else_=0)
    inner = (
        select(
            ((EpisodeRow.end_tick // bucket_ticks) * bucket_ticks).label("bucket"),
            sign.label("sign"),
            case((EpisodeRow.status == "succeeded", 1), else_=-1).label("outcome"),
        )
        .join(sums, sums.c.episode_id == EpisodeRow.id)
        .subquery()
    )
    rows = session.execute(
        select(inner.c.bucket, inner.c.sign, inner.c.outcome, func.count())
        .group_by(inner.c.bucket, inner.c.sign, inner.c.outcome)
        .order_by(inner.c.bucket, inner.c.sign, inner.c.outcome)
    )
    return [EpisodeVotes(int(b), int(s), int(o), int(n)) for b, s, o, n in rows]


# -- forge decisions and run figures ---------------------------------------------------------
def _decisions(scope: Scope) -> Select[Any]:
    stmt: Select[*tuple[Any, ...]] = select(
        ForgeDecisionRow.id,
        ForgeDecisionRow.cycle,
        ForgeDecisionRow.tick,
        ForgeDecisionRow.kind,
        ForgeDecisionRow.task_id,
        ForgeDecisionRow.verdict,
    )
    if scope.from_tick is not None:
        stmt = stmt.where(ForgeDecisionRow.tick >= scope.from_tick)
    if scope.to_tick is not None:
        stmt = stmt.where(ForgeDecisionRow.tick <= scope.to_tick)
    return stmt


def _decision_records(session: Session, stmt: Select[Any]) -> list[Decision]:
    return [
        Decision(int(i), int(c), int(t), k, task, v)
        for i, c, t, k, task, v in session.execute(stmt)
    ]


def decisions(*, session: Session, scope: Scope) -> list[Decision]:
    """The most recent ``MAX_DECISIONS`` forge decisions in the tick range, oldest first."""
    stmt = _decisions(scope).order_by(ForgeDecisionRow.id.desc()).limit(MAX_DECISIONS)
    return sorted(_decision_records(session, stmt), key=lambda d: d.id)


@dataclass(frozen=True)
class RunFigures:
    """How much happened: what a summary of the run states."""

    episodes_by_status: dict[str, int]
    agents_by_role: dict[str, int]
    tasks_by_origin: dict[str, int]
    tasks_by_status: dict[str, int]
    decisions_by_kind: dict[str, dict[str, int]]  # kind -> verdict -> count
    policy_versions: list[str]  # versions recorded on steps
    registered_models: dict[str, int]  # kind (policy, reward) -> versions registered
    steps: int
    judgments: int


def _counts(session: Session, *columns: Any) -> list[Any]:
    return list(session.execute(select(*columns, func.count()).group_by(*columns)))


def run_figures(*, session: Session) -> RunFigures:
    decided: dict[str, dict[str, int]] = {}
    for kind, verdict, n in _counts(session, ForgeDecisionRow.kind, ForgeDecisionRow.verdict):
        decided.setdefault(kind, {})[verdict] = int(n)
    versions = session.scalars(
        select(StepRow.policy_version).where(StepRow.policy_version.is_not(None)).distinct()
    )
    return RunFigures(
        episodes_by_status={s: int(n) for s, n in _counts(session, EpisodeRow.status)},
        agents_by_role={r: int(n) for r, n in _counts(session, AgentRow.role)},
        tasks_by_origin={o: int(n) for o, n in _counts(session, TaskRow.origin)},
        tasks_by_status={s: int(n) for s, n in _counts(session, TaskRow.status)},
        decisions_by_kind=decided,
        policy_versions=sorted(v for v in versions if v is not None),
        registered_models={k: int(n) for k, n in _counts(session, PolicyRow.kind)},
        steps=int(session.scalar(select(func.count()).select_from(StepRow)) or 0),
        judgments=int(session.scalar(select(func.count()).select_from(JudgmentRow)) or 0),
    )
