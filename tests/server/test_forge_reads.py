"""What the server reads of the past stays bounded (#15): each live task's newest ``per_task``
ended rollouts, for a forge cycle, come from one walk down ``ix_episodes_task_newest``, through
one statement built once, whatever the number of episodes the task has had; a page of the
episode listing reads its tasks in one statement, not one per episode."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbfixtures import fresh_database
from sqlalchemy import Engine, event

from migrations import upgrade_to_head
from server import records as server_records
from world.store import make_engine, records, session_factory

PER_TASK = 3


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_database(request.param, tmp_path) as url:
        made = make_engine(url)
        upgrade_to_head(made)
        yield made
        made.dispose()


def _episodes(engine: Engine, statuses: dict[str, list[str]]) -> dict[str, list[int]]:
    """Episodes of each task in ``statuses`` (one per status, in order); their ids by task."""
    made: dict[str, list[int]] = {}
    with session_factory(engine)() as session:
        agent = server_records.add_agent(
            session=session, name="ann", role="policy", token_hash="h", avatar_id="ann", now=0.0
        )
        for task_id, kinds in statuses.items():
            spec = {"family": "go_to", "params": {"place": "0,0:1"}}
            records.save_task(session=session, task_id=task_id, spec=spec, text="go", tick=0)
            for status in kinds:
                episode = records.add_episode(
                    session=session, agent_id=agent.id, avatar_id="ann", task_id=task_id,
                    family="go_to", status=status, outcome=None if status == "open" else 1,
                    budget=5, last_step=0, begin_tick=0, end_tick=None if status == "open" else 1,
                    observation="", admissible=[], updated_at=0.0, distance=None,
                )  # fmt: skip
                made.setdefault(task_id, []).append(episode.id)
        session.commit()
    return made


def test_each_task_gets_its_newest_ended_rollouts_newest_first(engine: Engine) -> None:
    made = _episodes(
        engine,
        {
            "b": ["succeeded", "failed", "abandoned", "succeeded", "open"],
            "a": ["failed"],  # one open episode per avatar at most: b has it
            "c": [],
        },
    )
    with session_factory(engine)() as session:
        found = server_records.recent_rollouts(
            session=session, task_ids=["c", "b", "a"], per_task=PER_TASK
        )
    assert [(r["task_id"], r["id"]) for r in found] == [
        ("a", made["a"][0]),
        *(("b", made["b"][i]) for i in (3, 2, 1)),  # the open one is left out, the oldest too
    ]


def test_the_walk_uses_the_task_index_on_sqlite(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'world.db'}")
    upgrade_to_head(engine)
    statement = server_records._NEWEST_ENDED.compile(engine)
    values = statement.construct_params({"task_id": "t", "per_task": PER_TASK})
    assert statement.positiontup is not None
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {statement}", tuple(values[k] for k in statement.positiontup)
        ).all()
    details = " ".join(str(row[-1]) for row in plan)
    assert "ix_episodes_task_newest" in details and "TEMP B-TREE" not in details, details
    engine.dispose()


def test_a_page_of_episodes_reads_its_tasks_in_one_statement(engine: Engine) -> None:
    """40 episodes of 40 tasks: the page, its tasks, nothing per episode (the rows a first
    query had loaded were dropped by the session's weak identity map and fetched again, one
    statement per episode, which made the trainer's listings slow as the pool grew)."""
    from server.routes.episodes import list_episodes

    made = _episodes(engine, {f"t{i:02d}": ["succeeded"] for i in range(40)})
    statements: list[str] = []
    with session_factory(engine)() as session:
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        page = list_episodes(
            session, None, agent=None, task=None, family=None, status=None, from_tick=None,
            to_tick=None, needs_votes=None, policy_version=None, limit=100, cursor=None,
        )  # fmt: skip
    assert [e.id for e in page.items] == sorted(i for ids in made.values() for i in ids)
    assert {e.task.id for e in page.items} == set(made)
    assert len(statements) <= 3, statements
