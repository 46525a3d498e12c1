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
    Connection,
    Integer,
    Select,
    bindparam,
    cast,
    column,
    func,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql
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
from world.store.known import SESSION_KNOWN, Batch, Known, Moved
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
    _wrote_episode(session, episode.id)


def _wrote_episode(session: Session, episode_id: int) -> None:
    """In the writer, drop the reads made ahead that the episode's row or steps were in
    (once the transaction keeps its work)."""
    known: Known | None = session.info.get(SESSION_KNOWN)
    if known is not None:
        known.wrote_episode(episode_id)


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
    around_from = len(_READ_COLUMNS)
    more_from = around_from + len(AROUND_COLUMNS)
    crowd_to = around_from + len(AVATAR_COLUMNS)
    # after the episode's row: the avatar's rows (its id), the crowd's (their count), the
    # receptacle's things (neither)
    rest = [v for v in found if v[0] is None]
    mine = (v for v in rest if v[around_from] is not None and v[more_from] is None)
    avatar = [v[around_from:more_from] for v in mine]
    if crowd is None:
        return _step_read(values[:around_from], avatar, None, [])
    ranked = sorted((v for v in rest if v[more_from] is not None), key=lambda v: v[-1])
    others = [
        dict(zip(_CROWD_NAMES, [*v[around_from:crowd_to], v[more_from]], strict=True))
        for v in ranked
    ]
    inside = [
        dict(zip(_THING_NAMES, v[crowd_to:more_from], strict=True))
        for v in rest
        if v[around_from] is None
    ]
    return _step_read(values[:around_from], avatar, (crowd, others), inside)


def _step_read(
    values: Sequence[Any],
    avatar: list[list[Any]],
    crowd: tuple[int, list[dict[str, Any]]] | None,
    inside: list[dict[str, Any]],
) -> StepRead:
    """A :class:`StepRead` from the row of :data:`_READ_COLUMNS`, the avatar's rows
    (:data:`AROUND_COLUMNS`), the crowd (its limit and rows) and the rows of the things in its
    task's goal's receptacle; without a crowd, or an avatar not stored, only the episode's."""
    tasks_from = len(_EPISODES.columns)
    steps_from = tasks_from + len(_TASKS.columns)
    episode = dict(zip(_EPISODES.columns.keys(), values[:tasks_from], strict=True))
    task = dict(zip(_TASKS.columns.keys(), values[tasks_from:steps_from], strict=True))
    recorded = dict(zip(_STEPS.columns.keys(), values[steps_from:], strict=True))
    read = StepRead(
        EpisodeRow(**episode),
        TaskRow(**task),
        StepRow(**recorded) if recorded["step"] is not None else None,
    )
    if crowd is None or not avatar:
        return read
    place, receptacle = read.task.params.get(_GOAL_PLACE), read.task.params.get(_GOAL_RECEPTACLE)
    contents = None
    if place is not None and receptacle is not None:
        contents = (place, receptacle, inside)
    return dataclasses.replace(read, around=avatar, crowd=crowd, contents=contents)


# Several steps' reads at once (a batch's, issue 38): the steps wanted as a table of their own
# (a SELECT of binds each, ``e0``/``s0``, ...), and five statements over it, together what
# read_step's union reads for one step, for all of them: the episodes with their tasks and
# recorded steps, the avatars, the things they hold or that lie where they stand (each once,
# however many of the avatars stand there: the fleet's avatars begin in one place), the crowds
# (every avatar ranked by id among those standing where one of the steps' avatars stands, with
# their count, up to a rank of ``limit``) and the goals' receptacles' things. A crowd's list
# runs past the step's limit by ``SPARE``, so that when avatars listed leave before the step
# runs, the next by id are still known.
_THING_COLUMNS = AROUND_COLUMNS[len(AVATAR_COLUMNS) :]
_THING_NAMES = [c.name for c in _THING_COLUMNS]
_AVATAR_NAMES = [c.name for c in AVATAR_COLUMNS]
_CROWD_NAMES = [*_AVATAR_NAMES, CROWD.name]  # a crowd's rows: each avatar, and their count
_PLACE, _AVATAR_KEY = _AVATAR_NAMES.index("place"), _AVATAR_NAMES.index("id")
_THING_PLACE, _THING_HOLDER = _THING_NAMES.index("place"), _THING_NAMES.index("holder")
_NO_THING = [None] * len(_THING_NAMES)  # an avatar's row where it holds and stands by nothing
_NO_EPISODE = -1  # pads the steps wanted to a count compiled before (ids start at 1)
SPARE = 8  # a crowd read ahead lists this many more than the step shows
_ID = Column("episode", BigInteger)  # the step's episode, on the rows of its avatar and goal


