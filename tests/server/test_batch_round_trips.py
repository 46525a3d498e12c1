"""Round trips of a batch of steps (``POST /v1/steps``, issue 38): what a fleet's batch of 64
steps sends to the database, counted statement by statement, on SQLite and PostgreSQL; and on
PostgreSQL the answers and the rows stored are those of the batch that read each step's avatar,
the others beside it and its goal's receptacle apart from its episode, read what each of those
others holds apart in its give checks, drew each tick with a ``nextval``, wrote each step's
episode with an UPDATE of its own, released each step's savepoint, logged an INSERT a row and
wrote things and avatars each with statements of their own; and on both, those of the
batch whose steps each read their own instead of taking the reads made ahead for them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dbfixtures import fresh_database
from harness import ADMIN_TOKEN, Api, AppServer, Statements, db_state
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from server.errors import Conflict
from world.state import World
from world.store import SqlBackend, backend, driver, make_engine, records
from world.store.driver import Statement
from world.store.known import Batch
from world.store.models import AvatarRow, EpisodeRow, EventRow, StepRow, ThingRow

BATCH = 64
# The statements a batch of 64 sends at most (the fleet below, four batches in a row: 381, 261,
# 230, 210 on PostgreSQL, 687, 574, 535, 523 on SQLite). Before issue 38's cuts: 775, 749, 713,
# 698 on PostgreSQL, each step reading its avatar, the others beside it and its goal's
# receptacle apart from its episode, what each of those others holds apart in its give checks,
# drawing its tick with a nextval, writing its episode and itself with two statements and
# releasing its savepoint; SQLite (no round trips, the same code but the release, which it
# keeps) 891, 871, 827, 820. The bounds leave room for the world's content to change, not for
# a cut of 64 (a read, a nextval, a write or a release a step) to undo.
MOST = {"postgresql": 420, "sqlite": 720}
AVATAR_READ = (  # SqlBackend.load_avatar's own read
    "SELECT avatars.id, avatars.name, avatars.place, avatars.capacity, avatars.attrs, things.id"
)
CONTENTS_READ = "FROM things WHERE things.place = "  # ... AND things.container: load_contents's
HANDS_READ = "FROM things WHERE things.holder"  # load_inventories'


def _fleet(
    url: str, data: Path, counter: Statements | None, rounds: int, failing: bool = False, **env: str
) -> tuple[list[Counter[str]], list[Any]]:
    """A fleet's agent with ``BATCH`` open episodes steps them all in each of ``rounds``
    batches, its actions drawn from the admissible ones as the fleet bench draws them (an
    episode that ends is begun again between batches): what each batch sent, and every
    answer (begins' and batches'). ``failing``: a step may fail (sent again next batch).
    ``env``: the server's ``BIGWORLD_*`` settings."""
    counted: list[Counter[str]] = []
    answers: list[Any] = []
    server = AppServer(url, data, **env).start()
    try:
        fleet = Api(server, ADMIN_TOKEN).agent("fleet", max_open_episodes=BATCH)
        open_: dict[int, tuple[int, list[str]]] = {}

        def begin() -> None:
            begun = fleet.post("/v1/episodes", json={}).json()
            answers.append(begun)
            open_[begun["episode_id"]] = (0, begun["admissible_actions"] or ["look"])

        for _ in range(BATCH):
            begin()
        turn = 0
        for _ in range(rounds):
            batch = []
            for episode, (last, admissible) in open_.items():
                turn += 1
                action = admissible[turn * 7 % len(admissible)]
                batch.append({"episode_id": episode, "step": last + 1, "action": action})
            if counter is not None:
                counter.sent, counter.on = Counter(), True
            items = fleet.post("/v1/steps", json=batch).json()["items"]
            if counter is not None:
                counter.on = False
                counted.append(counter.sent)
            answers.extend(items)
            for step, item in zip(batch, items, strict=True):
                if failing and item["status"] != 200:
                    continue
                assert item["status"] == 200, item
                del open_[step["episode_id"]]
                if item["result"]["done"]:
                    begin()
                else:
                    admissible = item["result"]["admissible_actions"] or ["look"]
                    open_[step["episode_id"]] = (step["step"], admissible)
    finally:
        server.stop()
    return counted, answers


def _of(counted: Counter[str], start: str) -> int:
    return sum(n for sql, n in counted.items() if sql.startswith(start))


def _having(counted: Counter[str], part: str) -> int:
    return sum(n for sql, n in counted.items() if part in sql)


