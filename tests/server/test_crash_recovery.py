"""kill -9 of the server under load: every acknowledged step survives exactly once, the tick
and the event log agree with the step rows, invariants hold, and the clients carry on. The
load is concurrent enough that steps share commits (group commit) when the server dies."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from harness import Api, ServerProcess
from workload import Ack, Walker, check_history

CLIENTS = 8


def _wait_for(acks: list[Ack], count: int, walkers: list[Walker], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while len(acks) < count:
        problems = [p for w in walkers for p in w.problems]
        assert not problems, problems
        assert time.monotonic() < deadline, f"only {len(acks)} of {count} steps acknowledged"
        time.sleep(0.02)


def _shared_commits(url: str) -> tuple[int, int]:
    """(commits, world transactions they held) so far, from the server's /metrics."""
    values = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        name, _, value = line.partition(" ")
        values[name] = value
    return int(values["bigworld_world_commits_total"]), int(
        values["bigworld_world_transactions_total"]
    )


@pytest.mark.slow
def test_kill_9_mid_load_loses_and_duplicates_nothing(database_url: str, tmp_path: Path) -> None:
    server = ServerProcess(database_url, tmp_path / "data").start()
    try:
        admin = Api(server)
        tokens = [admin.agent(f"walker{i}") for i in range(CLIENTS)]
        acks: list[Ack] = []
        stop, phase = threading.Event(), [0]
        walkers = [
            Walker(server, str(api.http.headers["Authorization"]).split()[1], i, acks, stop, phase)
            for i, api in enumerate(tokens)
        ]
        for walker in walkers:
            walker.start()
        _wait_for(acks, 80, walkers)
        commits, transactions = _shared_commits(server.url)
        assert commits < transactions, "the load never shared a commit"
        server.kill()
        phase[0] = 1
        time.sleep(0.3)
        server.start()
        _wait_for(acks, len(acks) + 80, walkers)
        stop.set()
        for walker in walkers:
            walker.join(timeout=60)
        assert not [p for w in walkers for p in w.problems]
        after = {a.episode for a in acks if a.phase == 1}
        assert len(after) >= CLIENTS // 2, "clients did not carry on after the restart"
        check_history(database_url, acks)
    finally:
        server.stop()
