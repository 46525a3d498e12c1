"""Store functions for the records played in the world: tasks and the forge's pool,
episodes and steps; and the paging and chunking helpers (``Page``, ``page``, ``id_chunks``)
that the server's records (``server/records.py``) and the forge's (``forge/records.py``)
use too.

Every function takes ``*, session`` and never commits: the request (or the tick) that calls
it owns the transaction. List functions page by id with an opaque cursor (the last id seen).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    Select,
    bindparam,
    cast,
    func,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from world.store.backend import (
    AROUND_COLUMNS,
    AVATAR_COLUMNS,
    CROWD,
    avatar_around,
    crowd_select,
)
from world.store.driver import Statement
from world.store.models import Base, EpisodeRow, StepRow, TaskRow
from world.tasks import Task


@dataclass(frozen=True)
class Page:
    """One page of a list: rows in id order and the cursor of the next page (or None)."""

    items: list[Any]
    next_cursor: str | None


def page(
    session: Session, stmt: Select[Any], id_column: Any, *, limit: int, cursor: str | None
) -> Page:
    """Keyset pagination: rows after ``cursor`` in ascending ``id_column`` order."""
    if cursor is not None:
        stmt = stmt.where(id_column > int(cursor))
    rows = list(session.scalars(stmt.order_by(id_column).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, str(_id_of(rows[-1], id_column)) if more and rows else None)


def _id_of(row: Any, id_column: Any) -> Any:
    return getattr(row, id_column.key)


# -- tasks ---------------------------------------------------------------------------------
def save_task(
    *,
    session: Session,
    task_id: str,
    spec: dict[str, Any],
    text: str,
    tick: int,
    status: str = "active",
    origin: str = "sampled",
    parent_id: str | None = None,
    reason: str | None = None,
    probe: bool = False,
    difficulty: int | None = None,
) -> TaskRow:
    """The task row for ``spec`` (``task_id`` is the spec's stable hash), created if new with
    the given pool fields; an existing row is returned unchanged."""
    row = session.get(TaskRow, task_id)
    if row is None:
        row = TaskRow(
            id=task_id,
            family=spec["family"],
            params=spec["params"],
            text=text,
            created_tick=tick,
            status=status,
            origin=origin,
            parent_id=parent_id,
            reason=reason,
            probe=probe,
            difficulty=difficulty,
            status_tick=tick,
            rollouts=0,
        )
        session.add(row)
        session.flush()
    return row


def get_task(*, session: Session, task_id: str) -> TaskRow | None:
    return session.get(TaskRow, task_id)


def tasks_by_id(*, session: Session, task_ids: Sequence[str]) -> dict[str, TaskRow]:
    """The rows of ``task_ids`` by id, one query per CHUNK ids."""
    out: dict[str, TaskRow] = {}
    for chunk in id_chunks(sorted(set(task_ids))):
        out.update((r.id, r) for r in session.scalars(select(TaskRow).where(TaskRow.id.in_(chunk))))
    return out


def task_of(row: TaskRow) -> Task:
    """The task a pool row holds."""
    return Task.make(row.family, row.params)


def episode_task(*, session: Session, episode: EpisodeRow) -> Task:
    """The task an episode is doing (its row always exists: episodes reference it)."""
    row = get_task(session=session, task_id=episode.task_id)
    assert row is not None
    return task_of(row)


def list_tasks(
    *,
    session: Session,
    family: str | None,
    limit: int,
    cursor: str | None,
    status: str | None = None,
) -> Page:
    stmt = select(TaskRow)
    if family is not None:
        stmt = stmt.where(TaskRow.family == family)
    if status is not None:
        stmt = stmt.where(TaskRow.status == status)
    if cursor is not None:
        stmt = stmt.where(TaskRow.id > cursor)
    rows = list(session.scalars(stmt.order_by(TaskRow.id).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, rows[-1].id if more and rows else None)


def task_stats(*, session: Session, task_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per task: episodes by status (open, succeeded, failed, abandoned)."""
    stats: dict[str, dict[str, int]] = {t: {} for t in task_ids}
    if not task_ids:
        return stats
    rows = session.execute(
        select(EpisodeRow.task_id, EpisodeRow.status, func.count())
        .where(EpisodeRow.task_id.in_(list(task_ids)))
        .group_by(EpisodeRow.task_id, EpisodeRow.status)
    )
    for task_id, status, count in rows:
        stats[task_id][status] = count
    return stats


# -- episodes and steps --------------------------------------------------------------------
def add_episode(*, session: Session, **fields: Any) -> EpisodeRow:
    episode = EpisodeRow(**fields)
    session.add(episode)
    session.flush()
    return episode


def get_episode(*, session: Session, episode_id: int) -> EpisodeRow | None:
    return session.get(EpisodeRow, episode_id)


def open_avatars(*, session: Session, agent_id: int) -> list[tuple[int, str, float]]:
    """(episode id, avatar id, last touched) of the agent's open episodes, oldest first: three
    columns, not rows, as a fleet's agent holds a thousand."""
    rows = session.execute(
        select(EpisodeRow.id, EpisodeRow.avatar_id, EpisodeRow.updated_at)
        .where(EpisodeRow.agent_id == agent_id, EpisodeRow.status == "open")
        .order_by(EpisodeRow.id)
    )
    return [(int(episode), str(avatar), float(touched)) for episode, avatar, touched in rows]


def idle_episodes(*, session: Session, before: float) -> list[EpisodeRow]:
    """Open episodes last touched before ``before`` (unix seconds)."""
    return list(
        session.scalars(
            select(EpisodeRow).where(EpisodeRow.status == "open", EpisodeRow.updated_at < before)
        )
    )


_EPISODES = Base.metadata.tables["episodes"]
# The SET clause is the parameters' other keys (compiled once for each set of keys).
_EPISODE_UPDATE = Statement(update(_EPISODES).where(_EPISODES.c.id == bindparam("episode_id")))


def update_episode(*, session: Session, episode: EpisodeRow, **values: Any) -> None:
    """Write ``values`` to the episode's row with one UPDATE on the driver's cursor, and into
    ``episode`` as its loaded state: steps write their episode without an ORM flush."""
    _EPISODE_UPDATE.run(session.connection(), {"episode_id": episode.id, **values})
    for key, value in values.items():
        set_committed_value(episode, key, value)


def ended(*, status: str, outcome: int, tick: int, now: float) -> dict[str, Any]:
    """The columns an episode's end writes (with :func:`update_episode`, or with its last step,
    :func:`record_step`)."""
    return {"status": status, "outcome": outcome, "end_tick": tick, "updated_at": now}


def list_episodes(
    *,
    session: Session,
    agent: int | None = None,
    task: str | None = None,
    family: str | None = None,
    status: str | None = None,
    from_tick: int | None = None,
    to_tick: int | None = None,
    needs_votes: int | None = None,
    policy_version: str | None = None,
    limit: int,
    cursor: str | None,
) -> Page:
    stmt = select(EpisodeRow)
    if needs_votes is not None:
        # Ended episodes with a step that has fewer than ``needs_votes`` judgments. Found
        # through the ``min_votes`` index first: ordered by id, SQLite would rather walk
        # every episode ever played.
        short = select(EpisodeRow.id).where(EpisodeRow.min_votes < needs_votes)
        stmt = stmt.where(
            EpisodeRow.id.in_(short), EpisodeRow.status != "open", EpisodeRow.last_step > 0
        )
    if policy_version is not None:
        used = select(StepRow.step).where(
            StepRow.episode_id == EpisodeRow.id, StepRow.policy_version == policy_version
        )
        stmt = stmt.where(used.exists())
    if agent is not None:
        stmt = stmt.where(EpisodeRow.agent_id == agent)
    if task is not None:
        stmt = stmt.where(EpisodeRow.task_id == task)
    if family is not None:
        stmt = stmt.where(EpisodeRow.family == family)
    if status is not None:
        stmt = stmt.where(EpisodeRow.status == status)
    if from_tick is not None:
        stmt = stmt.where(EpisodeRow.begin_tick >= from_tick)
    if to_tick is not None:
        stmt = stmt.where(EpisodeRow.begin_tick <= to_tick)
    return page(session, stmt, EpisodeRow.id, limit=limit, cursor=cursor)


def get_step(*, session: Session, episode_id: int, step: int) -> StepRow | None:
    return session.get(StepRow, (episode_id, step))


@dataclass(frozen=True)
class StepRead:
    """What a step request needs to read, in one query: the episode, its task's row, and the
    step of the index asked for when it is already recorded (a resend).

    The rows are read on the driver's cursor and handed out as transient objects, not in the
    session: the step path writes them with statements of its own (:func:`record_step`),
    never through the ORM's flush."""

    episode: EpisodeRow
    task: TaskRow
    recorded: StepRow | None
    # Where asked for and the avatar is stored, for SqlBackend.read_around (a step's world
    # reads them next): the episode's avatar's rows (backend.AROUND_COLUMNS), and the crowd
    # limit with the rows of the others standing with it (backend.crowd_select's)
    around: list[list[Any]] | None = None
    crowd: tuple[int, list[dict[str, Any]]] | None = None
    # With them, where its task's goal looks into a receptacle (the task's params "place" and
    # "receptacle"): that place, the receptacle's id and the rows of the things inside it
    contents: tuple[str, int, list[dict[str, Any]]] | None = None


_TASKS = Base.metadata.tables["tasks"]
_STEPS = Base.metadata.tables["steps"]
_READ_COLUMNS = (*_EPISODES.columns, *_TASKS.columns, *_STEPS.columns)
_STEP_READ_SELECT = (
    select(*_READ_COLUMNS)
    .join_from(_EPISODES, _TASKS, _TASKS.c.id == _EPISODES.c.task_id)
    .outerjoin(
        _STEPS, (_STEPS.c.episode_id == _EPISODES.c.id) & (_STEPS.c.step == bindparam("step"))
    )
    .where(_EPISODES.c.id == bindparam("episode_id"))
)
_STEP_READ = Statement(_STEP_READ_SELECT, _READ_COLUMNS)
_STEP_INSERT = Statement(_STEPS.insert())


def _nulls(columns: Sequence[Any]) -> list[Any]:
    return [cast(null(), c.type) for c in columns]


# The same, and in the same statement what a step's world reads first (a round trip less each,
# issue 38): the episode's avatar as SqlBackend.load_avatar reads it, the first others
# standing with it as its load_crowd does (``crowd_limit`` of them), and what lies in the
# receptacle its task's goal looks into as its load_contents does (the place families' and
# gather's params "place" and "receptacle"; no rows for a task without them). The step's row
# comes with nulls for the rest, the avatar's rows (none where it is not stored) with nulls
# for the step's columns and the crowd's, the crowd's rows with their count and rank by id,
# and the receptacle's things with nulls but for the thing's columns.
_RANK = Column("rank", Integer)
_MORE = (CROWD, _RANK)
_AVATAR_OF = (
    select(_EPISODES.c.avatar_id).where(_EPISODES.c.id == bindparam("episode_id")).scalar_subquery()
)
_AVATARS = Base.metadata.tables["avatars"]
_ME = _AVATARS.alias("me")
_CROWD = (
    crowd_select(
        select(_ME.c.place).where(_ME.c.id == _AVATAR_OF).scalar_subquery(),
        _AVATAR_OF,
        bindparam("crowd_limit"),
    )
    .add_columns(func.row_number().over(order_by=_AVATARS.c.id).label(_RANK.name))
    .subquery()
)
_THINGS = Base.metadata.tables["things"]
_GOAL_PLACE, _GOAL_RECEPTACLE = "place", "receptacle"  # the params a goal looks into
_INSIDE = (_THINGS.c.place == _TASKS.c.params[_GOAL_PLACE].as_string()) & (
    _THINGS.c.container == cast(_TASKS.c.params[_GOAL_RECEPTACLE].as_string(), BigInteger)
)
_STEP_AND_AVATAR_READ = Statement(
    union_all(
        _STEP_READ_SELECT.add_columns(*_nulls([*AROUND_COLUMNS, *_MORE])),
        avatar_around(_EPISODES.c.avatar_id, _nulls(_READ_COLUMNS))
        .add_columns(*_nulls(_MORE))
        .where(_EPISODES.c.id == bindparam("episode_id")),
        select(
            *_nulls(_READ_COLUMNS),
            *(_CROWD.c[c.name] for c in AVATAR_COLUMNS),
            *_nulls(AROUND_COLUMNS[len(AVATAR_COLUMNS) :]),
            *(_CROWD.c[c.name] for c in _MORE),
        ),
        select(*_nulls([*_READ_COLUMNS, *AVATAR_COLUMNS]), *_THINGS.columns, *_nulls(_MORE))
        .select_from(
            _EPISODES.join(_TASKS, _TASKS.c.id == _EPISODES.c.task_id).join(_THINGS, _INSIDE)
        )
        .where(_EPISODES.c.id == bindparam("episode_id")),
    ),
    [*_READ_COLUMNS, *AROUND_COLUMNS, *_MORE],
)


def read_step(
    *, session: Session, episode_id: int, step: int, crowd: int | None = None
) -> StepRead | None:
    """Episode ``episode_id`` with its task and its recorded step ``step`` (None if no such
    episode); with ``crowd``, in the same statement, its avatar's rows, the first ``crowd``
    others standing with it and what lies in the receptacle its task's goal looks into
    (:attr:`StepRead.around`, :attr:`StepRead.crowd`, :attr:`StepRead.contents`)."""
    if crowd is None:
        found = _STEP_READ.lists(session.connection(), {"episode_id": episode_id, "step": step})
    else:
        params = {"episode_id": episode_id, "step": step, "crowd_limit": max(crowd, 1)}
        found = _STEP_AND_AVATAR_READ.lists(session.connection(), params)
    values = next((v for v in found if v[0] is not None), None)  # the episode's id
    if values is None:
        return None
    tasks_from = len(_EPISODES.columns)
    steps_from = tasks_from + len(_TASKS.columns)
    around_from = steps_from + len(_STEPS.columns)
    more_from = around_from + len(AROUND_COLUMNS)
    episode = dict(zip(_EPISODES.columns.keys(), values[:tasks_from], strict=True))
    task = dict(zip(_TASKS.columns.keys(), values[tasks_from:steps_from], strict=True))
    recorded = dict(zip(_STEPS.columns.keys(), values[steps_from:around_from], strict=True))
    read = StepRead(
        EpisodeRow(**episode),
        TaskRow(**task),
        StepRow(**recorded) if recorded["step"] is not None else None,
    )
    crowd_to = around_from + len(AVATAR_COLUMNS)
    # after the episode's row: the avatar's rows (its id), the crowd's (their count), the
    # receptacle's things (neither)
    rest = [v for v in found if v[0] is None]
    mine = (v for v in rest if v[around_from] is not None and v[more_from] is None)
    avatar = [v[around_from:more_from] for v in mine]
    if crowd is None or not avatar:
        return read
    names = [*(c.name for c in AVATAR_COLUMNS), CROWD.name]
    ranked = sorted((v for v in rest if v[more_from] is not None), key=lambda v: v[-1])
    others = [
        dict(zip(names, [*v[around_from:crowd_to], v[more_from]], strict=True)) for v in ranked
    ]
    place, receptacle = read.task.params.get(_GOAL_PLACE), read.task.params.get(_GOAL_RECEPTACLE)
    contents = None
    if place is not None and receptacle is not None:
        things = _THINGS.columns.keys()
        inside = [
            dict(zip(things, v[crowd_to:more_from], strict=True))
            for v in rest
            if v[around_from] is None
        ]
        contents = (place, receptacle, inside)
    return dataclasses.replace(read, around=avatar, crowd=(crowd, others), contents=contents)


def add_step(*, session: Session, **fields: Any) -> None:
    """Store a step (an INSERT on the driver's cursor: the step path writes no ORM objects)."""
    _STEP_INSERT.run(session.connection(), fields)


def record_step(
    *, session: Session, episode: EpisodeRow, changed: dict[str, Any], **fields: Any
) -> None:
    """Write ``changed`` to the step's episode (as :func:`update_episode`) and store the step
    (as :func:`add_step`): on PostgreSQL in one statement, the UPDATE in a WITH (a round trip
    each cost about a tenth of a batched step there, issue 38); on SQLite, which has no
    UPDATE in a WITH, in two."""
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        update_episode(session=session, episode=episode, **changed)
        add_step(session=session, **fields)
        return
    write = _step_write(tuple(sorted(changed)), tuple(sorted(fields)))
    params = {"episode": episode.id}
    params.update((f"e_{key}", value) for key, value in changed.items())
    params.update((f"s_{key}", value) for key, value in fields.items())
    write.run(conn, params)
    for key, value in changed.items():
        set_committed_value(episode, key, value)


@functools.lru_cache(maxsize=16)
def _step_write(changed: tuple[str, ...], fields: tuple[str, ...]) -> Statement:
    """``WITH episode_update AS (UPDATE episodes ...) INSERT INTO steps ...``: PostgreSQL runs
    the WITH's UPDATE whether or not the INSERT reads it. Every value has a bind of its own,
    prefixed (``e_``, ``s_``), so that no parameter is taken for a column of the other table
    (both have ``outcome``)."""
    episode = (
        update(_EPISODES)
        .where(_EPISODES.c.id == bindparam("episode"))
        .values({key: bindparam(f"e_{key}") for key in changed})
        .cte("episode_update")
    )
    step = _STEPS.insert().values({key: bindparam(f"s_{key}") for key in fields})
    return Statement(step.add_cte(episode))


def steps_of(*, session: Session, episode_id: int) -> list[StepRow]:
    return list(
        session.scalars(
            select(StepRow).where(StepRow.episode_id == episode_id).order_by(StepRow.step)
        )
    )


# -- the forge's pool and what it reads of episodes ----------------------------------------
CHUNK = 500  # ids per IN (...) list


def id_chunks(ids: Sequence[Any]) -> list[list[Any]]:
    items = list(ids)
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def pool_tasks(
    *, session: Session, statuses: Sequence[str], family: str | None = None
) -> list[TaskRow]:
    """Tasks with one of ``statuses`` (optionally of one family), in id order."""
    stmt = select(TaskRow).where(TaskRow.status.in_(list(statuses)))
    if family is not None:
        stmt = stmt.where(TaskRow.family == family)
    return list(session.scalars(stmt.order_by(TaskRow.id)))


# What the draw at a begin reads of each pool task (the fields of ``forge.pool.PoolTask``).
POOL_COLUMNS = (
    "id", "family", "params", "status", "origin", "probe", "parent_id", "accuracy", "rollouts",
    "difficulty", "created_tick",
)  # fmt: skip


@functools.lru_cache(maxsize=16)
def _pool_read(statuses: tuple[str, ...], of_family: bool) -> Statement:
    columns = [_TASKS.c[name] for name in POOL_COLUMNS]
    stmt = select(*columns).where(or_(*(_TASKS.c.status == s for s in statuses)))
    if of_family:
        stmt = stmt.where(_TASKS.c.family == bindparam("family"))
    return Statement(stmt.order_by(_TASKS.c.id), columns)


def pool_values(
    *, session: Session, statuses: Sequence[str], family: str | None = None
) -> list[dict[str, Any]]:
    """:func:`pool_tasks` as plain values (``POOL_COLUMNS``), read on the driver's cursor:
    a begin reads the whole live pool, and building an ORM row for each task cost more than
    the rest of the draw as the pool grew. Flushes the session first, as an ORM query would."""
    session.flush()
    read = _pool_read(tuple(statuses), family is not None)
    return read.rows(session.connection(), {} if family is None else {"family": family})


@dataclass(frozen=True)
class KnownTasks:
    """Whether a task id was ever admitted (any status), asked of the database one id at a
    time: proposals must be new, and a cycle checks a few candidates, never every task."""

    session: Session

    def __contains__(self, task_id: object) -> bool:
        return (
            isinstance(task_id, str) and get_task(session=self.session, task_id=task_id) is not None
        )


def probe_count(*, session: Session, family: str) -> int:
    return int(
        session.scalar(
            select(func.count()).where(TaskRow.probe.is_(True), TaskRow.family == family)
        )
        or 0
    )


def set_task_status(
    *, session: Session, row: TaskRow, status: str, reason: str | None, tick: int
) -> None:
    row.status, row.status_tick = status, tick
    if reason is not None:
        row.reason = reason
    session.flush()


def episodes_begun(*, session: Session, task_ids: Sequence[str]) -> dict[str, int]:
    """Per task: episodes begun, open or ended (counted in the task index alone: a probe's
    history grows as long as the world lives, and every draw asks)."""
    begun = dict.fromkeys(task_ids, 0)
    for chunk in id_chunks(task_ids):
        rows = session.execute(
            select(EpisodeRow.task_id, func.count())
            .where(EpisodeRow.task_id.in_(chunk))
            .group_by(EpisodeRow.task_id)
        )
        for task_id, count in rows:
            begun[task_id] = count
    return begun


def steps_of_episodes(*, session: Session, episode_ids: Sequence[int]) -> dict[int, list[StepRow]]:
    out: dict[int, list[StepRow]] = {i: [] for i in episode_ids}
    for chunk in id_chunks(episode_ids):
        stmt = select(StepRow).where(StepRow.episode_id.in_(chunk))
        for row in session.scalars(stmt.order_by(StepRow.episode_id, StepRow.step)):
            out[row.episode_id].append(row)
    return out
