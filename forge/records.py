"""Store functions for the forge's records (``forge/models.py``): its one row of state and its
decisions, with the proposals among them.

Every function takes ``*, session`` and never commits: the forge cycle or the request that
calls it owns the transaction. ``list_decisions`` pages by id with an opaque cursor (the last
id seen), with the helpers of ``world.store.records``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge.models import ForgeDecisionRow, ForgeStateRow
from world.store.records import Page, id_chunks, page


def forge_state(*, session: Session, config: dict[str, Any] | None = None) -> ForgeStateRow | None:
    """The forge's one row; created with ``config`` when missing and ``config`` is given
    (the caller holds the world lock, so two writers never both create it)."""
    row = session.get(ForgeStateRow, 1)
    if row is None and config is not None:
        row = ForgeStateRow(id=1, paused=False, config=config, cycle=0, last_tick=0, draws=0)
        session.add(row)
        session.flush()
    return row


def add_decision(*, session: Session, **fields: Any) -> ForgeDecisionRow:
    row = ForgeDecisionRow(**fields)
    session.add(row)
    session.flush()
    return row


def list_decisions(
    *,
    session: Session,
    kind: str | None = None,
    task_id: str | None = None,
    cycle: int | None = None,
    from_tick: int | None = None,
    to_tick: int | None = None,
    limit: int,
    cursor: str | None,
) -> Page:
    """Decisions in id order; ``task_id`` matches the task judged or the candidate."""
    stmt = select(ForgeDecisionRow)
    if kind is not None:
        stmt = stmt.where(ForgeDecisionRow.kind == kind)
    if task_id is not None:
        stmt = stmt.where(
            (ForgeDecisionRow.task_id == task_id) | (ForgeDecisionRow.candidate_id == task_id)
        )
    if cycle is not None:
        stmt = stmt.where(ForgeDecisionRow.cycle == cycle)
    if from_tick is not None:
        stmt = stmt.where(ForgeDecisionRow.tick >= from_tick)
    if to_tick is not None:
        stmt = stmt.where(ForgeDecisionRow.tick <= to_tick)
    return page(session, stmt, ForgeDecisionRow.id, limit=limit, cursor=cursor)


PROPOSALS = ("task.harder", "task.easier")


def last_proposals(*, session: Session, task_ids: Sequence[str]) -> dict[str, int]:
    """Per task of ``task_ids``: the cycle of its last proposal (any verdict)."""
    out: dict[str, int] = {}
    for chunk in id_chunks(task_ids):
        rows = session.execute(
            select(ForgeDecisionRow.task_id, func.max(ForgeDecisionRow.cycle))
            .where(ForgeDecisionRow.task_id.in_(chunk), ForgeDecisionRow.kind.in_(PROPOSALS))
            .group_by(ForgeDecisionRow.task_id)
        )
        out.update({str(task_id): int(cycle) for task_id, cycle in rows})
    return out


def proposals_of(*, session: Session, candidate_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per candidate: the evidence of the decision that proposed it."""
    out: dict[str, dict[str, Any]] = {}
    for chunk in id_chunks(candidate_ids):
        for row in session.scalars(
            select(ForgeDecisionRow).where(
                ForgeDecisionRow.candidate_id.in_(chunk),
                ForgeDecisionRow.kind.in_(PROPOSALS),
                ForgeDecisionRow.verdict == "proposed",
            )
        ):
            out[str(row.candidate_id)] = row.evidence
    return out
