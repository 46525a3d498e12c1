"""Many open episodes per agent and batched steps (``POST /v1/steps``): each step of a batch is
answered in its place, applied exactly once, and a batch refused whole changes nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from harness import Api, AppServer, ServerProcess, db_state

from world.schemas import MAX_BATCH_STEPS


def _begin(api: Api) -> int:
    reply = api.post("/v1/episodes", json={})
    assert reply.status_code == 201, reply.text
    return reply.json()["episode_id"]


def _answers(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    return reply.json()["items"]


def test_an_agent_holds_its_limit_of_episodes_each_with_an_avatar_of_its_own(
    server: AppServer, admin: Api
) -> None:
    fleet = admin.agent("fleet", max_open_episodes=3)
    opened = [_begin(fleet) for _ in range(3)]
    avatars = [fleet.get(f"/v1/episodes/{e}").json()["avatar_id"] for e in opened]
    assert avatars == ["fleet", "fleet.2", "fleet.3"]

    before = db_state(server.database_url)
    over = fleet.post("/v1/episodes", json={})
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "open_episode_limit"
    assert over.json()["error"]["details"] == {"limit": 3, "open": 3}
    assert db_state(server.database_url) == before  # refused: nothing changed

    assert fleet.post(f"/v1/episodes/{opened[1]}/abandon").status_code == 200
    again = _begin(fleet)  # the freed avatar plays the next one
    assert fleet.get(f"/v1/episodes/{again}").json()["avatar_id"] == "fleet.2"

    single = admin.agent("single")
    first = _begin(single)
    second = single.post("/v1/episodes", json={})  # one at a time, as before: 409 names it
    assert second.status_code == 409 and second.json()["error"]["details"] == {"episode_id": first}

    refused = Api(server, admin.http.headers["Authorization"].split()[1]).post(
        "/v1/agents", json={"name": "judge", "role": "reward", "max_open_episodes": 2}
    )
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_value"


def test_a_mixed_batch_answers_each_step_and_applies_exactly_the_valid_ones(
    server: AppServer, admin: Api
) -> None:
    fleet = admin.agent("fleet", max_open_episodes=2)
    other = admin.agent("other")
    a, b = _begin(fleet), _begin(fleet)
    theirs = _begin(other)
    assert _answers(fleet.post("/v1/steps", json=[{"episode_id": a, "step": 1, "action": "look"}]))

    batch = [
        {"episode_id": a, "step": 2, "action": "look"},  # valid
        {"episode_id": b, "step": 1, "action": "look", "policy_version": "v1"},  # valid
        {"episode_id": a, "step": 1, "action": "wait"},  # stale: step 1 was taken with look
        {"episode_id": theirs, "step": 1, "action": "look"},  # another agent's episode
        {"episode_id": b, "step": 1},  # malformed: no action
        {"episode_id": b, "step": 2, "action": "look"},  # valid, after b's first in this batch
        {"episode_id": 10**9, "step": 1, "action": "look"},  # no such episode
    ]
    answers = _answers(fleet.post("/v1/steps", json=batch))
    assert [x["status"] for x in answers] == [200, 200, 409, 403, 422, 200, 404]
    codes = [x["error"]["code"] if x["error"] else None for x in answers]
    assert codes == [
        None,
        None,
        "step_mismatch",
        "forbidden",
        "validation_error",
        None,
        "not_found",
    ]
    assert [x["result"]["step"] for x in answers if x["result"]] == [2, 1, 2]
    ticks = [x["result"]["tick"] for x in answers if x["result"]]
    assert ticks == sorted(ticks) and len(set(ticks)) == 3  # applied in the order sent

    steps_of = {e: fleet.get(f"/v1/episodes/{e}").json()["steps"] for e in (a, b, theirs)}
    assert [s["action"] for s in steps_of[a]] == ["look", "look"]
    assert [s["step"] for s in steps_of[b]] == [1, 2] and steps_of[b][0]["policy_version"] == "v1"
    assert steps_of[theirs] == []

    before = db_state(server.database_url)
    resent = _answers(fleet.post("/v1/steps", json=batch))  # the same answers, nothing applied
    assert resent == answers
    assert db_state(server.database_url) == before


def test_a_batch_over_the_maximum_is_refused_whole(server: AppServer, admin: Api) -> None:
    fleet = admin.agent("fleet", max_open_episodes=2)
    episode = _begin(fleet)
    before = db_state(server.database_url)
    steps = [{"episode_id": episode, "step": 1, "action": "look"}] * (MAX_BATCH_STEPS + 1)
    over = fleet.post("/v1/steps", json=steps)
    assert over.status_code == 422 and over.json()["error"]["code"] == "validation_error"
    assert fleet.post("/v1/steps", json=[]).status_code == 422
    assert fleet.post("/v1/steps", json={"steps": []}).status_code == 422
    assert db_state(server.database_url) == before


def test_a_batch_resent_after_kill_9_gives_the_same_answers_and_no_step_twice(
    database_url: str, tmp_path: Path
) -> None:
    """The server is killed while batches are in flight; each batch resent after the restart is
    answered from what was applied, and every step is stored once, in order."""
    server = ServerProcess(database_url, tmp_path / "data").start()
    try:
        fleet = Api(server).agent("fleet", max_open_episodes=16)
        episodes = [_begin(fleet) for _ in range(16)]
        token = str(fleet.http.headers["Authorization"]).split()[1]
        sent: list[list[dict[str, Any]]] = []
        stop = threading.Event()

        def send() -> None:  # batches of one step per episode, index after index
            with httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {token}"}
            ) as c:
                for index in range(1, 1000):
                    batch = [{"episode_id": e, "step": index, "action": "look"} for e in episodes]
                    sent.append(batch)
                    try:
                        c.post("/v1/steps", json=batch, timeout=30)
                    except httpx.HTTPError:
                        return  # the server died under this batch
                    if stop.is_set():
                        return

        sender = threading.Thread(target=send)
        sender.start()
        while len(sent) < 5:
            time.sleep(0.01)
        server.kill()
        stop.set()
        sender.join(timeout=60)
        server.start()
        fleet = Api(server, token)
        for batch in sent[-2:]:  # the batch cut off, and the one before it
            first = _answers(fleet.post("/v1/steps", json=batch))
            assert _answers(fleet.post("/v1/steps", json=batch)) == first
            assert all(answer["status"] == 200 for answer in first), first
        for episode in episodes:
            steps = fleet.get(f"/v1/episodes/{episode}").json()["steps"]
            assert [s["step"] for s in steps] == list(range(1, len(sent) + 1))
    finally:
        server.stop()


def test_a_batch_may_carry_more_than_one_step_body(server: AppServer, admin: Api) -> None:
    """A batch's body may be BATCH_BODIES times max_body_bytes, a step's stays at one."""
    fleet = admin.agent("fleet", max_open_episodes=3)
    opened = [_begin(fleet) for _ in range(3)]
    prompt = "p" * 40_000
    batch = [{"episode_id": e, "step": 1, "action": "look", "prompt": prompt} for e in opened]
    assert [a["status"] for a in _answers(fleet.post("/v1/steps", json=batch))] == [200] * 3
    body = {"step": 2, "action": "look", "prompt": prompt * 2}
    one = fleet.post(f"/v1/episodes/{opened[0]}/steps", json=body)
    assert one.status_code == 413
    huge = [{**step, "step": 2, "prompt": prompt} for step in batch] * 9  # over 16 x 64 KiB
    assert fleet.post("/v1/steps", json=huge).status_code == 413
