"""decoding: the mode and temperature a step's policy and a judgment's reward model sampled at

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 20:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("steps", "judgments")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("mode", sa.String(length=16), nullable=True))
            batch_op.add_column(sa.Column("temperature", sa.Float(), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("temperature")
            batch_op.drop_column("mode")
