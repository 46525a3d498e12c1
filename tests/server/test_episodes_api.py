"""Episodes over HTTP against a real server: begin, step, replay, end, judge, list, read."""

from __future__ import annotations

import time

from harness import Api, AppServer, db_state


def _begin(api: Api) -> dict:
    reply = api.post("/v1/episodes", json={})
    assert reply.status_code == 201, reply.text
    return reply.json()


def test_begin_step_replay_and_abandon(server: AppServer, admin: Api) -> None:
    ann = admin.agent("ann")
    start = _begin(ann)
    assert "\n\nYour task is to: " + start["task"]["text"] in start["observation"]
    assert start["admissible_actions"] and start["tick"] == 0
    episode = start["episode_id"]

    # recorded for the trainer, not answered
    decoded = {"mode": "generate", "temperature": 0.5, "completion_ids": [3, 4, 2]}
    first = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look", **decoded})
    assert first.status_code == 200, first.text
    assert first.json()["step"] == 1 and first.json()["tick"] == 1 and first.json()["done"] is False

    before = db_state(server.database_url)
    again = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"})
    assert (
        again.status_code == 200 and again.json() == first.json()
    )  # recorded answer, recorded tick
    assert db_state(server.database_url) == before  # nothing applied twice

    other = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "wait"})
    assert other.status_code == 409 and other.json()["error"]["code"] == "step_mismatch"
    skipped = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 3, "action": "look"})
    assert skipped.status_code == 409 and skipped.json()["error"]["details"] == {"expected": 2}

    second = ann.post("/v1/episodes", json={})
    assert second.status_code == 409 and second.json()["error"]["details"] == {
        "episode_id": episode
    }

    ended = ann.post(f"/v1/episodes/{episode}/abandon")
    assert (
        ended.status_code == 200
        and ended.json()["status"] == "abandoned"
        and ended.json()["outcome"] == -1
    )
    late = ann.post(f"/v1/episodes/{episode}/steps", json={"step": 2, "action": "look"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "episode_ended"
    assert ann.post(f"/v1/episodes/{episode}/abandon").status_code == 409

    detail = ann.get(f"/v1/episodes/{episode}").json()
    assert [s["step"] for s in detail["steps"]] == [1] and detail["steps"][0]["action"] == "look"
    assert {k: detail["steps"][0][k] for k in decoded} == decoded
    assert detail["observation"] == start["observation"]

    # Nothing reset: the next episode starts where the avatar stands, at the same tick.
    nxt = _begin(ann)
    assert nxt["episode_id"] != episode and nxt["tick"] == 1

    # Token ids out of range, or more than an answer of the limit's length, are refused.
    steps = f"/v1/episodes/{nxt['episode_id']}/steps"
    for ids in ([-1], [2**31], list(range(1025)), ["a"]):
        bad = ann.post(steps, json={"step": 1, "action": "look", "completion_ids": ids})
        assert bad.status_code == 422, (ids, bad.text)
    assert ann.get(f"/v1/episodes/{nxt['episode_id']}").json()["steps"] == []  # nothing ran


def test_step_budget_ends_with_outcome_minus_one(tmp_path, database_url: str) -> None:
    proc = AppServer(database_url, tmp_path / "data", BIGWORLD_STEP_BUDGET="3").start()
    try:
        bob = Api(proc).agent("bob")
        episode = _begin(bob)["episode_id"]
        answers = [
            bob.post(f"/v1/episodes/{episode}/steps", json={"step": i, "action": "wait"}).json()
            for i in (1, 2, 3)
        ]
        assert [a["done"] for a in answers] == [False, False, True]
        assert answers[-1]["outcome"] == -1 and answers[-1]["success"] is False
        assert bob.get(f"/v1/episodes/{episode}").json()["status"] == "failed"
    finally:
        proc.stop()


def test_other_agents_episode_is_forbidden_and_roles_enforced(
    server: AppServer, admin: Api
) -> None:
    ann, cy = admin.agent("ann"), admin.agent("cy")
    judge, watcher = admin.agent("judge", "reward"), admin.agent("watch", "observer")
    episode = _begin(ann)["episode_id"]
    assert (
        cy.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"}).status_code
        == 403
    )
    assert watcher.post("/v1/episodes", json={}).status_code == 403
    assert watcher.post("/v1/agents", json={"name": "x", "role": "policy"}).status_code == 403
    assert (
        ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"}).status_code
        == 200
    )

    verdict = [
        {
            "step": 1,
            "score": 1,
            "rationale": "looked",
            "model_version": "r0",
            "mode": "generate",
            "temperature": 1.0,
            "completion_ids": [11, 12],
        }
    ]
    assert ann.post(f"/v1/episodes/{episode}/judgments", json=verdict).status_code == 403
    assert judge.post(f"/v1/episodes/{episode}/judgments", json=verdict).status_code == 409
    assert ann.post(f"/v1/episodes/{episode}/abandon").status_code == 200  # ended: judged
    made = judge.post(f"/v1/episodes/{episode}/judgments", json=verdict)
    assert made.status_code == 201 and made.json()["accepted"] == 1
    assert (
        judge.post(
            f"/v1/episodes/{episode}/judgments", json=[{**verdict[0], "step": 9}]
        ).status_code
        == 422
    )
    detail = watcher.get(f"/v1/episodes/{episode}").json()
    assert [(j["step"], j["score"]) for j in detail["judgments"]] == [(1, 1)]
    assert detail["judgments"][0]["completion_ids"] == [11, 12]


def test_lists_page_with_cursors_and_filters(server: AppServer, admin: Api) -> None:
    ann = admin.agent("ann")
    episode = _begin(ann)["episode_id"]
    for i in range(1, 4):
        assert (
            ann.post(
                f"/v1/episodes/{episode}/steps", json={"step": i, "action": "wait"}
            ).status_code
            == 200
        )
    seen, cursor = [], None
    while True:
        page = ann.get(
            "/v1/events", params={"limit": 2, **({"cursor": cursor} if cursor else {})}
        ).json()
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen)) and len(seen) > 4
    actions = ann.get("/v1/events", params={"kind": "action", "actor": "ann"}).json()["items"]
    assert [e["tick"] for e in actions] == [1, 2, 3]
    assert ann.get("/v1/events", params={"region": "0,0", "limit": 1}).json()["items"]
    mine = ann.get("/v1/episodes", params={"agent": ann.id, "status": "open"}).json()
    assert [e["id"] for e in mine["items"]] == [episode] and mine["next_cursor"] is None
    task = mine["items"][0]["task"]["id"]
    stats = ann.get(f"/v1/tasks/{task}").json()["stats"]
    assert stats["episodes"] == 1 and stats["open"] == 1 and stats["success_rate"] is None
    assert [t["id"] for t in ann.get("/v1/tasks").json()["items"]] == [task]


