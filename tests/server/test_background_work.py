"""What the server does on its own: the heartbeat advances the tick with logged ``tick`` events
(so a replay stays exact), and idle episodes are ended as abandoned."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from harness import Api, AppServer


def test_heartbeat_ticks_are_logged_and_replayable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    server = AppServer(url, tmp_path / "data", BIGWORLD_HEARTBEAT_S="0.05").start()
    try:
        ann = Api(server).agent("ann")
        time.sleep(0.6)
        episode = ann.post("/v1/episodes", json={}).json()["episode_id"]
        step = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "wait"}).json()
        ticks = ann.get("/v1/events", params={"kind": "tick", "limit": 1000}).json()["items"]
        before = sorted(t["tick"] for t in ticks if t["tick"] < step["tick"])
        assert len(before) >= 3 and before == list(
            range(1, step["tick"])
        )  # every other tick a heartbeat
    finally:
        server.stop()
    _check_replay(url)


def _check_replay(url: str) -> None:
    from sqlalchemy import select

    from world.replay import replay
    from world.state import MemoryBackend, World
    from world.store import SqlBackend, make_engine, read_world, session_factory
    from world.store.models import EventRow

    engine = make_engine(url)
    with session_factory(engine)() as session:
        live = World(SqlBackend(session)).state_hash()
        events = [
            dict(r)
            for r in session.execute(select(EventRow.__table__).order_by(EventRow.id)).mappings()
        ]
        seed = read_world(session).meta.seed
    engine.dispose()
    rebuilt = MemoryBackend(seed)
    replay(events, rebuilt)
    assert World(rebuilt).state_hash() == live


def test_idle_episodes_are_abandoned(tmp_path: Path) -> None:
    server = AppServer(
        f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", BIGWORLD_EPISODE_IDLE_TIMEOUT_S="1"
    ).start()
    try:
        ann = Api(server).agent("ann")
        episode = ann.post("/v1/episodes", json={}).json()["episode_id"]
        deadline = time.monotonic() + 10
        while ann.get(f"/v1/episodes/{episode}").json()["status"] == "open":
            assert time.monotonic() < deadline, "the idle episode was never ended"
            time.sleep(0.1)
        ended = ann.get(f"/v1/episodes/{episode}").json()
        assert ended["status"] == "abandoned" and ended["outcome"] == -1
        late = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"})
        assert late.status_code == 409
        assert ann.post("/v1/episodes", json={}).status_code == 201
    finally:
        server.stop()


def test_each_job_keeps_one_thread_of_its_own_however_its_rounds_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds of different jobs overlap (each sleeps longer than the others' intervals); every
    round of a job runs in the same thread, and the process gains no thread after the first
    rounds, however long it runs (a shared pool grew by one each time more rounds overlapped)."""
    from server import background

    seen: dict[str, set[str]] = {"reaper": set(), "heartbeat": set(), "forge": set()}

    def work(job: str) -> Callable[..., None]:
        def run(*args: object, **kwargs: object) -> None:
            seen[job].add(threading.current_thread().name)
            time.sleep(0.03)

        return run

    monkeypatch.setattr(background.episodes, "reap_idle", work("reaper"))
    monkeypatch.setattr(background.episodes, "heartbeat", work("heartbeat"))
    monkeypatch.setattr(background.forge, "run_cycle", work("forge"))
    settings = SimpleNamespace(
        episode_idle_timeout_s=1.0, heartbeat_s=0.01, forge_enabled=True, forge_interval_s=0.01
    )

    async def main() -> tuple[int, int]:
        async with background.background_work(cast(Any, SimpleNamespace(settings=settings))):
            await asyncio.sleep(0.6)  # every job has run at least once
            first = threading.active_count()
            await asyncio.sleep(1.5)
            return first, threading.active_count()

    before = threading.active_count()
    first, last = asyncio.run(main())
    assert {job: len(names) for job, names in seen.items()} == {
        "reaper": 1,
        "heartbeat": 1,
        "forge": 1,
    }
    assert len(set().union(*seen.values())) == 3
    assert first == last == before + 3
    assert threading.active_count() == before  # shut down with the app
