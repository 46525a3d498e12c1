"""Registering agents: a credential per agent and, for policy agents, an avatar in the world.

Shared by ``POST /v1/agents`` and ``bigworld agent create``. The avatar joins in the same
transaction as the agent row, so an agent never exists without its avatar or vice versa.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from server.auth import hash_token, new_token
from server.errors import Conflict
from world.rules import Rules
from world.state import World
from world.store import SqlBackend, records
from world.store.models import AgentRow


def register_agent(
    session: Session, meta: dict[str, Any], rules: Rules, name: str, role: str
) -> tuple[AgentRow, str]:
    """Create agent ``name`` with ``role`` inside a world transaction (the caller holds the
    world lock and commits); returns the row and its token (shown once)."""
    if records.agent_by_name(session=session, name=name) is not None:
        raise Conflict(f"an agent named {name!r} already exists", code="agent_exists")
    avatar_id = None
    if role == "policy":
        avatar_id = name
        world = World(SqlBackend(session, meta), rules)
        if world.backend.load_avatar(avatar_id) is not None:
            raise Conflict(f"an avatar named {name!r} already exists", code="agent_exists")
        world.add_avatar(avatar_id, name)
        world.commit()
    token = new_token()
    agent = records.add_agent(
        session=session,
        name=name,
        role=role,
        token_hash=hash_token(token),
        avatar_id=avatar_id,
        now=time.time(),
    )
    return agent, token