def test_time_travel_reads_past_states(server: AppServer, admin: Api) -> None:
    ann = admin.agent("ann")
    assert ann.get("/v1/things/1", params={"at_tick": 0}).json()["id"] == 1
    assert ann.get("/v1/places/0,0:0", params={"at_tick": 0}).json()["id"] == "0,0:0"
    assert ann.get("/v1/things/99999999").status_code == 404
    now = ann.get("/v1/things/1").json()
    assert now["label"] == f"{now['type']} {now['num']}"
    world = ann.get("/v1/world").json()
    assert world["avatars"] == 1 and world["tick"] == 0 and world["things"] > 0


def _request_seconds(server: AppServer, route: str) -> tuple[float, int]:
    """``bigworld_request_seconds`` (sum, count) of ``POST route`` from /metrics."""
    found = {"sum": 0.0, "count": 0}
    labels = f'{{method="POST",route="{route}"}}'
    for line in Api(server).get("/metrics").text.splitlines():
        for part in found:
            if line.startswith(f"bigworld_request_seconds_{part}{labels} "):
                found[part] = float(line.split()[-1])
    return found["sum"], int(found["count"])


def test_metrics_time_requests_by_route(server: AppServer, admin: Api) -> None:
    """Each answered request adds its duration under its route template, not its path."""
    route = "/v1/episodes/{episode_id}/steps"
    ivy = admin.agent("ivy")
    episode = _begin(ivy)["episode_id"]
    seconds, count = _request_seconds(server, route)
    started = time.perf_counter()
    for index in (1, 2, 3):
        reply = ivy.post(f"/v1/episodes/{episode}/steps", json={"step": index, "action": "look"})
        assert reply.status_code == 200, reply.text
    refused = ivy.post(f"/v1/episodes/{episode}/steps", json={"step": 9, "action": "look"})
    assert refused.status_code == 409  # timed too: every answer counts
    elapsed = time.perf_counter() - started
    after_seconds, after_count = _request_seconds(server, route)
    assert after_count == count + 4
    assert 0 < after_seconds - seconds <= elapsed
