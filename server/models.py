"""SQLAlchemy mapping of the server's own records: agents and their credentials, judgments,
the model registry (``policies``) and uses of the expert route (``expert_hints``).

They are on the one ``Base`` of ``world.store.models`` (one MetaData, one schema owned by the
migrations in ``migrations/``); the world's tables refer to ``agents`` by name
(``ForeignKey("agents.id")``), so nothing in world/ imports this module. Import it wherever
the whole schema must be known (``migrations/env.py``, tests comparing it with a database).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from world.store.models import Base, BigId

ROLES = ("admin", "policy", "reward", "trainer", "observer")


class AgentRow(Base):
    __tablename__ = "agents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    avatar_id: Mapped[str | None] = mapped_column(String(64))
    # episodes a policy agent may hold open at once, each with an avatar of its own (the first
    # is avatar_id, the others avatar_id.2, avatar_id.3, ...: server.episodes)
    max_open_episodes: Mapped[int] = mapped_column(Integer, server_default="1")
    created_at: Mapped[float] = mapped_column(Float)  # unix seconds (server clock, not world)
    # unix seconds when an admin revoked the token (DELETE /v1/agents/{id}); null while valid
    revoked_at: Mapped[float | None] = mapped_column(Float)


class JudgmentRow(Base):
    __tablename__ = "judgments"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    episode_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("episodes.id"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    agent_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("agents.id"))
    vote: Mapped[int] = mapped_column(
        Integer, default=0, server_default=text("0")
    )  # j of the m votes on one step
    score: Mapped[int] = mapped_column(Integer)
    rationale: Mapped[str] = mapped_column(Text)
    model_version: Mapped[str] = mapped_column(String(128))
    mode: Mapped[str | None] = mapped_column(String(16))  # rank | generate: how it chose
    temperature: Mapped[float | None] = mapped_column(Float)
    completion_ids: Mapped[list[Any] | None] = mapped_column(JSON)  # a generated rationale's ids
    created_at: Mapped[float] = mapped_column(Float)

    # One judgment per vote slot: a resent batch stores nothing twice.
    __table_args__ = (UniqueConstraint("episode_id", "step", "vote"),)


class PolicyRow(Base):
    """A registered model version (policy or reward) and where its weights are."""

    __tablename__ = "policies"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer)  # 1, 2, ... per kind
    path: Mapped[str] = mapped_column(Text)
    parent: Mapped[int | None] = mapped_column(Integer)
    config: Mapped[dict[str, Any]]
    metrics: Mapped[dict[str, Any]]
    agent_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("agents.id"))
    created_tick: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (UniqueConstraint("kind", "version"),)


class ExpertHintRow(Base):
    """One use of the expert route: which action the oracle advised, to whom, when."""

    __tablename__ = "expert_hints"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    episode_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("episodes.id"), index=True)
    step: Mapped[int] = mapped_column(Integer)  # the step the advice is for
    action: Mapped[str | None] = mapped_column(Text)  # None: the oracle found no plan
    plan_length: Mapped[int | None] = mapped_column(Integer)
    agent_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("agents.id"))
    tick: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
