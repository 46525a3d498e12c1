"""crowd index: avatars by (place, id), so that a step names the first few of a crowd and
counts the rest from the index alone (replaces the index on place)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 11:40:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_avatars_place_id", "avatars", ["place", "id"])
    op.drop_index("ix_avatars_place", table_name="avatars")


def downgrade() -> None:
    op.create_index("ix_avatars_place", "avatars", ["place"])
    op.drop_index("ix_avatars_place_id", table_name="avatars")
