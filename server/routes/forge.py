"""The forge's routes (design §6): its decisions, its state, a cycle now, pause, resume and
configuration."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from forge import records as forge_records
from forge.models import ForgeDecisionRow
from server import forge as service
from server.dependencies import AdminDep, CallerDep, RuntimeDep, SessionDep
from server.routes.common import ERRORS, IdCursor, Limit, Tick
from world.schemas import CycleOut, DecisionOut, ForgeInfo, Page, StorableJson

router = APIRouter(prefix="/v1/forge", tags=["forge"], responses=ERRORS)


def decision_out(row: ForgeDecisionRow) -> DecisionOut:
    return DecisionOut(
        id=row.id,
        cycle=row.cycle,
        tick=row.tick,
        kind=row.kind,
        task_id=row.task_id,
        candidate_id=row.candidate_id,
        verdict=row.verdict,
        evidence=row.evidence,
    )


def _info(runtime: RuntimeDep, session: SessionDep) -> ForgeInfo:
    paused, cycle, draws, config = service.peek_state(session)
    return ForgeInfo(
        enabled=runtime.settings.forge_enabled,
        interval_s=runtime.settings.forge_interval_s,
        paused=paused,
        cycle=cycle,
        draws=draws,
        config=config.to_json(),
    )


@router.get("", response_model=ForgeInfo)
def read_forge(runtime: RuntimeDep, session: SessionDep, _caller: CallerDep) -> ForgeInfo:
    return _info(runtime, session)


@router.get("/decisions", response_model=Page[DecisionOut])
def list_decisions(
    session: SessionDep,
    _caller: CallerDep,
    kind: Annotated[str | None, Query(max_length=32)] = None,
    task_id: Annotated[
        str | None, Query(max_length=64, description="the task judged or the candidate")
    ] = None,
    cycle: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    from_tick: Tick = None,
    to_tick: Tick = None,
    limit: Limit = 100,
    cursor: IdCursor = None,
) -> Page[DecisionOut]:
    found = forge_records.list_decisions(
        session=session,
        kind=kind,
        task_id=task_id,
        cycle=cycle,
        from_tick=from_tick,
        to_tick=to_tick,
        limit=limit,
        cursor=cursor,
    )
    return Page[DecisionOut](
        items=[decision_out(d) for d in found.items], next_cursor=found.next_cursor
    )


@router.post("/cycle", response_model=CycleOut)
def run_cycle(runtime: RuntimeDep, _admin: AdminDep) -> CycleOut:
    stored = service.run_cycle(runtime, manual=True)
    with runtime.sessions() as session:
        _, cycle, _, _ = service.peek_state(session)
    return CycleOut(cycle=cycle, decisions=[decision_out(d) for d in stored])


@router.post("/pause", response_model=ForgeInfo)
def pause(runtime: RuntimeDep, _admin: AdminDep, session: SessionDep) -> ForgeInfo:
    service.set_paused(runtime, True)
    return _info(runtime, session)


@router.post("/resume", response_model=ForgeInfo)
def resume(runtime: RuntimeDep, _admin: AdminDep, session: SessionDep) -> ForgeInfo:
    service.set_paused(runtime, False)
    return _info(runtime, session)


@router.patch("/config", response_model=dict[str, Any])
def update_config(
    runtime: RuntimeDep,
    _admin: AdminDep,
    patch: Annotated[
        StorableJson,
        Body(description="fields of the forge's config to change; dynamics may be partial"),
    ],
) -> dict[str, Any]:
    return service.update_config(runtime, patch).to_json()
