"""Registering agents: a credential per agent and, for policy agents, an avatar in the world;
and revoking an agent's credential.

Registering is shared by ``POST /v1/agents`` and ``bigworld agent create``. The avatar joins in
the same transaction as the agent row, so an agent never exists without its avatar or vice
versa. Revoking (``DELETE /v1/agents/{id}``) keeps the row, its name and everything it did; its
token is refused by every process within ``auth_cache_s`` (``server.auth.authenticate``).
"""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from server import records
from server.auth import ADMIN_NAME, hash_token, new_token
from server.errors import Conflict, NotFound, Unprocessable
from server.models import AgentRow
from world.contract import ErrorCode
from world.rules import Rules
from world.schemas import MAX_OPEN_EPISODES
from world.state import World
from world.store import SqlBackend, WorldRow


def register_agent(
    session: Session,
    world_row: WorldRow,
    rules: Rules,
    name: str,
    role: str,
    max_open_episodes: int = 1,
) -> tuple[AgentRow, str]:
    """Create agent ``name`` with ``role`` inside a world transaction (the caller holds the
    world lock and commits); returns the row and its token (shown once). A policy agent may
    hold ``max_open_episodes`` open at once; its first avatar joins now, the others when
    their first episode begins (``server.episodes``)."""
    if not 1 <= max_open_episodes <= MAX_OPEN_EPISODES:
        raise Unprocessable(
            f"expected max_open_episodes in [1, {MAX_OPEN_EPISODES}], got {max_open_episodes}",
            code=ErrorCode.INVALID_VALUE,
        )
    if max_open_episodes != 1 and role != "policy":
        raise Unprocessable(
            f"expected max_open_episodes 1 for a {role} agent (only policy agents play "
            f"episodes), got {max_open_episodes}",
            code=ErrorCode.INVALID_VALUE,
        )
    if records.agent_by_name(session=session, name=name) is not None:
        raise Conflict(f"an agent named {name!r} already exists", code=ErrorCode.AGENT_EXISTS)
    avatar_id = None
    if role == "policy":
        avatar_id = name
        world = World(SqlBackend(session, world_row), rules)
        if world.backend.load_avatar(avatar_id) is not None:
            raise Conflict(f"an avatar named {name!r} already exists", code=ErrorCode.AGENT_EXISTS)
        world.add_avatar(avatar_id, name)
        world.commit()
    token = new_token()
    agent = records.add_agent(
        session=session,
        name=name,
        role=role,
        token_hash=hash_token(token),
        avatar_id=avatar_id,
        max_open_episodes=max_open_episodes,
        now=time.time(),
    )
    return agent, token


def revoke_agent(session: Session, agent_id: int, now: float) -> AgentRow:
    """Mark agent ``agent_id``'s token revoked (the caller commits); revoking twice keeps the
    first time. The bootstrap admin is not revoked: its token rotates when a server starts
    with a new one, which a revoked admin could never be given back."""
    agent = session.get(AgentRow, agent_id)
    if agent is None:
        raise NotFound(f"no agent {agent_id}")
    if agent.name == ADMIN_NAME:
        raise Conflict(
            f"expected another agent than {ADMIN_NAME!r}: its token is rotated by starting a "
            "server with a new BIGWORLD_ADMIN_TOKEN (or --admin-token-file), not revoked",
            code=ErrorCode.ADMIN_AGENT,
        )
    if agent.revoked_at is None:
        agent.revoked_at = now
    return agent
