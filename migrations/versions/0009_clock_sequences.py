"""clock sequences: on PostgreSQL, ticks, log transaction numbers and event ids come
from sequences instead of the world row, so that steps in distant regions no longer write one
hot row (design §4, Region locks; #16 §3)

Each sequence starts where the world row's counter stood. SQLite keeps its single writer and
the world row's counters: nothing changes there.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 17:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# name -> the world row's value the sequence resumes after (0 on an empty database)
SEQUENCES = {
    "bigworld_ticks": "SELECT max(tick) FROM world_meta",
    "bigworld_txns": "SELECT max(txn_seq) FROM world_meta",
    "bigworld_events": "SELECT max(last_event_id) FROM world_meta",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, last in SEQUENCES.items():
        op.execute(f"CREATE SEQUENCE {name} AS bigint MINVALUE 0 START WITH 1")
        # is_called false: the next nextval answers exactly this value.
        op.execute(f"SELECT setval('{name}', coalesce(({last}), 0) + 1, false)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in SEQUENCES:
        op.execute(f"DROP SEQUENCE {name}")
