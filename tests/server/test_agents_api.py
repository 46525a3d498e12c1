"""The routes agents and trainers live on: step records, judgment votes, the model registry,
expert hints, episode_ended events and the oracle distance."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import ADMIN_TOKEN, Api, AppServer, db_state

RECORD = {"policy_version": "7", "prompt": "P" * 3000, "completion": "look\n\\boxed{1}"}


def _begin(api: Api) -> dict:
    reply = api.post("/v1/episodes", json={})
    assert reply.status_code == 201, reply.text
    return reply.json()


def _step(api: Api, episode: int, index: int, action: str, **record: object) -> dict:
    reply = api.post(
        f"/v1/episodes/{episode}/steps", json={"step": index, "action": action, **record}
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_steps_keep_prompt_completion_and_version(server: AppServer) -> None:
    ann = Api(server).agent("ann")
    start = _begin(ann)
    _step(ann, start["episode_id"], 1, "look", **RECORD)
    _step(ann, start["episode_id"], 2, "look", parse_failed=True, completion="no box")
    _step(ann, start["episode_id"], 3, "look")  # a client that sends no record still steps
    steps = ann.get(f"/v1/episodes/{start['episode_id']}").json()["steps"]
    assert {k: steps[0][k] for k in RECORD} == RECORD and steps[0]["parse_failed"] is False
    assert steps[1]["parse_failed"] is True and steps[1]["completion"] == "no box"
    assert steps[2]["policy_version"] is None and steps[2]["prompt"] is None
    assert steps[0]["distance"] is None  # not recorded unless the server is asked to
    # the start's distance is: the draw has just planned it (the trainer groups by it)
    assert isinstance(ann.get(f"/v1/episodes/{start['episode_id']}").json()["distance"], int)


def test_oversized_prompt_is_refused_and_changes_nothing(server: AppServer) -> None:
    ann = Api(server).agent("ann")
    start = _begin(ann)
    before = db_state(server.database_url)
    reply = ann.post(
        f"/v1/episodes/{start['episode_id']}/steps",
        json={"step": 1, "action": "look", "prompt": "x" * (49 * 1024)},
    )
    assert reply.status_code == 422 and reply.json()["error"]["code"]
    assert db_state(server.database_url) == before


def test_judgment_votes_fill_each_slot_once(server: AppServer) -> None:
    ann = Api(server).agent("ann")
    judge = Api(server).agent("rex", "reward")
    start = _begin(ann)
    episode = start["episode_id"]
    _step(ann, episode, 1, "look")
    _step(ann, episode, 2, "inventory")
    assert ann.post(f"/v1/episodes/{episode}/abandon").status_code == 200
    lacking = judge.get("/v1/episodes", params={"needs_votes": 3}).json()["items"]
    assert [e["id"] for e in lacking] == [episode]
    votes = [
        {"step": s, "vote": j, "score": 1 if j else -1, "rationale": "r", "model_version": "h"}
        for s in (1, 2)
        for j in range(3)
    ]
    first = judge.post(f"/v1/episodes/{episode}/judgments", json=votes)
    assert first.status_code == 201 and first.json()["accepted"] == 6
    again = judge.post(f"/v1/episodes/{episode}/judgments", json=votes[:4])
    assert again.json() == {"accepted": 0, "duplicates": 4, "judgments": []}
    stored = judge.get(f"/v1/episodes/{episode}").json()["judgments"]
    assert sorted((j["step"], j["vote"], j["score"]) for j in stored) == sorted(
        (v["step"], v["vote"], v["score"]) for v in votes
    )
    assert judge.get("/v1/episodes", params={"needs_votes": 3}).json()["items"] == []
    assert len(judge.get("/v1/episodes", params={"needs_votes": 4}).json()["items"]) == 1
    bad = judge.post(f"/v1/episodes/{episode}/judgments", json=[{**votes[0], "vote": 64}])
    assert bad.status_code == 422


def test_a_reward_agent_fills_at_most_m_votes_of_an_ended_step(server: AppServer) -> None:
    """The server takes m = votes_per_step (3) votes per step: one agent's 64 votes for a step
    are refused whole, and an open episode is not judged; neither changes anything."""
    ann = Api(server).agent("ann")
    greedy, honest = (
        Api(server).agent("greedy", "reward"),
        Api(server).agent("rex", "reward"),
    )
    episode = _begin(ann)["episode_id"]
    _step(ann, episode, 1, "look")
    vote = {"step": 1, "score": 1, "rationale": "r", "model_version": "h"}
    before = db_state(server.database_url)
    early = honest.post(f"/v1/episodes/{episode}/judgments", json=[{**vote, "vote": 0}])
    assert early.status_code == 409 and early.json()["error"]["code"] == "episode_open"
    assert early.json()["error"]["details"] == {"episode_id": episode}
    assert db_state(server.database_url) == before
    assert ann.post(f"/v1/episodes/{episode}/abandon").status_code == 200
    before = db_state(server.database_url)

    flood = greedy.post(
        f"/v1/episodes/{episode}/judgments", json=[{**vote, "vote": j} for j in range(64)]
    )
    assert flood.status_code == 422, flood.text
    error = flood.json()["error"]
    assert error["code"] == "vote_out_of_range" and "expected votes 0..2" in error["message"]
    assert error["details"] == {"votes_per_step": 3, "votes": list(range(3, 64))}
    assert db_state(server.database_url) == before

    mine = greedy.post(
        f"/v1/episodes/{episode}/judgments", json=[{**vote, "vote": j} for j in range(3)]
    )
    assert mine.status_code == 201 and mine.json()["accepted"] == 3
    stored = honest.get(f"/v1/episodes/{episode}").json()["judgments"]
    assert sorted(j["vote"] for j in stored) == [0, 1, 2]


def test_open_episodes_never_need_votes(server: AppServer) -> None:
    ann = Api(server).agent("ann")
    start = _begin(ann)
    _step(ann, start["episode_id"], 1, "look")
    assert ann.get("/v1/episodes", params={"needs_votes": 1}).json()["items"] == []


def test_policy_registry_versions_count_per_kind(server: AppServer) -> None:
    trainer = Api(server).agent("tia", "trainer")
    ann = Api(server).agent("ann")
    assert ann.post("/v1/policies", json={"kind": "policy", "path": "/x"}).status_code == 403
    assert ann.get("/v1/policies/latest", params={"kind": "policy"}).status_code == 404
    one = trainer.post(
        "/v1/policies", json={"kind": "policy", "path": "/ckpt/1", "metrics": {"loss": 1.5}}
    )
    two = trainer.post(
        "/v1/policies",
        json={"kind": "policy", "path": "/ckpt/2", "parent": 1, "config": {"lr": 0.001}},
    )
    rm = trainer.post("/v1/policies", json={"kind": "reward", "path": "/rm/1"})
    assert [r.status_code for r in (one, two, rm)] == [201, 201, 201]
    assert (one.json()["version"], two.json()["version"], rm.json()["version"]) == (1, 2, 1)
    latest = ann.get("/v1/policies/latest", params={"kind": "policy"}).json()
    assert latest["version"] == 2 and latest["parent"] == 1 and latest["config"] == {"lr": 0.001}
    assert ann.get("/v1/policies/latest", params={"kind": "reward"}).json()["path"] == "/rm/1"
    first = ann.get("/v1/policies", params={"kind": "policy", "limit": 1}).json()
    rest = ann.get("/v1/policies", params={"kind": "policy", "cursor": first["next_cursor"]}).json()
    assert [p["version"] for p in first["items"] + rest["items"]] == [1, 2]
    admin = Api(server, ADMIN_TOKEN)
    assert admin.post("/v1/policies", json={"kind": "judge", "path": "/x"}).status_code == 422


def test_expert_hints_solve_an_episode_and_are_recorded(server: AppServer) -> None:
    ann = Api(server).agent("ann")
    trainer = Api(server).agent("tia", "trainer")
    start = _begin(ann)
    episode = start["episode_id"]
    assert ann.get(f"/v1/episodes/{episode}/expert").status_code == 403
    admissible, result = start["admissible_actions"], {"done": False}
    hints = 0
    for index in range(1, 60):
        hint = trainer.get(f"/v1/episodes/{episode}/expert").json()
        hints += 1
        assert hint["step"] == index and hint["action"] in admissible
        result = _step(ann, episode, index, hint["action"])
        admissible = result["admissible_actions"]
        if result["done"]:
            break
    assert result["success"] is True
    assert db_state(server.database_url)["expert_hints"] == hints
    assert trainer.get(f"/v1/episodes/{episode}/expert").status_code == 409
    ended = ann.get("/v1/events", params={"kind": "episode_ended"}).json()["items"]
    assert [e["payload"]["episode_id"] for e in ended] == [episode]
    assert ended[0]["payload"]["status"] == "succeeded" and ended[0]["payload"]["outcome"] == 1


def test_recorded_distance_falls_to_zero_along_the_oracle_plan(tmp_path: Path) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", BIGWORLD_RECORD_DISTANCE="true"
    ).start()
    try:
        ann = Api(proc).agent("ann")
        trainer = Api(proc).agent("tia", "trainer")
        episode = _begin(ann)["episode_id"]
        for index in range(1, 60):
            action = trainer.get(f"/v1/episodes/{episode}/expert").json()["action"]
            if _step(ann, episode, index, action)["done"]:
                break
        detail = ann.get(f"/v1/episodes/{episode}").json()
        distances = [detail["distance"], *(s["distance"] for s in detail["steps"])]
        assert distances[-1] == 0 and distances[0] == len(detail["steps"])
        assert all(a - b == 1 for a, b in zip(distances, distances[1:], strict=False)), distances
    finally:
        proc.stop()


@pytest.mark.parametrize("route", ["/v1/episodes", "/v1/events", "/v1/policies"])
def test_id_cursors_must_be_numbers(server: AppServer, route: str) -> None:
    reply = Api(server).agent("ann").get(route, params={"cursor": "abc"})
    assert reply.status_code == 422 and reply.json()["error"]["code"]
