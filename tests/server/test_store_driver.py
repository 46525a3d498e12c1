"""Statements on the driver's cursor (``world.store.driver``): the same values as through Core
both ways, constant defaults filled, and errors raised as SQLAlchemy raises them, leaving the
transaction as it was. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dbfixtures import fresh_database
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Engine,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    select,
)
from sqlalchemy.exc import DBAPIError, IntegrityError

from migrations import upgrade_to_head
from world.store import StoreError, make_engine
from world.store.driver import Statement
from world.store.models import Base

PLACES = Base.metadata.tables["places"]
EPISODES = Base.metadata.tables["episodes"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_database(request.param, tmp_path) as url:
        made = make_engine(url)
        upgrade_to_head(made)
        yield made
        made.dispose()


def _place(name: str, outdoor: bool) -> dict[str, Any]:
    return {
        "id": f"0,0:{name}",
        "kind": "field",
        "name": name,
        "exits": {"north": "0,0:b", "east": "0,0:c"},  # key order is kept (design: JSON, not JSONB)
        "outdoor": outdoor,
        "attrs": {"light": 0.5, "tags": ["wet", None], "nested": {"z": 1, "a": 2}},
        "rx": 0,
        "ry": 0,
    }


def test_rows_written_and_read_on_the_driver_equal_what_core_reads_and_writes(
    engine: Engine,
) -> None:
    by_region = Statement(
        select(PLACES).where(PLACES.c.rx == bindparam("rx"), PLACES.c.ry == bindparam("ry")),
        PLACES.columns,
    )
    with engine.begin() as conn:
        Statement(PLACES.insert()).run(conn, [_place("a", True), _place("b", False)])
        conn.execute(PLACES.insert(), _place("c", False))
        driver = sorted(by_region.rows(conn, {"rx": 0, "ry": 0}), key=lambda r: r["id"])
        core = [dict(r) for r in conn.execute(select(PLACES).order_by(PLACES.c.id)).mappings()]
    assert driver == core
    assert [r["outdoor"] for r in driver] == [True, False, False]
    assert {type(r["outdoor"]) for r in driver} == {bool}  # also on SQLite, which stores 0 and 1
    assert list(driver[0]["exits"]) == ["north", "east"]
    assert driver[0]["attrs"] == _place("a", True)["attrs"]


def test_every_column_type_the_schema_uses_reads_back_as_through_core(engine: Engine) -> None:
    typed = Table(
        "typed",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("big", BigInteger),
        Column("real", Float),  # updated_at, temperature: PostgreSQL's float processors
        Column("text", Text),
        Column("listed", JSON),
        Column("flag", Boolean),
    )
    rows = [
        {
            "id": 1,
            "big": 2**62,
            "real": 1764779500.25,
            "text": "é\n",
            "listed": [1, "a"],
            "flag": True,
        },
        {"id": 2, "big": None, "real": None, "text": None, "listed": None, "flag": None},
    ]
    with engine.begin() as conn:
        typed.metadata.create_all(conn)
        Statement(typed.insert()).run(conn, rows)
        every = Statement(select(typed).order_by(typed.c.id), typed.columns)
        driver = every.rows(conn, {})
        again = every.rows(conn, {})  # the processors learned at the first execution
        core = [dict(r) for r in conn.execute(select(typed).order_by(typed.c.id)).mappings()]
    assert driver == again == core == rows
    assert [type(v) for v in driver[0].values()] == [int, int, float, str, list, bool]


def test_an_update_sets_the_keys_it_is_given_and_a_left_out_column_takes_its_default(
    engine: Engine,
) -> None:
    update = Statement(PLACES.update().where(PLACES.c.id == bindparam("place")))
    with engine.begin() as conn:
        Statement(PLACES.insert()).run(conn, _place("a", True))
        update.run(conn, {"place": "0,0:a", "name": "renamed"})
        update.run(conn, {"place": "0,0:a", "outdoor": False, "attrs": {}})
        row = conn.execute(select(PLACES)).mappings().one()
    assert (row["name"], row["outdoor"], row["attrs"]) == ("renamed", False, {})

    # a constant default is filled in (as steps.parse_failed's); a callable one is refused
    made = MetaData()
    flagged = Table(
        "flagged",
        made,
        Column("id", Integer, primary_key=True),
        Column("flag", Boolean, default=False),
    )
    counted = Table(
        "counted", made, Column("id", Integer, primary_key=True), Column("n", Integer, default=len)
    )
    with engine.begin() as conn:
        made.create_all(conn)
        Statement(flagged.insert()).run(conn, {"id": 1})
        [[_, flag]] = Statement(select(flagged), flagged.columns).lists(conn, {})
        assert flag is False
        with pytest.raises(StoreError, match="'n'"):
            Statement(counted.insert()).run(conn, {"id": 1})


def test_a_refused_statement_raises_sqlalchemys_error_and_keeps_the_transaction(
    engine: Engine,
) -> None:
    insert = Statement(PLACES.insert())
    read = Statement(select(PLACES.c.id), [PLACES.c.id])
    with engine.connect() as conn:
        conn.begin()
        insert.run(conn, _place("a", True))
        with pytest.raises(IntegrityError, match="places"):
            with conn.begin_nested():
                insert.run(conn, _place("a", False))  # the same id
        assert read.lists(conn, {}) == [["0,0:a"]]
        # a table the database lacks: the error Core raises, from the driver's statement
        missing = Table("missing", MetaData(), Column("id", Integer, primary_key=True))
        with pytest.raises(DBAPIError) as through_core, conn.begin_nested():
            conn.execute(select(missing))
        with pytest.raises(DBAPIError) as on_driver, conn.begin_nested():
            Statement(select(missing), missing.columns).rows(conn, {})
        assert type(on_driver.value) is type(through_core.value)
        assert "missing" in str(on_driver.value)
        assert read.lists(conn, {}) == [["0,0:a"]]
        conn.commit()


def test_savepoints_keep_and_undo_their_work_whether_or_not_a_statement_ran_in_them(
    engine: Engine,
) -> None:
    """On PostgreSQL a savepoint goes with the next statement (``driver.send_savepoints``):
    one rolled back before any statement is never sent, and nested ones opened in a row go
    together; each keeps or undoes exactly its own work, through the driver or Core."""
    insert = Statement(PLACES.insert())
    read = Statement(select(PLACES.c.id).order_by(PLACES.c.id), [PLACES.c.id])
    with engine.connect() as conn:
        conn.begin()
        conn.begin_nested().rollback()  # nothing ran in it
        kept = conn.begin_nested()
        insert.run(conn, _place("a", True))
        kept.commit()
        outer = conn.begin_nested()
        inner = conn.begin_nested()  # both open with the next statement
        insert.run(conn, _place("b", True))
        inner.rollback()
        assert read.lists(conn, {}) == [["0,0:a"]]
        insert.run(conn, _place("c", True))
        outer.rollback()
        undone_through_core = conn.begin_nested()
        conn.execute(PLACES.insert().values(**_place("d", False)))
        undone_through_core.rollback()
        kept_through_core = conn.begin_nested()
        conn.execute(PLACES.insert().values(**_place("e", False)))
        kept_through_core.commit()
        conn.begin_nested().rollback()
        conn.commit()
    with engine.connect() as conn:
        assert read.lists(conn, {}) == [["0,0:a"], ["0,0:e"]]
