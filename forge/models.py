"""SQLAlchemy mapping of the forge's records: its decisions with their evidence
(``forge_decisions``) and its one row of state (``forge_state``).

They are on the one ``Base`` of ``world.store.models`` (one MetaData, one schema owned by the
migrations in ``migrations/``). The forge's decisions stay pure (design §8); the server's
forge transactions (``server/forge.py``) store them through ``forge.records``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Float, Index, Integer, String, false, text
from sqlalchemy.orm import Mapped, mapped_column

from world.store.models import Base, BigId


class ForgeDecisionRow(Base):
    """One forge decision with the evidence behind it: a proposal, a trial verdict, a
    retirement, or a dynamics change (drift, storm, flood, discovery)."""

    __tablename__ = "forge_decisions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cycle: Mapped[int] = mapped_column(Integer, index=True)
    tick: Mapped[int] = mapped_column(BigInteger, index=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    task_id: Mapped[str | None] = mapped_column(String(64), index=True)  # the task judged
    candidate_id: Mapped[str | None] = mapped_column(String(64), index=True)  # the variant
    verdict: Mapped[str] = mapped_column(String(16))
    evidence: Mapped[dict[str, Any]]
    created_at: Mapped[float] = mapped_column(Float)

    # A pool task's last proposal, read from the index alone at every cycle.
    __table_args__ = (Index("ix_forge_decisions_task_kind_cycle", "task_id", "kind", "cycle"),)


class ForgeStateRow(Base):
    """The forge's one row: paused or not, its configuration, and its cycle counter."""

    __tablename__ = "forge_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    config: Mapped[dict[str, Any]]
    cycle: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    last_tick: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    draws: Mapped[int] = mapped_column(  # episode begins that drew from the pool, ever
        BigInteger, default=0, server_default=text("0")
    )
