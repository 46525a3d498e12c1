"""A fork survives its server: after kill -9, and after a clean restart, of a real ``bigworld
serve`` over the same database, the fork is still listed and reads as it was acknowledged (tick
and state hash, its episodes), its parent too, and play in it carries on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import ADMIN_TOKEN, Api, ServerProcess
from test_worlds_api import InWorld
from workload import Player

FORK = "exp-1"


def _token(api: Api) -> str:
    return str(api.http.headers["Authorization"]).split()[1]


def _seen(admin: Api) -> dict[str, Any]:
    """What a restart must keep: the fork's registry entry, the fork's and main's world with
    their hashes, and the fork's episodes."""
    listed = admin.get("/v1/worlds").json()["items"]
    fork = admin.get(f"/v1/worlds/{FORK}/world", params={"hash": "true"})
    assert fork.status_code == 200, fork.text
    episodes = admin.get(f"/v1/worlds/{FORK}/episodes", params={"limit": 100}).json()["items"]
    return {
        "listed": {w["name"]: (w["parent"], w["at_tick"], w["tick"]) for w in listed},
        "fork": fork.json(),
        "main": admin.get("/v1/world", params={"hash": "true"}).json(),
        "episodes": episodes,
    }


def test_a_fork_survives_kill_9_and_a_clean_restart(database_url: str, tmp_path: Path) -> None:
    server = ServerProcess(database_url, tmp_path / "data").start()
    try:
        admin = Api(server, ADMIN_TOKEN)
        ann, bob = admin.agent("ann"), admin.agent("bob")
        Player(ann, 1).play(6)
        tick = admin.get("/v1/world").json()["tick"]
        made = admin.post("/v1/worlds", json={"from": "main", "at_tick": tick, "name": FORK})
        assert made.status_code == 201, made.text
        Player(bob, 2).play(5)  # main moves on: the fork reads it as it was at the tick
        there = Player(InWorld(ann, FORK), 3)
        seen = Player(InWorld(bob, FORK), 4).play(8) + there.play(8)
        before = _seen(admin)
        # Every step was acknowledged with the world after it; the last answer is the fork now.
        assert before["fork"]["tick"] == tick + 16 == seen[-1]["tick"]
        assert before["fork"]["state_hash"] == seen[-1]["state_hash"]
        assert before["fork"]["state_hash"] != made.json()["state_hash"]
        assert before["listed"][FORK] == ("main", tick, tick + 16)
        assert {e["agent_id"] for e in before["episodes"]} == {ann.id, bob.id}

        server.kill()  # SIGKILL: no shutdown, no checkpoint
        server.start()
        admin = Api(server, ADMIN_TOKEN)
        assert _seen(admin) == before
        # Play in the fork carries on where it was acknowledged: ann's next step index.
        there.api = InWorld(Api(server, _token(ann)), FORK)
        again = there.play(3)
        assert again[-1]["tick"] == tick + 19
        before = _seen(admin)

        server.restart()  # SIGTERM, then the same database again
        assert _seen(Api(server, ADMIN_TOKEN)) == before
    finally:
        server.stop()
