"""SQLAlchemy 2.x mapping of the world and everything that happens in it, and the one
declarative ``Base`` (one MetaData) that every package's tables are declared on.

World state (``world_meta``, ``regions``, ``places``, ``things``, ``avatars``) answers "what is";
the append-only ``events`` log (with ``event_entities`` as its index by entity and region)
answers "what happened"; ``tasks``, ``episodes`` and ``steps`` are what is played in it. Each
package owns its own tables: the server's records (``agents``, ``judgments``, ``policies``,
``expert_hints``) are in ``server/models.py``, the forge's (``forge_decisions``,
``forge_state``) in ``forge/models.py``. Tables here refer to those by name only
(``ForeignKey("agents.id")``), so the whole schema is on ``Base.metadata`` once those modules
are imported too (``migrations/env.py`` imports them; so does ``server.app``, through its
routes). The schema itself is owned by the Alembic migrations in ``migrations/``; these
classes must match them (a test compares the two).

JSON columns use the plain ``JSON`` type everywhere (never JSONB): PostgreSQL's ``json`` keeps
the text as written, so dict key order (exits, attributes) survives a round trip exactly as in
the in-memory backend, and replays through either backend stay identical.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-assigns rowids to a column declared exactly INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")

EPISODE_STATUSES = ("open", "succeeded", "failed", "abandoned")
TASK_STATUSES = ("active", "pending", "retired")
TASK_ORIGINS = ("sampled", "requested", "probe", "harder", "easier")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


# -- world state ---------------------------------------------------------------------------
class WorldMetaRow(Base):
    """The world's single row (id 1): seed, clock and counters.

    ``txn_seq`` and ``last_event_id`` are store bookkeeping, not world state: they number
    the transactions and events appended under the world lock, so they are not in dumps.
    """

    __tablename__ = "world_meta"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seed: Mapped[int] = mapped_column(BigInteger)
    tick: Mapped[int] = mapped_column(BigInteger)
    next_thing_id: Mapped[int] = mapped_column(BigInteger)
    counters: Mapped[dict[str, Any]]
    txn_seq: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    last_event_id: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))


class WorldVersionsRow(Base):
    """The world's dynamics versions (id 1), apart from its row: a world that has run for days
    holds thousands, and a row is written whole (SQLite rewrites every byte of a row it
    updates), while the world row changes with every transaction and the versions only when
    the forge publishes one."""

    __tablename__ = "world_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    versions: Mapped[list[Any]]


class RegionRow(Base):
    __tablename__ = "regions"

    rx: Mapped[int] = mapped_column(Integer, primary_key=True)
    ry: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    n_places: Mapped[int] = mapped_column(Integer)
    generated_tick: Mapped[int] = mapped_column(BigInteger)


class PlaceRow(Base):
    __tablename__ = "places"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    rx: Mapped[int] = mapped_column(Integer)
    ry: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(128))
    exits: Mapped[dict[str, Any]]
    outdoor: Mapped[bool] = mapped_column(Boolean)
    attrs: Mapped[dict[str, Any]]

    __table_args__ = (Index("ix_places_region", "rx", "ry"),)


class ThingRow(Base):
    __tablename__ = "things"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    num: Mapped[int] = mapped_column(Integer)
    place: Mapped[str | None] = mapped_column(String(64), index=True)
    container: Mapped[int | None] = mapped_column(BigInteger)
    holder: Mapped[str | None] = mapped_column(String(64), index=True)
    attrs: Mapped[dict[str, Any]]
    tick: Mapped[int] = mapped_column(BigInteger)


class ForkRow(Base):
    """A fork of this database's world or of one of its forks (``world.store.worlds``):
    ``location`` is its store, a SQLite file or a PostgreSQL schema."""

    __tablename__ = "worlds"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    parent: Mapped[str] = mapped_column(String(32), index=True)
    at_tick: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)  # unix seconds
    location: Mapped[str] = mapped_column(Text)


class RemovedThingRow(Base):
    """A thing a fork removed (``world.store.fork``): its parent's copy must not show through."""

    __tablename__ = "removed_things"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    tick: Mapped[int] = mapped_column(BigInteger)


