"""The model registry: trainers register policy and reward-model versions; agents poll for
the latest and reload its weights in place."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, status
from sqlalchemy.orm import Session

from server import records
from server.dependencies import CallerDep, RuntimeDep, SessionDep, TrainerDep
from server.errors import NotFound
from server.models import PolicyRow
from server.routes.common import ERRORS, IdCursor, Limit
from world.schemas import ModelKind, Page, PolicyIn, PolicyOut
from world.store import WorldRow

router = APIRouter(prefix="/v1/policies", tags=["policies"], responses=ERRORS)


def _out(row: PolicyRow) -> PolicyOut:
    return PolicyOut(
        kind=row.kind,  # type: ignore[arg-type]
        version=row.version,
        path=row.path,
        parent=row.parent,
        config=row.config,
        metrics=row.metrics,
        agent_id=row.agent_id,
        created_tick=row.created_tick,
    )


@router.post("", response_model=PolicyOut, status_code=status.HTTP_201_CREATED)
def register(body: PolicyIn, runtime: RuntimeDep, caller: TrainerDep) -> PolicyOut:
    """Register the next version of a model kind (versions count 1, 2, … per kind)."""

    def work(session: Session, world_row: WorldRow) -> PolicyOut:  # serialises version numbers
        row = records.add_policy(
            session=session,
            kind=body.kind,
            path=body.path,
            parent=body.parent,
            config=body.config,
            metrics=body.metrics,
            agent_id=caller.id,
            created_tick=world_row.meta.tick,
            created_at=time.time(),
        )
        session.commit()
        return _out(row)

    return runtime.world_transaction(work)


@router.get("/latest", response_model=PolicyOut)
def latest(
    session: SessionDep, _caller: CallerDep, kind: Annotated[ModelKind, Query()] = "policy"
) -> PolicyOut:
    row = records.latest_policy(session=session, kind=kind)
    if row is None:
        raise NotFound(f"no {kind} version is registered yet")
    return _out(row)


@router.get("", response_model=Page[PolicyOut])
def list_versions(
    session: SessionDep,
    _caller: CallerDep,
    kind: ModelKind | None = None,
    limit: Limit = 100,
    cursor: IdCursor = None,
) -> Page[PolicyOut]:
    found = records.list_policies(session=session, kind=kind, limit=limit, cursor=cursor)
    return Page[PolicyOut](items=[_out(r) for r in found.items], next_cursor=found.next_cursor)
