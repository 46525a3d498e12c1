"""Two server processes over one database: both start at once on an empty one (the start-up
lock lets one migrate while the other waits), and over one PostgreSQL world avatars race for
the same things: the world lock serialises them, so nothing is taken twice and the log replays
exactly."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from harness import Api, ServerProcess
from sqlalchemy import select
from workload import Ack, Walker, check_history

from world.store import make_engine, session_factory
from world.store.models import EventRow


def _holders_change_only_by_giving(database_url: str) -> int:
    """Follow every thing's holder through the state events; returns how many takes were seen."""
    engine = make_engine(database_url)
    holder: dict[int, str | None] = {}
    takes = 0
    try:
        with session_factory(engine)() as session:
            by_txn: dict[int, list[EventRow]] = {}
            for event in session.scalars(select(EventRow).order_by(EventRow.id)):
                by_txn.setdefault(event.txn, []).append(event)
    finally:
        engine.dispose()
    for events in by_txn.values():
        verbs = {
            e.payload["text"].split()[0]
            for e in events
            if e.kind == "action" and e.payload.get("accepted")
        }
        for event in events:
            if event.kind != "state":
                continue
            for image in event.payload["things"]:
                before, after = holder.get(image["id"]), image["holder"]
                if before is not None and after is not None and before != after:
                    assert "give" in verbs, (
                        f"thing {image['id']} went from {before} to {after} without a give"
                    )
                if before is None and after is not None and image["id"] in holder:
                    takes += 1
                holder[image["id"]] = after
    return takes


@pytest.mark.slow
def test_two_processes_start_at_once_on_an_empty_database(
    database_url: str, tmp_path: Path
) -> None:
    """On an empty SQLite folder one of two servers started at once died in the migrations
    with "database is locked"; the start-up lock makes the second wait, and both serve."""
    data = tmp_path / "data"  # one data folder, as two `bigworld serve` in one folder share it
    servers = [ServerProcess(database_url, data) for _ in range(2)]
    failures: list[BaseException] = []

    def start(server: ServerProcess) -> None:
        try:
            server.start()
        except BaseException as exc:
            failures.append(exc)

    starters = [threading.Thread(target=start, args=(s,)) for s in servers]
    try:
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        assert not failures, failures[0]
        ann = Api(servers[0]).agent("ann")
        assert ann.post("/v1/episodes", json={}).status_code == 201
        ann_elsewhere = Api(servers[1], str(ann.http.headers["Authorization"]).split()[1])
        seen = ann_elsewhere.get("/v1/episodes", params={"status": "open"}).json()["items"]
        assert [e["agent_id"] for e in seen] == [ann.id]  # type: ignore[attr-defined]
    finally:
        for s in servers:
            s.stop()


@pytest.mark.slow
@pytest.mark.postgres
def test_two_processes_one_world_nothing_taken_twice(tmp_path: Path) -> None:
    with fresh_database("postgres", tmp_path) as url:
        servers = [ServerProcess(url, tmp_path / f"data{i}") for i in range(2)]
        starters = [threading.Thread(target=s.start) for s in servers]  # both migrate at once
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        try:
            acks: list[Ack] = []
            stop = threading.Event()
            walkers = []
            for i in range(6):
                api = Api(servers[i % 2]).agent(f"racer{i}")
                token = str(api.http.headers["Authorization"]).split()[1]
                walkers.append(Walker(servers[i % 2], token, 7 + i, acks, stop, [0], greedy=0.8))
            for w in walkers:
                w.start()
            deadline = time.monotonic() + 180
            while len(acks) < 150 and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            for w in walkers:
                w.join(timeout=60)
            assert not [p for w in walkers for p in w.problems] and len(acks) >= 150
            check_history(url, acks)
            assert _holders_change_only_by_giving(url) > 0, (
                "no thing was ever taken: the race did not happen"
            )
        finally:
            for s in servers:
                s.stop()
