"""``bigworld demo`` twice on one data folder: the second run continues the first's world.

Each run starts the server, two policy agents, the reward agent and the trainer as processes,
runs for a bounded time, stops them cleanly and writes the report. Between the runs the test
reads the world's database directly (the demo has stopped the server) for what must carry over.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from agents.demo import BIGWORLD
from server.models import AgentRow, PolicyRow
from world.store import read_world
from world.store.database import make_engine, session_factory
from world.store.models import EpisodeRow, StepRow

pytestmark = pytest.mark.slow


def demo(data_dir: Path, minutes: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BIGWORLD, "demo", "--minutes", str(minutes), "--data-dir",
         str(data_dir), "--policies", "2", "--port", "0", "--no-view"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def figures(data_dir: Path) -> dict[str, int]:
    engine = make_engine(f"sqlite:///{data_dir / 'world.db'}")
    try:
        with session_factory(engine)() as session:
            return {
                "tick": read_world(session).meta.tick,
                "agents": session.scalar(select(func.count()).select_from(AgentRow)) or 0,
                "episodes": session.scalar(select(func.count()).select_from(EpisodeRow)) or 0,
                "max_episode": session.scalar(select(func.max(EpisodeRow.id))) or 0,
                "steps": session.scalar(select(func.count()).select_from(StepRow)) or 0,
                "versions": session.scalar(select(func.count()).select_from(PolicyRow)) or 0,
                "open": session.scalar(
                    select(func.count()).select_from(EpisodeRow).where(EpisodeRow.status == "open")
                )
                or 0,
            }
    finally:
        engine.dispose()


def test_second_run_continues_the_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = demo(data, 1.0)
    assert first.returncode == 0, first.stdout + first.stderr
    after_first = figures(data)
    assert after_first["tick"] > 0 and after_first["steps"] > 0
    assert after_first["agents"] == 5 + 1  # 2 policy, reward, trainer, observer + admin
    assert after_first["versions"] >= 2  # the starting policy and reward model registered
    assert after_first["open"] == 0  # agents ended or abandoned their episodes at the stop
    # The view names the rung being played (family, hops for go_to, and how it was drawn).
    rungs = [line for line in first.stdout.splitlines() if "rung: " in line]
    assert rungs and any("rung: (no episode begun yet)" not in line for line in rungs), first.stdout
    report = data / "report"
    summary = (report / "report.md").read_text()
    assert str(after_first["tick"]) in summary
    assert list(report.glob("*.png"))

    second = demo(data, 0.75)
    assert second.returncode == 0, second.stdout + second.stderr
    after_second = figures(data)
    assert after_second["agents"] == after_first["agents"]  # same agents, same avatars
    assert after_second["tick"] > after_first["tick"]
    assert after_second["episodes"] > after_first["episodes"]
    assert after_second["steps"] > after_first["steps"]
    assert after_second["versions"] >= after_first["versions"]
    with make_engine(f"sqlite:///{data / 'world.db'}").connect() as conn:
        later = conn.execute(
            select(func.min(EpisodeRow.begin_tick)).where(
                EpisodeRow.id > after_first["max_episode"]
            )
        ).scalar_one()
    assert later >= after_first["tick"]  # the second run's episodes began where the first ended
    assert str(after_second["tick"]) in (report / "report.md").read_text()