@functools.lru_cache(maxsize=16)
def _reads_of(count: int) -> tuple[Statement, Statement, Statement, Statement, Statement]:
    """:func:`read_steps`' five statements for ``count`` steps wanted, or, for ``count`` 0,
    for the steps wanted as two arrays (PostgreSQL's ``unnest`` of the binds ``episodes`` and
    ``steps``: its planner took 1.4 ms to bind a union of 64 selects, each time)."""
    if count:
        rows = [
            select(
                cast(bindparam(f"e{i}"), BigInteger).label("episode_id"),
                cast(bindparam(f"s{i}"), Integer).label("step"),
            )
            for i in range(count)
        ]
        wanted = union_all(*rows).cte("wanted")
    else:
        arrays = func.unnest(
            cast(bindparam("episodes"), postgresql.ARRAY(BigInteger)),
            cast(bindparam("steps"), postgresql.ARRAY(Integer)),
        ).table_valued(column("episode_id", BigInteger), column("step", Integer))
        wanted = select(arrays.render_derived(name="pairs")).cte("wanted")
    episodes = _EPISODES.join(wanted, wanted.c.episode_id == _EPISODES.c.id)
    read = select(*_READ_COLUMNS).select_from(
        episodes.join(_TASKS, _TASKS.c.id == _EPISODES.c.task_id).outerjoin(
            _STEPS, (_STEPS.c.episode_id == _EPISODES.c.id) & (_STEPS.c.step == wanted.c.step)
        )
    )
    standing = episodes.join(_AVATARS, _AVATARS.c.id == _EPISODES.c.avatar_id)
    avatars = select(_EPISODES.c.id, *_AVATARS.columns).select_from(standing)
    places = select(_AVATARS.c.place).select_from(standing)
    near = select(*_THING_COLUMNS).where(
        or_(
            _THINGS.c.holder.in_(select(_EPISODES.c.avatar_id).select_from(episodes)),
            _THINGS.c.place.in_(places),
        )
    )
    ranked = (
        select(
            *_AVATARS.columns,
            func.count().over(partition_by=_AVATARS.c.place).label(CROWD.name),
            func.row_number()
            .over(partition_by=_AVATARS.c.place, order_by=_AVATARS.c.id)
            .label(_RANK.name),
        )
        .where(_AVATARS.c.place.in_(places))
        .subquery()
    )
    crowds = select(*ranked.columns).where(ranked.c[_RANK.name] <= bindparam("limit"))
    inside = select(_EPISODES.c.id, *_THING_COLUMNS).select_from(
        episodes.join(_TASKS, _TASKS.c.id == _EPISODES.c.task_id).join(_THINGS, _INSIDE)
    )
    return (
        Statement(read, _READ_COLUMNS),
        Statement(avatars, (_ID, *_AVATARS.columns)),
        Statement(near, _THING_COLUMNS),
        Statement(crowds, (*_AVATARS.columns, CROWD, _RANK)),
        Statement(inside, [_ID, *_THING_COLUMNS]),
    )


