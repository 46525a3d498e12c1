"""min votes: each episode keeps the fewest judgments any of its steps has

The judge's and the trainer's poll (``GET /v1/episodes?needs_votes=m``) read this column
instead of counting every stored step's judgments, which grew with the world's history.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 05:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Per step, the judgments of that step; per episode, the fewest (0 where a step has none).
BACKFILL = """
UPDATE episodes SET min_votes = COALESCE((
    SELECT MIN(per_step.n) FROM (
        SELECT COUNT(judgments.id) AS n
        FROM steps LEFT JOIN judgments
            ON judgments.episode_id = steps.episode_id AND judgments.step = steps.step
        WHERE steps.episode_id = episodes.id
        GROUP BY steps.step
    ) AS per_step
), 0)
"""


def upgrade() -> None:
    # Plain ALTER TABLE on both databases: SQLite's batch mode would recreate the table, which
    # the foreign keys of steps and judgments forbid while SQLite checks them.
    op.add_column(
        "episodes",
        sa.Column("min_votes", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.create_index("ix_episodes_min_votes", "episodes", ["min_votes"], unique=False)
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_index("ix_episodes_min_votes", table_name="episodes")
    op.drop_column("episodes", "min_votes")  # SQLite 3.35 and later drop a column in place
