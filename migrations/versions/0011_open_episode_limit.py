"""open episode limit: how many episodes a policy agent may hold open at once
(``agents.max_open_episodes``; 1, as every agent had before, unless an admin says more)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 09:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "agents",
        sa.Column("max_open_episodes", sa.Integer(), server_default="1", nullable=False),
    )


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch would rebuild ``agents``,
    # which the episodes' and judgments' foreign keys refuse.
    op.drop_column("agents", "max_open_episodes")
