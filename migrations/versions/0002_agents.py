"""agents: step records, judgment votes, policy registry, expert hints

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 00:16:41.790329
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("parent", sa.Integer(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("agent_id", sa.BigInteger(), nullable=False),
        sa.Column("created_tick", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_policies_agent_id_agents")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_policies")),
        sa.UniqueConstraint("kind", "version", name=op.f("uq_policies_kind")),
    )
    op.create_table(
        "expert_hints",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("episode_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("action", sa.Text(), nullable=True),
        sa.Column("plan_length", sa.Integer(), nullable=True),
        sa.Column("agent_id", sa.BigInteger(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_expert_hints_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["episode_id"], ["episodes.id"], name=op.f("fk_expert_hints_episode_id_episodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_expert_hints")),
    )
    with op.batch_alter_table("expert_hints", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_expert_hints_episode_id"), ["episode_id"], unique=False
        )

    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("distance", sa.Integer(), nullable=True))

    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("vote", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
    # Judgments stored before votes were numbered get 0, 1, ... per step, in arrival order.
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, episode_id, step FROM judgments ORDER BY id")).all()
    seen: dict[tuple[int, int], int] = {}
    for row_id, episode_id, step in rows:
        vote = seen[(episode_id, step)] = seen.get((episode_id, step), -1) + 1
        if vote:
            conn.execute(
                sa.text("UPDATE judgments SET vote = :v WHERE id = :i"), {"v": vote, "i": row_id}
            )
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.create_unique_constraint(
            batch_op.f("uq_judgments_episode_id"), ["episode_id", "step", "vote"]
        )

    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy_version", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("prompt", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("completion", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("parse_failed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("distance", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_steps_policy_version"), ["policy_version"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_steps_policy_version"))
        batch_op.drop_column("distance")
        batch_op.drop_column("parse_failed")
        batch_op.drop_column("completion")
        batch_op.drop_column("prompt")
        batch_op.drop_column("policy_version")

    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_judgments_episode_id"), type_="unique")
        batch_op.drop_column("vote")

    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("distance")

    with op.batch_alter_table("expert_hints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_expert_hints_episode_id"))

    op.drop_table("expert_hints")
    op.drop_table("policies")
