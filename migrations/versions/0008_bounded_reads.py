"""reads bounded by what they answer, not by the world's history

Each episode keeps the fewest judgments any of its steps has (``min_votes``): the judge's and
the trainer's poll (``GET /v1/episodes?needs_votes=m``) read it instead of counting every
stored step's judgments. ``ix_episodes_task_newest`` lets the forge read a task's newest
rollouts without sorting all of them (PostgreSQL; SQLite's task index already holds the id);
its proposals are found by candidate, and a task's last proposal from an index alone.

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
    op.create_index("ix_episodes_task_newest", "episodes", ["task_id", "id"], unique=False)
    op.create_index(
        "ix_forge_decisions_candidate_id", "forge_decisions", ["candidate_id"], unique=False
    )
    op.create_index(
        "ix_forge_decisions_task_kind_cycle",
        "forge_decisions",
        ["task_id", "kind", "cycle"],
        unique=False,
    )
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_index("ix_forge_decisions_task_kind_cycle", table_name="forge_decisions")
    op.drop_index("ix_forge_decisions_candidate_id", table_name="forge_decisions")
    op.drop_index("ix_episodes_task_newest", table_name="episodes")
    op.drop_index("ix_episodes_min_votes", table_name="episodes")
    op.drop_column("episodes", "min_votes")  # SQLite 3.35 and later drop a column in place
