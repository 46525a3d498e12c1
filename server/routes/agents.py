"""POST /v1/agents: the admin registers an agent (a policy agent gets its avatar too)."""

from __future__ import annotations

from fastapi import APIRouter, status

from server.accounts import register_agent
from server.dependencies import AdminDep, RuntimeDep
from server.routes.common import ERRORS
from server.schemas import AgentCreate, AgentCreated

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=ERRORS)


@router.post("", response_model=AgentCreated, status_code=status.HTTP_201_CREATED)
def create_agent(body: AgentCreate, runtime: RuntimeDep, _admin: AdminDep) -> AgentCreated:
    with runtime.world_transaction() as (session, meta):
        agent, token = register_agent(session, meta, runtime.rules, body.name, body.role)
        session.commit()
    return AgentCreated(
        id=agent.id, name=agent.name, role=body.role, avatar_id=agent.avatar_id, token=token
    )