def read_steps(
    *, session: Session, wanted: Sequence[tuple[int, int]], crowd: int
) -> dict[tuple[int, int], StepRead]:
    """What :func:`read_step` reads with ``crowd`` for each (episode id, step) of ``wanted``,
    in five statements for all of them, by (episode id, step): an episode's first step
    wanted only, and no missing episode. A crowd lists up to ``crowd`` + :data:`SPARE` (the
    backend shows the first ``crowd``)."""
    first: dict[int, int] = {}
    for episode_id, step in wanted:
        first.setdefault(episode_id, step)
    conn = session.connection()
    params: dict[str, Any] = {}
    if conn.dialect.name == "postgresql":
        count = 0
        params["episodes"], params["steps"] = list(first), list(first.values())
    else:
        count = 1 << max(len(first) - 1, 1).bit_length()  # 2, 4, 8, ...: few compiled
        pairs = [*first.items(), *[(_NO_EPISODE, 0)] * (count - len(first))]
        for i, (episode_id, step) in enumerate(pairs):
            params[f"e{i}"], params[f"s{i}"] = episode_id, step
    read, of_avatars, near, crowds, inside = _reads_of(count)
    found = read.lists(conn, params)
    held: dict[str, list[list[Any]]] = {}
    lying: dict[str, list[list[Any]]] = {}
    for v in near.lists(conn, params):
        if v[_THING_HOLDER] is not None:
            held.setdefault(v[_THING_HOLDER], []).append(v)
        if v[_THING_PLACE] is not None:
            lying.setdefault(v[_THING_PLACE], []).append(v)
    avatars: dict[int, list[list[Any]]] = {}  # by episode: its avatar's rows, as avatar_around's
    for episode_id, *me in of_avatars.lists(conn, params):
        avatar_id, place = me[_AVATAR_KEY], me[_PLACE]
        near_it = [
            *held.get(avatar_id, ()),
            *(t for t in lying.get(place, ()) if t[_THING_HOLDER] != avatar_id),
        ]
        avatars[episode_id] = [[*me, *t] for t in near_it] or [[*me, *_NO_THING]]
    standing: dict[str, list[list[Any]]] = {}  # by place, ranked
    limit = max(crowd, 1)
    for v in crowds.lists(conn, {**params, "limit": limit + SPARE + 1}):  # with the avatar
        standing.setdefault(v[_PLACE], []).append(v)
    things: dict[int, list[dict[str, Any]]] = {}
    for v in inside.lists(conn, params):
        things.setdefault(v[0], []).append(dict(zip(_THING_NAMES, v[1:], strict=True)))
    reads = {}
    for values in found:
        episode_id, avatar_id = values[0], values[_AVATAR_ID]
        mine = avatars.get(episode_id, [])
        others = []
        if mine and mine[0][_PLACE] is not None:
            ranked = sorted(standing.get(mine[0][_PLACE], []), key=lambda v: v[-1])
            others = [
                dict(zip(_CROWD_NAMES, [*v[: len(AVATAR_COLUMNS)], v[-2] - 1], strict=True))
                for v in ranked
                if v[_AVATAR_KEY] != avatar_id
            ][: limit + SPARE]
        key = (episode_id, first[episode_id])
        reads[key] = _step_read(values, mine, (crowd, others), things.get(episode_id, []))
    return reads


_AVATAR_ID = list(_EPISODES.columns.keys()).index("avatar_id")