def test_a_batch_of_64_steps_sends_a_bounded_number_of_statements(
    database_url: str, tmp_path: Path, statements: Statements
) -> None:
    batches, _answers = _fleet(database_url, tmp_path / "data", statements, rounds=4)
    dialect = make_url(database_url).get_backend_name()
    for counted in batches:
        assert sum(counted.values()) <= MOST[dialect], counted.most_common()
        assert _of(counted, "SAVEPOINT") == BATCH  # every step ran, each in its savepoint
        assert _of(counted, "COMMIT") == 1
        # The steps' reads made ahead, five statements for the batch, and a step's own read of
        # its episode, avatar and crowd in one statement only where a step before it wrote its
        # episode or its avatar; never the avatar alone
        assert _of(counted, "WITH wanted AS") == 5
        assert _of(counted, "SELECT episodes.id") < BATCH
        assert _of(counted, AVATAR_READ) == 0
        # the others' hands read together by a step's give checks (26, 35, 49 reads in the
        # batches after the first before; 6, 7, 11 now)
        assert _having(counted, HANDS_READ) <= BATCH // 4
        if dialect == "postgresql":
            # The batch holds the whole world (a fleet's agent's steps lock it): it draws its
            # ticks itself and sets the clock's sequence once, and each step writes its
            # episode and itself in one statement.
            assert _of(counted, "SELECT nextval('bigworld_ticks')") == 0
            assert _of(counted, "SELECT setval('bigworld_ticks'") == 1
            assert _of(counted, "WITH episode_update AS (UPDATE episodes") == BATCH
            assert _of(counted, "UPDATE episodes") == 0
            assert _of(counted, "INSERT INTO steps") == 0
            # and leaves each step's savepoint open, the next opening inside it
            assert _of(counted, "RELEASE SAVEPOINT") == 0
            # A save writes its things and avatars in one statement, not an execution a row
            assert _of(counted, "INSERT INTO things") == _of(counted, "INSERT INTO avatars") == 0
            assert _of(counted, "WITH avatar_upsert AS (INSERT INTO avatars") > 0
            # The batch's log goes in one INSERT a table, its rows as one JSON array, not one
            # execution a row
            for table in ("events", "event_entities"):
                assert _having(counted, f"FROM json_populate_recordset(NULL::{table},") == 1
            assert _having(counted, "INSERT INTO events (") == 1
        else:
            assert _of(counted, "UPDATE episodes") == BATCH
            assert _of(counted, "INSERT INTO steps") == BATCH
            assert _of(counted, "RELEASE SAVEPOINT") == BATCH


