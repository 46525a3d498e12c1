"""Agents: the admin registers one (a policy agent gets its avatar too) or revokes its token;
any agent asks who its token is."""

from __future__ import annotations

import time

from fastapi import APIRouter, status
from sqlalchemy.orm import Session

from server.accounts import register_agent, revoke_agent
from server.dependencies import AdminDep, CallerDep, RuntimeDep
from server.models import AgentRow
from server.routes.common import ERRORS, IdPath
from world.schemas import AgentCreate, AgentCreated, AgentInfo, AgentRevoked
from world.store import WorldRow

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=ERRORS)


@router.post("", response_model=AgentCreated, status_code=status.HTTP_201_CREATED)
def create_agent(body: AgentCreate, runtime: RuntimeDep, _admin: AdminDep) -> AgentCreated:
    def work(session: Session, world_row: WorldRow) -> tuple[AgentRow, str]:
        made = register_agent(
            session, world_row, runtime.rules, body.name, body.role, body.max_open_episodes
        )
        session.commit()
        return made

    agent, token = runtime.world_transaction(work)
    return AgentCreated(**AgentInfo.model_validate(agent).model_dump(), token=token)


@router.get("/me", response_model=AgentInfo)
def me(caller: CallerDep) -> AgentInfo:
    """The agent this token is: its id (the episodes' ``agent`` filter), role, avatar and how
    many episodes it may hold open at once."""
    return AgentInfo.model_validate(caller)


@router.delete("/{agent_id}", response_model=AgentRevoked)
def revoke(agent_id: IdPath, runtime: RuntimeDep, _admin: AdminDep) -> AgentRevoked:
    """Revoke the agent's token: this process refuses it at once, every other within
    ``auth_cache_s``. The agent's row, name, avatar and history stay; a repeat is a no-op."""

    def work(session: Session, _world_row: WorldRow) -> AgentRevoked:
        agent = revoke_agent(session, agent_id, time.time())
        assert agent.revoked_at is not None
        out = AgentRevoked(
            id=agent.id,
            name=agent.name,
            role=agent.role,
            avatar_id=agent.avatar_id,
            revoked_at=agent.revoked_at,
        )
        session.commit()
        return out

    out = runtime.world_transaction(work)
    runtime.callers.forget_agent(agent_id)
    return out