class StepReads:
    """The reads of a batch of steps (``POST /v1/steps``), made ahead where they can be: the
    first of its steps to run while the writer's batch holds the whole world reads what each
    step of the batch not yet run will read (:func:`read_steps`), and the batch keeps those
    reads, less what a step writes since (``world.store.known``). A step takes its own read
    from there, or reads as :func:`read_step` does. ``wanted``: each step's (episode id,
    step), in the batch's order; ``crowd``: as :func:`read_step`'s (None: nothing is read
    ahead)."""

    def __init__(self, wanted: Sequence[tuple[int, int]], crowd: int | None) -> None:
        self._wanted = list(wanted)
        self._crowd = crowd
        self._run: set[tuple[int, int]] = set()  # the steps that have read
        self._batch: Batch | None = None  # the writer's batch it last read ahead in

    def read(self, *, session: Session, episode_id: int, step: int) -> StepRead | None:
        """Step ``step`` of episode ``episode_id``'s read (as :func:`read_step`'s)."""
        key = (episode_id, step)
        known: Known | None = session.info.get(SESSION_KNOWN)
        found = None
        if self._crowd is not None and known is not None and known.batch.whole:
            batch = known.batch
            if batch is not self._batch:
                self._batch = batch
                later = [k for k in self._wanted if k not in self._run]  # this one first
                if len(later) > 1:
                    ahead = read_steps(session=session, wanted=later, crowd=self._crowd)
                    ordered = sorts_as_python(session.connection())
                    for wanted, read in ahead.items():
                        batch.read_ahead(wanted, _Ahead.of(read, ordered))
            found = batch.take_ahead(key)
        self._run.add(key)
        if isinstance(found, _Ahead):
            return found.read
        return read_step(session=session, episode_id=episode_id, step=step, crowd=self._crowd)


# Strings whose order differs between byte order and the usual language collations (case,
# punctuation, accents): a database that orders them as Python does orders avatar ids so too.
_ORDER_PROBE = ("B", "a", "a-b", "ab", "a_b", "Z9", "e", "\u00e9", "f", "_")
_SORTS_AS_PYTHON = "bigworld_sorts_as_python"  # Connection.info: the probe's answer


def sorts_as_python(conn: Connection) -> bool:
    """Whether the database orders avatar ids as Python orders strings, so that an avatar can
    be put into a crowd read ahead at its place by id: SQLite's default (BINARY) does;
    PostgreSQL's does under a C collation and not under a language's. Asked once a
    connection."""
    if conn.dialect.name != "postgresql":
        return True
    if _SORTS_AS_PYTHON not in conn.info:
        values = ", ".join(f"('{v}')" for v in _ORDER_PROBE)
        found = conn.exec_driver_sql(f"SELECT s FROM (VALUES {values}) AS v(s) ORDER BY s")
        conn.info[_SORTS_AS_PYTHON] = [r[0] for r in found] == sorted(_ORDER_PROBE)
    return bool(conn.info[_SORTS_AS_PYTHON])


