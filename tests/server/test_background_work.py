"""What the server does on its own: the heartbeat advances the tick with logged ``tick`` events
(so a replay stays exact), and idle episodes are ended as abandoned."""

from __future__ import annotations

import time
from pathlib import Path

from harness import Api, ServerProcess


def test_heartbeat_ticks_are_logged_and_replayable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    server = ServerProcess(url, tmp_path / "data", BIGWORLD_HEARTBEAT_S="0.05").start()
    try:
        ann = Api(server.url).agent("ann")
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
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", BIGWORLD_EPISODE_IDLE_TIMEOUT_S="1"
    ).start()
    try:
        ann = Api(server.url).agent("ann")
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
