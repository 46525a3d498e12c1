"""Store functions for the server's records (``server/models.py``): agents, judgments, model
versions and expert hints, and the forge's read of recent rollouts with their judgments.

Every function takes ``*, session`` and never commits: the request (or the tick) that calls
it owns the transaction. List functions page by id with an opaque cursor (the last id seen),
with the helpers of ``world.store.records``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, case, func, select
from sqlalchemy.orm import Session

from server.models import AgentRow, ExpertHintRow, JudgmentRow, PolicyRow
from world.store.models import EpisodeRow, StepRow
from world.store.records import Page, id_chunks, page


# -- agents --------------------------------------------------------------------------------
def add_agent(
    *,
    session: Session,
    name: str,
    role: str,
    token_hash: str,
    avatar_id: str | None,
    now: float,
    max_open_episodes: int = 1,
) -> AgentRow:
    agent = AgentRow(
        name=name,
        role=role,
        token_hash=token_hash,
        avatar_id=avatar_id,
        max_open_episodes=max_open_episodes,
        created_at=now,
    )
    session.add(agent)
    session.flush()
    return agent


def agent_by_token(*, session: Session, token_hash: str) -> AgentRow | None:
    return session.scalars(select(AgentRow).where(AgentRow.token_hash == token_hash)).first()


def agent_by_name(*, session: Session, name: str) -> AgentRow | None:
    return session.scalars(select(AgentRow).where(AgentRow.name == name)).first()


def any_admin(*, session: Session) -> AgentRow | None:
    return session.scalars(
        select(AgentRow).where(AgentRow.role == "admin").order_by(AgentRow.id)
    ).first()


# -- judgments -----------------------------------------------------------------------------
def add_judgments(*, session: Session, rows: Sequence[dict[str, Any]]) -> list[JudgmentRow]:
    """Store judgments whose (episode, step, vote) slot is still free; returns those stored,
    and keeps each episode's ``min_votes``. The caller holds the world lock, so no other
    writer fills a slot in between."""
    episodes = {r["episode_id"] for r in rows}
    taken = {
        tuple(slot)
        for slot in session.execute(
            select(JudgmentRow.episode_id, JudgmentRow.step, JudgmentRow.vote).where(
                JudgmentRow.episode_id.in_(episodes)
            )
        )
    }
    made = []
    for r in rows:
        slot = (r["episode_id"], r["step"], r["vote"])
        if slot not in taken:
            taken.add(slot)
            made.append(JudgmentRow(**r))
    session.add_all(made)
    votes = Counter((episode_id, step) for episode_id, step, _vote in taken)
    for episode_id in episodes:
        episode = session.get(EpisodeRow, episode_id)
        assert episode is not None  # judgments reference their episode
        steps = range(1, episode.last_step + 1)
        episode.min_votes = min((votes[episode_id, step] for step in steps), default=0)
    session.flush()
    return made


def judgments_of(*, session: Session, episode_id: int) -> list[JudgmentRow]:
    return list(
        session.scalars(
            select(JudgmentRow).where(JudgmentRow.episode_id == episode_id).order_by(JudgmentRow.id)
        )
    )


# -- model versions and expert hints -------------------------------------------------------
def add_policy(*, session: Session, kind: str, **fields: Any) -> PolicyRow:
    """Register the next version of ``kind`` (the caller holds the world lock)."""
    last = session.scalar(select(func.max(PolicyRow.version)).where(PolicyRow.kind == kind))
    row = PolicyRow(kind=kind, version=(last or 0) + 1, **fields)
    session.add(row)
    session.flush()
    return row


def latest_policy(*, session: Session, kind: str) -> PolicyRow | None:
    stmt = select(PolicyRow).where(PolicyRow.kind == kind).order_by(PolicyRow.version.desc())
    return session.scalars(stmt.limit(1)).first()


def list_policies(*, session: Session, kind: str | None, limit: int, cursor: str | None) -> Page:
    stmt = select(PolicyRow)
    if kind is not None:
        stmt = stmt.where(PolicyRow.kind == kind)
    return page(session, stmt, PolicyRow.id, limit=limit, cursor=cursor)


def add_expert_hint(*, session: Session, **fields: Any) -> ExpertHintRow:
    row = ExpertHintRow(**fields)
    session.add(row)
    session.flush()
    return row


# -- rollouts with their judgments, for the forge's critic ---------------------------------
# A task's newest ended episodes, down ix_episodes_task_newest (task_id, id).
_NEWEST_ENDED = (
    select(
        EpisodeRow.id,
        EpisodeRow.task_id,
        EpisodeRow.avatar_id,
        EpisodeRow.status,
        EpisodeRow.last_step,
        EpisodeRow.end_tick,
    )
    .where(EpisodeRow.task_id == bindparam("task_id"), EpisodeRow.status != "open")
    .order_by(EpisodeRow.id.desc())
    .limit(bindparam("per_task"))
)


def recent_rollouts(
    *, session: Session, task_ids: Sequence[str], per_task: int
) -> list[dict[str, Any]]:
    """The newest ``per_task`` ended episodes of each task (newest first per task), each with
    the policy version of its last step, its judged steps and the steps every vote of which
    was −1."""
    found: list[dict[str, Any]] = []
    # One walk down each task's index from its newest episode, so what a cycle reads stays
    # ``per_task`` rows a task however long the task has lived. One statement, built once, run
    # on the connection for each task: with a live pool of hundreds of tasks, building a
    # select and going through the ORM for each task cost five times the walks themselves.
    connection = session.connection()
    for task_id in sorted(task_ids):
        rows = connection.execute(_NEWEST_ENDED, {"task_id": task_id, "per_task": per_task})
        found += [dict(r._mapping) for r in rows]
    versions: dict[int, str | None] = {}
    votes: dict[int, tuple[int, int]] = {}
    for chunk in id_chunks([r["id"] for r in found]):
        last_steps = session.execute(
            select(StepRow.episode_id, StepRow.policy_version)
            .join(
                EpisodeRow,
                (EpisodeRow.id == StepRow.episode_id) & (EpisodeRow.last_step == StepRow.step),
            )
            .where(StepRow.episode_id.in_(chunk))
        )
        for episode_id, version in last_steps:
            versions[episode_id] = version
        per_step = (
            select(
                JudgmentRow.episode_id, JudgmentRow.step, func.max(JudgmentRow.score).label("top")
            )
            .where(JudgmentRow.episode_id.in_(chunk))
            .group_by(JudgmentRow.episode_id, JudgmentRow.step)
            .subquery()
        )
        for episode_id, judged, negative in session.execute(
            select(
                per_step.c.episode_id,
                func.count(),
                func.sum(case((per_step.c.top == -1, 1), else_=0)),
            ).group_by(per_step.c.episode_id)
        ):
            votes[episode_id] = (int(judged), int(negative or 0))
    for row in found:
        row["policy_version"] = versions.get(row["id"])
        row["judged_steps"], row["negative_steps"] = votes.get(row["id"], (0, 0))
    return found
