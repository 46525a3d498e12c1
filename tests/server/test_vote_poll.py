"""The judges' and trainer's poll, "ended episodes with a step short of m votes", reads each
episode's ``min_votes``, kept as judgments arrive and rebuilt by migration 0008 from the stored
judgments; it never counts every stored step's judgments again."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from dbfixtures import fresh_database
from sqlalchemy import select

from migrations import alembic_config, upgrade_to_head
from server import records as server_records
from world.store import make_engine, records, session_factory
from world.store.models import EpisodeRow

STEPS = 3
M = 3


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path):
    with fresh_database(request.param, tmp_path) as url:
        yield url


def _episode(session, name: str, status: str, steps: int) -> int:
    agent = server_records.add_agent(
        session=session, name=name, role="policy", token_hash=name, avatar_id=name, now=0.0
    )
    spec = {"family": "go_to", "params": {"place": "0,0:1"}}
    task = records.save_task(session=session, task_id="t", spec=spec, text="go", tick=0)
    episode = records.add_episode(
        session=session,
        agent_id=agent.id,
        avatar_id=name,
        task_id=task.id,
        family="go_to",
        status=status,
        outcome=None if status == "open" else -1,
        budget=10,
        last_step=steps,
        begin_tick=0,
        end_tick=None,
        observation="",
        admissible=[],
        updated_at=0.0,
        distance=None,
    )
    for step in range(1, steps + 1):
        records.add_step(
            session=session, episode_id=episode.id, step=step, action="look", observation="",
            admissible=[], tick=step, done=step == steps, success=False, outcome=None,
        )  # fmt: skip
    return episode.id


def _votes(session, episode: int, per_step: dict[int, int], agent: int = 1) -> int:
    rows = [
        {"episode_id": episode, "step": step, "vote": j, "agent_id": agent, "score": 1,
         "rationale": "r", "model_version": "h", "created_at": 0.0}
        for step, n in per_step.items()
        for j in range(n)
    ]  # fmt: skip
    return len(server_records.add_judgments(session=session, rows=rows))


def _short(session, m: int) -> list[int]:
    page = records.list_episodes(session=session, needs_votes=m, limit=100, cursor=None)
    return [e.id for e in page.items]


def test_an_episode_is_short_until_its_least_judged_step_has_m_votes(url: str) -> None:
    engine = make_engine(url)
    upgrade_to_head(engine)
    with session_factory(engine)() as session:
        ended = _episode(session, "ann", "failed", STEPS)
        _episode(session, "bob", "open", STEPS)  # open episodes are never polled for
        _episode(session, "cy", "abandoned", 0)  # nothing to judge
        assert _short(session, M) == [ended]
        _votes(session, ended, {1: M, 2: M, 3: 1})
        assert session.get(EpisodeRow, ended).min_votes == 1
        assert _short(session, M) == [ended] and _short(session, 1) == []
        assert _votes(session, ended, {3: M}) == M - 1  # vote 0 of step 3 was taken
        assert session.get(EpisodeRow, ended).min_votes == M
        assert _short(session, M) == [] and _short(session, M + 1) == [ended]
        session.commit()
    engine.dispose()


def test_migration_0008_counts_the_stored_judgments(url: str) -> None:
    engine = make_engine(url)
    upgrade_to_head(engine)
    with session_factory(engine)() as session:
        full, part, bare = (
            _episode(session, name, "failed", STEPS) for name in ("ann", "bob", "cy")
        )
        _votes(session, full, {1: M, 2: M, 3: M})
        _votes(session, part, {1: M, 2: 2, 3: M})
        session.commit()
    with engine.connect() as connection:  # back to 0007, where the column did not exist
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0007")
        connection.commit()
    upgrade_to_head(engine)
    with session_factory(engine)() as session:
        stored = dict(session.execute(select(EpisodeRow.id, EpisodeRow.min_votes)).all())
        assert stored == {full: M, part: 2, bare: 0}
        assert _short(session, M) == [part, bare]
    engine.dispose()
