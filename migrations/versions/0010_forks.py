"""forks: the registry of a world's forks, and a fork's record of the things it removed

``worlds`` lists the forks made from this database's world (and from its forks): each one's
parent, tick, when it was made and where its store is (``world.store.worlds``). A fork's
database holds only what the fork changed (``world.store.fork``); deleting its own row of a
thing its parent held at the fork's tick would let the parent's show through, so the fork keeps
the id of every thing it removed in ``removed_things``. Both are empty where there are no forks.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 02:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worlds",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("parent", sa.String(length=32), nullable=False),
        sa.Column("at_tick", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_worlds")),
    )
    op.create_index(op.f("ix_worlds_parent"), "worlds", ["parent"], unique=False)
    op.create_table(
        "removed_things",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_removed_things")),
    )


def downgrade() -> None:
    op.drop_table("removed_things")
    op.drop_index(op.f("ix_worlds_parent"), table_name="worlds")
    op.drop_table("worlds")
