"""Initial schema: world state, the event log, agents, tasks, episodes, steps, judgments.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-29 23:26:59.420924
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "agents",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("avatar_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("name", name=op.f("uq_agents_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_agents_token_hash")),
    )
    op.create_table(
        "avatars",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("place", sa.String(length=64), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_avatars")),
    )
    with op.batch_alter_table("avatars", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_avatars_place"), ["place"], unique=False)

    op.create_table(
        "events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("txn", sa.BigInteger(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=True),
        sa.Column("entities", sa.JSON(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_actor"), ["actor"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_tick"), ["tick"], unique=False)
        batch_op.create_index(batch_op.f("ix_events_txn"), ["txn"], unique=False)

    op.create_table(
        "places",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("rx", sa.Integer(), nullable=False),
        sa.Column("ry", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("exits", sa.JSON(), nullable=False),
        sa.Column("outdoor", sa.Boolean(), nullable=False),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_places")),
    )
    with op.batch_alter_table("places", schema=None) as batch_op:
        batch_op.create_index("ix_places_region", ["rx", "ry"], unique=False)

    op.create_table(
        "regions",
        sa.Column("rx", sa.Integer(), nullable=False),
        sa.Column("ry", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("n_places", sa.Integer(), nullable=False),
        sa.Column("generated_tick", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("rx", "ry", name=op.f("pk_regions")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_tick", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_family"), ["family"], unique=False)

    op.create_table(
        "things",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("num", sa.Integer(), nullable=False),
        sa.Column("place", sa.String(length=64), nullable=True),
        sa.Column("container", sa.BigInteger(), nullable=True),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_things")),
    )
    with op.batch_alter_table("things", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_things_holder"), ["holder"], unique=False)
        batch_op.create_index(batch_op.f("ix_things_place"), ["place"], unique=False)

    op.create_table(
        "world_meta",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("next_thing_id", sa.BigInteger(), nullable=False),
        sa.Column("counters", sa.JSON(), nullable=False),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.Column("txn_seq", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_world_meta")),
    )
    op.create_table(
        "episodes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("agent_id", sa.BigInteger(), nullable=False),
        sa.Column("avatar_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.Integer(), nullable=True),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("begin_tick", sa.BigInteger(), nullable=False),
        sa.Column("end_tick", sa.BigInteger(), nullable=True),
        sa.Column("observation", sa.Text(), nullable=False),
        sa.Column("admissible", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_episodes_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_episodes_task_id_tasks")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_episodes")),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_episodes_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_begin_tick"), ["begin_tick"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_family"), ["family"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_episodes_task_id"), ["task_id"], unique=False)
        batch_op.create_index(
            "uq_episodes_open_avatar",
            ["avatar_id"],
            unique=True,
            sqlite_where=sa.text("status = 'open'"),
            postgresql_where=sa.text("status = 'open'"),
        )

    op.create_table(
        "event_entities",
        sa.Column("entity", sa.String(length=96), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_event_entities_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entity", "event_id", name=op.f("pk_event_entities")),
    )
    op.create_table(
        "judgments",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("episode_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.BigInteger(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("model_version", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_judgments_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["episode_id"], ["episodes.id"], name=op.f("fk_judgments_episode_id_episodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judgments")),
    )
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_judgments_episode_id"), ["episode_id"], unique=False)

    op.create_table(
        "steps",
        sa.Column("episode_id", sa.BigInteger(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("observation", sa.Text(), nullable=False),
        sa.Column("admissible", sa.JSON(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["episode_id"], ["episodes.id"], name=op.f("fk_steps_episode_id_episodes")
        ),
        sa.PrimaryKeyConstraint("episode_id", "step", name=op.f("pk_steps")),
    )
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_steps_tick"), ["tick"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_steps_tick"))

    op.drop_table("steps")
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_judgments_episode_id"))

    op.drop_table("judgments")
    op.drop_table("event_entities")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_episodes_open_avatar",
            sqlite_where=sa.text("status = 'open'"),
            postgresql_where=sa.text("status = 'open'"),
        )
        batch_op.drop_index(batch_op.f("ix_episodes_task_id"))
        batch_op.drop_index(batch_op.f("ix_episodes_status"))
        batch_op.drop_index(batch_op.f("ix_episodes_family"))
        batch_op.drop_index(batch_op.f("ix_episodes_begin_tick"))
        batch_op.drop_index(batch_op.f("ix_episodes_agent_id"))

    op.drop_table("episodes")
    op.drop_table("world_meta")
    with op.batch_alter_table("things", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_things_place"))
        batch_op.drop_index(batch_op.f("ix_things_holder"))

    op.drop_table("things")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_family"))

    op.drop_table("tasks")
    op.drop_table("regions")
    with op.batch_alter_table("places", schema=None) as batch_op:
        batch_op.drop_index("ix_places_region")

    op.drop_table("places")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_txn"))
        batch_op.drop_index(batch_op.f("ix_events_tick"))
        batch_op.drop_index(batch_op.f("ix_events_kind"))
        batch_op.drop_index(batch_op.f("ix_events_actor"))

    op.drop_table("events")
    with op.batch_alter_table("avatars", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_avatars_place"))

    op.drop_table("avatars")
    op.drop_table("agents")
