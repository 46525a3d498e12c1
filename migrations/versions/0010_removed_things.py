"""removed things: a fork's record of the things it removed that its parent still holds

A fork's database holds only what the fork changed (``world.store.fork``); a thing it removed
that exists in its parent as of the fork's tick has no row of its own to delete, so the fork
keeps its id here. Empty in a world that is no fork.

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
        "removed_things",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_removed_things")),
    )


def downgrade() -> None:
    op.drop_table("removed_things")
