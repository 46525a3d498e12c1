"""forge: the task pool's columns, forge decisions and the forge's state

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 02:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), nullable=False, server_default="active")
        )
        batch_op.add_column(
            sa.Column("origin", sa.String(length=16), nullable=False, server_default="sampled")
        )
        batch_op.add_column(sa.Column("parent_id", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("reason", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("probe", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("difficulty", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("status_tick", sa.BigInteger(), nullable=True))
        batch_op.create_index(batch_op.f("ix_tasks_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_tasks_parent_id"), ["parent_id"], unique=False)

    op.create_table(
        "forge_decisions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("candidate_id", sa.String(length=64), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forge_decisions")),
    )
    with op.batch_alter_table("forge_decisions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_forge_decisions_cycle"), ["cycle"], unique=False)
        batch_op.create_index(batch_op.f("ix_forge_decisions_tick"), ["tick"], unique=False)
        batch_op.create_index(batch_op.f("ix_forge_decisions_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_forge_decisions_task_id"), ["task_id"], unique=False)

    op.create_table(
        "forge_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("last_tick", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forge_state")),
    )


def downgrade() -> None:
    op.drop_table("forge_state")
    with op.batch_alter_table("forge_decisions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_forge_decisions_task_id"))
        batch_op.drop_index(batch_op.f("ix_forge_decisions_kind"))
        batch_op.drop_index(batch_op.f("ix_forge_decisions_tick"))
        batch_op.drop_index(batch_op.f("ix_forge_decisions_cycle"))
    op.drop_table("forge_decisions")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_parent_id"))
        batch_op.drop_index(batch_op.f("ix_tasks_status"))
        batch_op.drop_column("status_tick")
        batch_op.drop_column("difficulty")
        batch_op.drop_column("probe")
        batch_op.drop_column("reason")
        batch_op.drop_column("parent_id")
        batch_op.drop_column("origin")
        batch_op.drop_column("status")