def _stored(url: str) -> dict[str, Any]:
    """Every episode, step and event as stored (an episode's ``updated_at`` is the clock's),
    the world's hash and (PostgreSQL) the clock's sequence."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            episodes = [
                {k: v for k, v in row.items() if k != "updated_at"}
                for row in conn.execute(select(EpisodeRow.__table__).order_by("id")).mappings()
            ]
            steps = [
                dict(row)
                for row in conn.execute(
                    select(StepRow.__table__).order_by("episode_id", "step")
                ).mappings()
            ]
            events = [
                dict(r) for r in conn.execute(select(EventRow.__table__).order_by("id")).mappings()
            ]
            clock = None
            if conn.dialect.name == "postgresql":
                clock = conn.execute(text("SELECT last_value FROM bigworld_ticks")).scalar_one()
    finally:
        engine.dispose()
    return {
        "episodes": episodes,
        "steps": steps,
        "events": events,
        "clock": clock,
        "hash": db_state(url)["hash"],
    }


ENDING = {"BIGWORLD_STEP_BUDGET": "3"}  # every episode ends in the third batch


def _answered_and_stored(kind: str, folder: Path, failing: bool = False) -> tuple[list[Any], Any]:
    """The fleet's answers over four batches, its episodes ending (:data:`ENDING`), on a fresh
    database of ``kind`` in ``folder``, and what it stored."""
    folder.mkdir()
    with fresh_database(kind, folder) as url:
        _counted, answers = _fleet(url, folder / "data", None, 4, failing, **ENDING)
        return answers, _stored(url)


@pytest.mark.postgres
def test_batches_answer_and_store_as_with_more_statements_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers, stored = _answered_and_stored("postgres", tmp_path / "now")
    gather = World.gather_inventories
    with monkeypatch.context() as before:  # each tick from the sequence, two writes a step
        before.setattr(driver, "_left_open", driver._savepoint_sender("RELEASE SAVEPOINT"))
        before.setattr(Batch, "draw", lambda _self: None)
        before.setattr(SqlBackend, "read_around", lambda _self, *_read: None)

        def each_give_its_read(self: World, avatar_ids: list[str]) -> None:
            if len(avatar_ids) == 1:  # a give check's hands, not its first's read of all
                gather(self, avatar_ids)

        before.setattr(World, "gather_inventories", each_give_its_read)

        def two_writes(*, session: Any, episode: Any, changed: Any, **fields: Any) -> None:
            records.update_episode(session=session, episode=episode, **changed)
            records.add_step(session=session, **fields)

        before.setattr(records, "record_step", two_writes)
        before.setattr(  # the log as one INSERT a row (executemany)
            backend,
            "_insert_json",
            lambda conn, table, rows: Statement(table.insert()).run(conn, rows),
        )

        def each_table_apart(conn: Any, things: Any, avatars: Any) -> None:
            for model, rows in ((ThingRow, things), (AvatarRow, avatars)):
                if rows:
                    backend._upsert(conn, model, ["id"]).run(conn, list(rows))

        before.setattr(backend, "upsert_rows", each_table_apart)
        answered, stored_before = _answered_and_stored("postgres", tmp_path / "before")
    assert answers == answered  # every observation, admissible list, tick and outcome alike
    assert any(a.get("result") and a["result"]["done"] for a in answers)  # some ended
    assert stored == stored_before


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_batches_answer_and_store_alike_with_their_reads_made_ahead_or_not(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet's avatars all start in one place, so a step's read made ahead is often changed
    by a step before it: the things and avatars it covers put in or taken out as they were
    written, or its crowd left out (read again by its step) where it cannot be followed. Each
    way answers and stores as the steps that each read their own."""
    seen: Counter[str] = Counter()
    after, take = records._Ahead.after, Batch.take_ahead

    def counted_after(self: Any, avatars: Any, things: Any) -> Any:
        found = after(self, avatars, things)
        seen["dropped" if found is None else "kept" if found is self else "changed"] += 1
        if found is not None and found is not self:
            for part in ("around", "crowd", "contents"):
                before, now = getattr(self.read, part), getattr(found.read, part)
                seen[f"{part} changed"] += before is not None and now not in (None, before)
        return found

    def counted_take(self: Batch, key: tuple[int, int]) -> Any:
        found = take(self, key)
        seen["taken"] += found is not None
        seen["taken without its crowd"] += found is not None and found.read.crowd is None
        return found

    with monkeypatch.context() as counting:
        counting.setattr(records._Ahead, "after", counted_after)
        counting.setattr(Batch, "take_ahead", counted_take)
        answers, stored = _answered_and_stored(kind, tmp_path / "ahead")
    # (no step of this fleet puts a thing into another's goal's receptacle: that part is
    # checked by tests/world/test_reads_ahead.py)
    assert seen["taken"] > 0 and seen["around changed"] > 0 and seen["crowd changed"] > 0, seen
    assert seen["taken without its crowd"] > 0, seen
    with monkeypatch.context() as own:  # no read made ahead: each step reads its own
        own.setattr(records, "read_steps", lambda **_: {})
        answered, stored_own = _answered_and_stored(kind, tmp_path / "own")
    assert answers == answered  # every observation, admissible list, tick and outcome alike
    assert any(a.get("result") and a["result"]["done"] for a in answers)  # some ended
    assert stored == stored_own


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_step_rolled_back_after_its_save_leaves_the_reads_made_ahead_as_they_were(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some steps fail after the world's save (their record refused, a 409 of their own): each
    rolls back what it wrote, and the reads made ahead must not keep it. Each way answers and
    stores as the steps that each read their own."""
    record = records.record_step
    failed: Counter[str] = Counter()

    def refused(*, session: Any, episode: Any, changed: Any, **fields: Any) -> None:
        if (episode.id + fields["step"]) % 5 == 0:
            failed["steps"] += 1
            raise Conflict("refused after the save")
        record(session=session, episode=episode, changed=changed, **fields)

    monkeypatch.setattr(records, "record_step", refused)
    answers, stored = _answered_and_stored(kind, tmp_path / "ahead", failing=True)
    assert failed["steps"] > 0 and any(a.get("status", 200) != 200 for a in answers)
    with monkeypatch.context() as own:  # no read made ahead: each step reads its own
        own.setattr(records, "read_steps", lambda **_: {})
        answered, stored_own = _answered_and_stored(kind, tmp_path / "own", failing=True)
    assert answers == answered
    assert stored == stored_own
