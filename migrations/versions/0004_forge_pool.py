"""forge pool: measured accuracy on tasks, a draw counter on the forge's state

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 03:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("accuracy", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("rollouts", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    with op.batch_alter_table("forge_state", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("draws", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("forge_state", schema=None) as batch_op:
        batch_op.drop_column("draws")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_column("rollouts")
        batch_op.drop_column("accuracy")
