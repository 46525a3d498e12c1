"""GET /v1/tasks and /v1/tasks/{id}: the task pool (status, lineage, the critic's accuracy)
with per-task success statistics; a task's detail lists the forge's decisions about it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from forge import records as forge_records
from server.dependencies import CallerDep, SessionDep
from server.errors import NotFound
from server.routes.common import ERRORS, Cursor, Limit
from server.routes.forge import decision_out
from world.schemas import Page, TaskDetail, TaskStats, TaskStatus, TaskWithDecisions
from world.store import records
from world.store.models import TaskRow

router = APIRouter(prefix="/tasks", tags=["tasks"], responses=ERRORS)
DECISIONS_SHOWN = 200  # a task's detail lists at most this many decisions (the first ones)


def _stats(counts: dict[str, int]) -> TaskStats:
    ended = counts.get("succeeded", 0) + counts.get("failed", 0) + counts.get("abandoned", 0)
    return TaskStats(
        episodes=sum(counts.values()),
        open=counts.get("open", 0),
        succeeded=counts.get("succeeded", 0),
        failed=counts.get("failed", 0),
        abandoned=counts.get("abandoned", 0),
        success_rate=counts.get("succeeded", 0) / ended if ended else None,
    )


def _detail(row: TaskRow, counts: dict[str, int]) -> TaskDetail:
    return TaskDetail(
        id=row.id,
        family=row.family,
        params=row.params,
        text=row.text,
        created_tick=row.created_tick,
        stats=_stats(counts),
        status=row.status,  # type: ignore[arg-type]
        origin=row.origin,
        parent_id=row.parent_id,
        reason=row.reason,
        probe=row.probe,
        difficulty=row.difficulty,
        accuracy=row.accuracy,
        rollouts=row.rollouts or 0,
        status_tick=row.status_tick,
    )


@router.get("", response_model=Page[TaskDetail])
def list_tasks(
    session: SessionDep,
    _caller: CallerDep,
    family: Annotated[str | None, Query(max_length=32)] = None,
    status: TaskStatus | None = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Page[TaskDetail]:
    found = records.list_tasks(
        session=session, family=family, status=status, limit=limit, cursor=cursor
    )
    stats = records.task_stats(session=session, task_ids=[t.id for t in found.items])
    return Page[TaskDetail](
        items=[_detail(t, stats[t.id]) for t in found.items], next_cursor=found.next_cursor
    )


@router.get("/{task_id}", response_model=TaskWithDecisions)
def read_task(
    task_id: Annotated[str, Path(max_length=64)], session: SessionDep, _caller: CallerDep
) -> TaskWithDecisions:
    row = records.get_task(session=session, task_id=task_id)
    if row is None:
        raise NotFound(f"no task {task_id!r}")
    detail = _detail(row, records.task_stats(session=session, task_ids=[row.id])[row.id])
    decisions = forge_records.list_decisions(
        session=session, task_id=row.id, limit=DECISIONS_SHOWN, cursor=None
    )
    return TaskWithDecisions(
        **detail.model_dump(), decisions=[decision_out(d) for d in decisions.items]
    )
