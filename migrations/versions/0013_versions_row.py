"""versions row: the world's dynamics versions move from ``world_meta`` to a row of their own
(``world_versions``), written only when one is published

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 06:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "world_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_world_versions")),
    )
    op.execute("INSERT INTO world_versions (id, versions) SELECT id, versions FROM world_meta")
    with op.batch_alter_table("world_meta") as batch:
        batch.drop_column("versions")


def downgrade() -> None:
    with op.batch_alter_table("world_meta") as batch:
        batch.add_column(sa.Column("versions", sa.JSON(), nullable=True))
    op.execute(
        "UPDATE world_meta SET versions = "
        "(SELECT versions FROM world_versions WHERE world_versions.id = world_meta.id)"
    )
    with op.batch_alter_table("world_meta") as batch:
        batch.alter_column("versions", existing_type=sa.JSON(), nullable=False)
    op.drop_table("world_versions")