@dataclass(frozen=True)
class _Ahead:
    """A step's read made ahead (``world.store.known``), with the place its avatar stands in
    and the ids of the things ``around`` it (held, or lying there). Its crowd lists the first
    avatars beside it by id and :data:`SPARE` more. ``ordered``: the database orders avatar
    ids as Python does (:func:`sorts_as_python`)."""

    read: StepRead
    episode: int
    avatar: str
    place: str | None
    around: frozenset[int]
    ordered: bool

    @classmethod
    def of(cls, read: StepRead, ordered: bool) -> _Ahead:
        rows = read.around or []
        split = len(AVATAR_COLUMNS)
        return cls(
            read,
            read.episode.id,
            read.episode.avatar_id,
            rows[0][_PLACE] if rows else None,
            frozenset(v[split] for v in rows if v[split] is not None),  # the things' ids
            ordered,
        )

    def after(self, avatars: Sequence[Moved], things: Sequence[Any]) -> _Ahead | None:
        """The read as writing ``avatars`` and ``things`` leaves it, each put into or taken
        out of what it covers as the tables now hold them: a thing into what its avatar holds,
        what lies where it stands and what its goal's receptacle holds; an avatar into the
        crowd beside it (its count, and its list where the avatar ranks among those listed).
        The crowd is left out (its step reads it again) where fewer than the step shows
        remain listed of more standing there, or an avatar that ranks among them came and ids
        are not ordered as Python orders them; None (read it all again) where its avatar is
        written."""
        read = self.read
        if read.around is None:  # the episode's rows only: the step reads its avatar itself
            return self
        crowd = read.crowd
        if any(moved.row["id"] == self.avatar for moved in avatars):
            return None
        if crowd is not None and any(
            self.place in (moved.stood, moved.row["place"]) for moved in avatars
        ):
            crowd = self._crowd_after(crowd, avatars)
        around, contents = read.around, read.contents
        for thing in things:
            row = None if isinstance(thing, int) else thing
            gone = thing if row is None else row["id"]
            near = row is not None and (row["holder"] == self.avatar or row["place"] == self.place)
            if near or gone in self.around:
                split = len(AVATAR_COLUMNS)
                me = around[0][:split]
                around = [v for v in around if v[split] is not None and v[split] != gone]
                if near and row is not None:
                    around.append([*me, *(row[c] for c in _THING_NAMES)])
                around = around or [[*me, *_NO_THING]]
            if contents is not None:
                goal, receptacle, inside = contents
                put = row is not None and row["place"] == goal and row["container"] == receptacle
                if put or any(t["id"] == gone for t in inside):
                    inside = [t for t in inside if t["id"] != gone]
                    if put and row is not None:
                        inside.append({c: row[c] for c in _THING_NAMES})
                    contents = (goal, receptacle, inside)
        if around is read.around and crowd is read.crowd and contents is read.contents:
            return self
        changed = dataclasses.replace(read, around=around, crowd=crowd, contents=contents)
        return _Ahead.of(changed, self.ordered)

    def lying(self, place: str) -> list[dict[str, Any]] | None:
        if place != self.place or self.read.around is None:
            return None
        split = len(AVATAR_COLUMNS)
        return [
            dict(zip(_THING_NAMES, v[split:], strict=True))
            for v in self.read.around
            if v[split] is not None and v[split + _THING_PLACE] == place
        ]

    def standing(self, place: str) -> tuple[int, list[dict[str, Any]]] | None:
        crowd, around = self.read.crowd, self.read.around
        if place != self.place or crowd is None or around is None or not self.ordered:
            return None
        listed = [{k: v for k, v in o.items() if k != CROWD.name} for o in crowd[1]]
        count = crowd[1][0][CROWD.name] if listed else 0  # beside its avatar
        me = dict(zip(_AVATAR_NAMES, around[0][: len(AVATAR_COLUMNS)], strict=True))
        if len(listed) == count or (listed and me["id"] < listed[-1]["id"]):
            listed = sorted([*listed, me], key=lambda o: o["id"])
        return count + 1, listed

    def _crowd_after(
        self, crowd: tuple[int, list[dict[str, Any]]], avatars: Sequence[Moved]
    ) -> tuple[int, list[dict[str, Any]]] | None:
        """The crowd beside the avatar as the avatars written leave it (each listed one's row
        as written), or None where it cannot be known without reading it again."""
        limit, listed = crowd[0], list(crowd[1])
        count = listed[0][CROWD.name] if listed else 0  # how many stand beside the avatar
        for moved in avatars:
            row, was, here = moved.row, moved.stood == self.place, moved.row["place"] == self.place
            at = next((i for i, o in enumerate(listed) if o["id"] == row["id"]), None)
            if was and here:  # it stayed: its row, where listed, as written
                if at is not None:
                    listed[at] = row
            elif was:  # it left
                count -= 1
                if at is not None:
                    del listed[at]
            elif here:  # it came: listed where it ranks among those listed, or all are
                count += 1
                if at is not None or not self.ordered:
                    return None
                complete = len(listed) == count - 1
                if complete or (listed and row["id"] < listed[-1]["id"]):
                    listed.append(row)
                    listed.sort(key=lambda o: o["id"])
            elif at is not None:  # listed, and stood elsewhere: not as read
                return None
        if len(listed) < min(limit, count) or (count and not listed):  # rows carry the count
            return None
        return limit, [{**o, CROWD.name: count} for o in listed]


def add_step(*, session: Session, **fields: Any) -> None:
    """Store a step (an INSERT on the driver's cursor: the step path writes no ORM objects)."""
    _STEP_INSERT.run(session.connection(), fields)
    _wrote_episode(session, fields["episode_id"])


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
    _wrote_episode(session, episode.id)


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
