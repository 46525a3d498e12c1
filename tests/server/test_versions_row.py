"""Migration 0013: a world's dynamics versions move from its row to a row of their own, the
stores of forks made before are migrated when the server starts, and downgrading puts the
versions back (issue 38: a world that has run for days holds thousands of versions, and SQLite
rewrote them with every transaction's update of the world row)."""

from __future__ import annotations

import json
from pathlib import Path

from alembic import command
from sqlalchemy import Engine, text

from migrations import alembic_config, at_head, upgrade_forks, upgrade_to_head
from world.rules import RulesVersion, Versions, default_rules
from world.store import make_engine, read_world, session_factory
from world.store.worlds import make_store

GENESIS = default_rules().dynamics
VERSIONS = [
    GENESIS,
    GENESIS.replace(version=2, since_tick=2_000, spoil_rate=1.3, cause="drift"),
    GENESIS.replace(version=3, since_tick=2_000, prices={"apple": 1.5}, cause="market"),
]


def _to(engine: Engine, revision: str, *, down: bool = False) -> None:
    config = alembic_config()
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)
        connection.commit()


def _world_at_0012(engine: Engine) -> None:
    """A store at revision 0012 whose world row holds :data:`VERSIONS`."""
    _to(engine, "0012")
    stored = json.dumps([v.row() for v in VERSIONS])
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO world_meta (id, seed, tick, next_thing_id, counters, versions, "
                "txn_seq, last_event_id) VALUES (1, 7, 2500, 1, :c, :v, 0, 0)"
            ),
            {"c": "{}", "v": stored},
        )


def test_upgrading_moves_the_versions_to_their_row_and_downgrading_back(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        _world_at_0012(engine)
        upgrade_to_head(engine)
        with session_factory(engine)() as session:
            meta = read_world(session).meta
        assert meta.versions == Versions(VERSIONS) and meta.versions.at(2_000).version == 3
        assert (meta.seed, meta.tick) == (7, 2500)
        _to(engine, "0012", down=True)
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT versions FROM world_meta")).scalar_one()
        rows = json.loads(stored) if isinstance(stored, str) else stored
        assert [RulesVersion.from_row(r) for r in rows] == VERSIONS
    finally:
        engine.dispose()


def test_a_forks_store_made_before_is_migrated_with_the_main_world(
    database_url: str, tmp_path: Path
) -> None:
    main = make_engine(database_url)
    old = None
    try:
        upgrade_to_head(main)
        location = str(tmp_path / "forks" / "old.db") if "sqlite" in database_url else "fork_old_1"
        old = make_store(main, location)
        _world_at_0012(old)
        with main.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO worlds (name, parent, at_tick, created_at, location) "
                    "VALUES ('old', 'main', 2500, 0, :location)"
                ),
                {"location": location},
            )
        assert not at_head(old)
        assert upgrade_forks(main) == 1
        assert at_head(old) and upgrade_forks(main) == 0
        with session_factory(old)() as session:
            assert read_world(session).meta.versions == Versions(VERSIONS)
    finally:
        if old is not None:
            old.dispose()
        main.dispose()
