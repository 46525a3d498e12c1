"""Replaying the event log from genesis onto an empty in-memory world gives the live state hash
of the database the server wrote (several avatars, episodes begun, steps, abandons)."""

from __future__ import annotations

import threading
import time

from harness import Api, AppServer
from workload import Ack, Walker, check_history


def test_replay_of_server_history_gives_live_hash(server: AppServer, admin: Api) -> None:
    apis = [admin.agent(name) for name in ("ann", "bob", "cy")]
    acks: list[Ack] = []
    stop = threading.Event()
    walkers = [
        Walker(server, str(api.http.headers["Authorization"]).split()[1], 100 + i, acks, stop, [0])
        for i, api in enumerate(apis)
    ]
    for walker in walkers:
        walker.start()
    deadline = time.monotonic() + 120
    while len(acks) < 45 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for walker in walkers:
        walker.join(timeout=60)
    assert not [p for w in walkers for p in w.problems] and len(acks) >= 45
    open_ = (
        apis[0].get("/v1/episodes", params={"agent": apis[0].id, "status": "open"}).json()["items"]
    )
    for episode in open_:
        assert apis[0].post(f"/v1/episodes/{episode['id']}/abandon").status_code == 200
    live = check_history(server.database_url, acks)
    assert len(live) == 64