class AvatarRow(Base):
    __tablename__ = "avatars"
    # A place's crowd in id order, and its count, read from the index alone
    # (``SqlBackend.load_crowd``): a fleet's avatars may stand by the thousand in one place.
    __table_args__ = (Index("ix_avatars_place_id", "place", "id"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    place: Mapped[str] = mapped_column(String(64))
    capacity: Mapped[int] = mapped_column(Integer)
    attrs: Mapped[dict[str, Any]]


# -- the event log -------------------------------------------------------------------------
class EventRow(Base):
    """One event; ``txn`` groups the events one world transaction appended."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    txn: Mapped[int] = mapped_column(BigInteger, index=True)
    tick: Mapped[int] = mapped_column(BigInteger, index=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    actor: Mapped[str | None] = mapped_column(String(64), index=True)
    entities: Mapped[list[Any]]
    payload: Mapped[dict[str, Any]]


class EventEntityRow(Base):
    """Index of events by entity ("thing:7", "place:0,0:3", "region:0,0", "avatar:ann")."""

    __tablename__ = "event_entities"

    entity: Mapped[str] = mapped_column(String(96), primary_key=True)
    event_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("events.id", ondelete="CASCADE"), primary_key=True
    )


# -- tasks, episodes and steps -------------------------------------------------------------
class TaskRow(Base):
    """A task and its place in the forge's pool (design §8)."""

    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    family: Mapped[str] = mapped_column(String(32), index=True)
    params: Mapped[dict[str, Any]]
    text: Mapped[str] = mapped_column(Text)
    created_tick: Mapped[int] = mapped_column(BigInteger)
    # The pool: one of TASK_STATUSES; where it came from (TASK_ORIGINS), from which task and
    # why; whether it belongs to the fixed probe set; the oracle's plan length when admitted.
    status: Mapped[str] = mapped_column(
        String(16), index=True, default="active", server_default="active"
    )
    origin: Mapped[str] = mapped_column(String(16), default="sampled", server_default="sampled")
    parent_id: Mapped[str | None] = mapped_column(String(64), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    probe: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    difficulty: Mapped[int | None] = mapped_column(Integer)
    status_tick: Mapped[int | None] = mapped_column(BigInteger)  # tick of the last change
    # The critic's measure at the last forge cycle: accuracy over the recent window of ended
    # rollouts (None before any), and how many rollouts that window held.
    accuracy: Mapped[float | None] = mapped_column(Float)
    rollouts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class EpisodeRow(Base):
    __tablename__ = "episodes"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    agent_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("agents.id"), index=True)
    avatar_id: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str] = mapped_column(String(64), ForeignKey("tasks.id"), index=True)
    family: Mapped[str] = mapped_column(String(32), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    outcome: Mapped[int | None] = mapped_column(Integer)
    budget: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    begin_tick: Mapped[int] = mapped_column(BigInteger, index=True)
    end_tick: Mapped[int | None] = mapped_column(BigInteger)
    observation: Mapped[str] = mapped_column(Text)  # step 0, as answered at begin
    admissible: Mapped[list[Any]]
    updated_at: Mapped[float] = mapped_column(Float)  # unix seconds: for the idle timeout
    distance: Mapped[int | None] = mapped_column(Integer)  # oracle plan length at begin
    # The fewest judgments any of its steps has, kept by ``server.records.add_judgments``:
    # what a judge's or trainer's "short of m votes" poll reads instead of counting every
    # step's.
    min_votes: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))

    __table_args__ = (
        Index("ix_episodes_min_votes", "min_votes"),
        Index("ix_episodes_task_newest", "task_id", "id"),  # a task's newest rollouts
        # At most one open episode per avatar, enforced by the database as well.
        Index(
            "uq_episodes_open_avatar",
            "avatar_id",
            unique=True,
            sqlite_where=text("status = 'open'"),
            postgresql_where=text("status = 'open'"),
        ),
    )


class StepRow(Base):
    __tablename__ = "steps"

    episode_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("episodes.id"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    action: Mapped[str] = mapped_column(Text)
    observation: Mapped[str] = mapped_column(Text)
    admissible: Mapped[list[Any]]
    tick: Mapped[int] = mapped_column(BigInteger, index=True)
    done: Mapped[bool] = mapped_column(Boolean)
    success: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[int | None] = mapped_column(Integer)
    # What the policy saw and said, for the trainer; None for clients that do not send them.
    policy_version: Mapped[str | None] = mapped_column(String(128), index=True)
    prompt: Mapped[str | None] = mapped_column(Text)
    completion: Mapped[str | None] = mapped_column(Text)
    parse_failed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    mode: Mapped[str | None] = mapped_column(String(16))  # rank | generate: how it chose
    temperature: Mapped[float | None] = mapped_column(Float)  # the temperature it sampled at
    # The token ids a generate-mode policy sampled (its end token included where it ended).
    completion_ids: Mapped[list[Any] | None] = mapped_column(JSON)
    distance: Mapped[int | None] = mapped_column(Integer)  # oracle plan length after the step
