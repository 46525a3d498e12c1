"""The forge over HTTP against a real server: pool draws that repeat, probes every k-th draw,
roles and config validation, a cycle after scripted episodes (trials and retirement
included), pause, the language-model rewriter, a disabled forge and a restart."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ADMIN_TOKEN, Api, AppServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "forge"))  # tests/ is no package
from fake_openai import FakeOpenAI  # noqa: E402

QUIET = {"BIGWORLD_FORGE_INTERVAL_S": "3600"}  # cycles only when a test asks for one
NO_WORLD_EVENTS = {
    "dynamics": {
        "storm_probability": 0.0,
        "flood_probability": 0.0,
        "discovery_probability": 0.0,
        "market_probability": 0.0,
    }
}


@pytest.fixture
def quiet(database_url: str, tmp_path: Path) -> Iterator[AppServer]:
    proc = AppServer(database_url, tmp_path / "data", **QUIET).start()
    try:
        yield proc
    finally:
        proc.stop()


def _configure(admin: Api, **fields: object) -> dict:
    reply = admin.patch("/v1/forge/config", json=fields)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _begin(api: Api, **body: object) -> dict:
    reply = api.post("/v1/episodes", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()


def _fail(api: Api, episode: int) -> None:
    """One harmless step, then give up (outcome −1)."""
    assert api.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"}).is_success
    assert api.post(f"/v1/episodes/{episode}/abandon").status_code == 200


def _solve(api: Api, expert: Api, episode: int) -> bool:
    """Follow the oracle's hints (the expert route) until the episode ends."""
    for index in range(1, 60):
        hint = expert.get(f"/v1/episodes/{episode}/expert").json()
        action = hint["action"] or "look"
        answer = api.post(f"/v1/episodes/{episode}/steps", json={"step": index, "action": action})
        assert answer.status_code == 200, answer.text
        if answer.json()["done"]:
            return bool(answer.json()["success"])
    return False


def _draws(admin: Api) -> list[str]:
    events = admin.get("/v1/events", params={"kind": "episode_begun", "limit": 1000}).json()
    return [e["payload"]["draw"] for e in events["items"]]


def test_begins_draw_pool_tasks_that_repeat_and_probes_every_kth(quiet: AppServer) -> None:
    admin = Api(quiet, ADMIN_TOKEN)
    _configure(admin, probe_every=3, fresh_probability=0.0, probes_per_family=1)
    ann = admin.agent("ann")
    drawn = []
    for _ in range(12):
        start = _begin(ann)
        drawn.append(start["task"]["id"])
        _fail(ann, start["episode_id"])
    probes = {t["id"] for t in admin.get("/v1/tasks").json()["items"] if t["probe"]}
    assert probes and all(drawn[k - 1] in probes for k in (3, 6, 9, 12))
    assert len(set(drawn)) < len(drawn)  # tasks repeat
    draws = _draws(admin)
    assert [draws[k - 1] for k in (3, 6, 9, 12)] == ["probe"] * 4
    assert "probe" not in [d for k, d in enumerate(draws, 1) if k % 3]
    assert "pool" in draws  # re-drawn from the pool, not only sampled
    chosen = admin.get("/v1/forge/decisions", params={"kind": "task.probe"}).json()["items"]
    assert {d["task_id"] for d in chosen} == probes and all(
        d["verdict"] == "chosen" for d in chosen
    )
    assert admin.get("/v1/forge").json()["draws"] == 12
    # family filters the pool; a requested spec joins the pool as requested
    fam = admin.get(f"/v1/tasks/{drawn[0]}").json()["family"]
    assert _begin(ann, family=fam)["task"]["family"] == fam


def test_routes_roles_and_config_validation(quiet: AppServer) -> None:
    admin = Api(quiet, ADMIN_TOKEN)
    ann, watcher = admin.agent("ann"), admin.agent("watcher", "observer")
    for method, path, body in (
        ("POST", "/v1/forge/cycle", None),
        ("POST", "/v1/forge/pause", None),
        ("POST", "/v1/forge/resume", None),
        ("PATCH", "/v1/forge/config", {"alpha_low": 0.1}),
    ):
        for who in (ann, watcher):
            reply = who.request(method, path, json=body)
            assert reply.status_code == 403 and reply.json()["error"]["code"] == "forbidden"
    assert Api(quiet).get("/v1/forge/decisions").status_code == 401
    before = watcher.get("/v1/forge").json()
    assert before["paused"] is False and before["config"]["alpha_high"] == 0.8
    for bad in (
        {"alpha_low": 0.95},
        {"trial_size": "8"},
        {"unknown": 1},
        {"dynamics": {"storm_probability": 3}},
    ):
        reply = admin.patch("/v1/forge/config", json=bad)
        assert reply.status_code == 422 and reply.json()["error"]["code"] == "invalid_config"
    assert admin.patch("/v1/forge/config", json=[1]).status_code == 422
    assert watcher.get("/v1/forge").json() == before  # nothing changed
    new = _configure(admin, alpha_low=0.1, dynamics={"flood_ticks": 50})
    assert new["alpha_low"] == 0.1 and new["dynamics"]["flood_ticks"] == 50
    assert new["alpha_high"] == 0.8
    assert watcher.get("/v1/forge").json()["config"] == new
    assert watcher.get("/v1/forge/decisions", params={"cursor": "x"}).status_code == 422
    bad_spec = ann.post("/v1/episodes", json={"task": {"family": "nope", "params": {}}})
    assert bad_spec.status_code == 422 and bad_spec.json()["error"]["code"] == "invalid_task"
    assert watcher.get("/v1/tasks", params={"status": "sleeping"}).status_code == 422
    # A spec names a task to do: an existing one is reused, a new one must pass the oracle.
    drawn = _begin(ann)
    _fail(ann, drawn["episode_id"])
    spec = {"family": drawn["task"]["family"], "params": drawn["task"]["params"]}
    again = _begin(ann, task=spec)
    assert again["task"]["id"] == drawn["task"]["id"]
    _fail(ann, again["episode_id"])
    nowhere = {**spec, "params": {**spec["params"], "place": "no place"}}
    refused = ann.post("/v1/episodes", json={"task": nowhere})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "unsolvable_task"
    pool = [t["id"] for t in watcher.get("/v1/tasks").json()["items"]]
    assert pool == [drawn["task"]["id"]]  # the refused spec added nothing


def test_a_cycle_after_scripted_episodes_adapts_the_pool(quiet: AppServer) -> None:
    admin = Api(quiet, ADMIN_TOKEN)
    # One rollout measures a task; trials take one rollout; an easier variant that is always
    # solved is accepted (alpha_high 1.0); no probes, no fresh samples, no world events.
    _configure(
        admin,
        window=4,
        min_rollouts=1,
        trial_size=1,
        alpha_high=1.0,
        probe_every=0,
        probes_per_family=0,
        fresh_probability=0.0,
        **NO_WORLD_EVENTS,
    )
    ann = admin.agent("ann")
    solved = _begin(ann, family="pick_and_place")
    assert _solve(ann, admin, solved["episode_id"])
    hopeless = _begin(ann, family="examine_in_light")
    _fail(ann, hopeless["episode_id"])
    mastered_id, hopeless_id = solved["task"]["id"], hopeless["task"]["id"]

    cycle = admin.post("/v1/forge/cycle")
    assert cycle.status_code == 200, cycle.text
    made = {(d["kind"], d["task_id"]): d for d in cycle.json()["decisions"]}
    harder, easier = made[("task.harder", mastered_id)], made[("task.easier", hopeless_id)]
    assert harder["evidence"]["accuracy"] == 1.0 and easier["evidence"]["accuracy"] == 0.0
    served = admin.get("/v1/forge/decisions", params={"task_id": hopeless_id}).json()["items"]
    assert easier in served
    assert admin.get(f"/v1/tasks/{hopeless_id}").json()["accuracy"] == 0.0
    assert easier["verdict"] == "proposed", easier["evidence"]
    candidate = admin.get(f"/v1/tasks/{easier['candidate_id']}").json()
    assert (candidate["status"], candidate["origin"]) == ("pending", "easier")
    assert candidate["parent_id"] == hopeless_id and candidate["difficulty"] > 0
    assert candidate["decisions"][0]["id"] == easier["id"]
    pending = admin.get("/v1/tasks", params={"status": "pending"}).json()["items"]
    assert easier["candidate_id"] in {t["id"] for t in pending}

    # Pending variants get their trials first; the oracle solves the easier one.
    trial = _begin(ann, family="examine_in_light")
    assert trial["task"]["id"] == easier["candidate_id"] and _draws(admin)[-1] == "trial"
    assert _solve(ann, admin, trial["episode_id"])
    verdicts = admin.post("/v1/forge/cycle").json()["decisions"]
    accepted = [d for d in verdicts if d["kind"] == "task.trial"]
    assert [(d["verdict"], d["candidate_id"]) for d in accepted] == [
        ("accepted", easier["candidate_id"])
    ]
    assert accepted[0]["evidence"]["old_accuracy"] == 0.0
    assert accepted[0]["evidence"]["new_accuracy"] == 1.0
    retired = [d for d in verdicts if d["kind"] == "task.retire"]
    assert [d["task_id"] for d in retired] == [hopeless_id]
    assert admin.get(f"/v1/tasks/{hopeless_id}").json()["status"] == "retired"
    assert admin.get(f"/v1/tasks/{easier['candidate_id']}").json()["status"] == "active"
    assert admin.get(f"/v1/tasks/{hopeless_id}").json()["reason"].startswith("hopeless")


def test_paused_forge_makes_no_decisions_and_state_survives_a_restart(tmp_path: Path) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'world.db'}", tmp_path / "data", BIGWORLD_FORGE_INTERVAL_S="0.3"
    ).start()
    admin = Api(proc, ADMIN_TOKEN)
    try:
        assert admin.post("/v1/forge/pause").json()["paused"] is True
        admin.agent("ann")  # her avatar materialises the origin's region, where storms hit
        stormy = {"storm_probability": 1.0, "event_radius": 0, "drift_every": 0}
        _configure(admin, dynamics=stormy)
        before = admin.get("/v1/forge").json()
        time.sleep(1.5)
        assert admin.get("/v1/forge").json()["cycle"] == before["cycle"]
        reply = admin.post("/v1/forge/cycle")
        assert reply.status_code == 409 and reply.json()["error"]["code"] == "forge_paused"
        assert admin.get("/v1/forge/decisions").json()["items"] == []
        assert admin.post("/v1/forge/resume").json()["paused"] is False
        deadline = time.monotonic() + 30
        while admin.get("/v1/forge").json()["cycle"] < before["cycle"] + 2:
            assert time.monotonic() < deadline, "no background cycle ran"
            time.sleep(0.1)
        admin.post("/v1/forge/pause")
        state = admin.get("/v1/forge").json()
        decisions = admin.get("/v1/forge/decisions").json()["items"]
        assert any(d["kind"] == "world.storm" for d in decisions)
        proc.stop()
        proc.start()
        assert admin.get("/v1/forge").json() == state  # paused, cycle, config
        assert admin.get("/v1/forge/decisions").json()["items"] == decisions
    finally:
        proc.stop()


def test_language_model_rewriter_over_http(quiet: AppServer) -> None:
    admin = Api(quiet, ADMIN_TOKEN)
    _configure(admin, probes_per_family=0)
    ann = admin.agent("ann")
    start = _begin(ann, family="pick_and_place")
    assert _solve(ann, admin, start["episode_id"])
    spec = {"family": "clean_and_place", "params": start["task"]["params"]}

    def reply(body: dict) -> str:
        return "Here you go: " + json.dumps(spec)

    with FakeOpenAI(reply) as fake:
        _configure(
            admin,
            min_rollouts=1,
            rewriter="language_model",
            lm_url=fake.url,
            lm_model="tiny",
            **NO_WORLD_EVENTS,
        )
        decisions = admin.post("/v1/forge/cycle").json()["decisions"]
    (harder,) = [d for d in decisions if d["kind"] == "task.harder"]
    assert fake.requests and fake.requests[0][1]["model"] == "tiny"
    lm = harder["evidence"]["language_model"]
    assert lm["spec"] == spec
    if harder["evidence"]["rewriter"] == "language_model":  # the oracle could solve it
        assert harder["verdict"] == "proposed" and lm["plan_length"] > 0
    else:  # it could not: the programmatic rewriter stepped in, and the evidence says why
        assert lm["error"]


def test_disabled_forge_runs_no_cycles_but_the_pool_still_repeats(tmp_path: Path) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'world.db'}",
        tmp_path / "data",
        BIGWORLD_FORGE_ENABLED="false",
        BIGWORLD_FORGE_INTERVAL_S="0.2",
    ).start()
    try:
        admin = Api(proc, ADMIN_TOKEN)
        assert admin.get("/v1/forge").json()["enabled"] is False
        reply = admin.post("/v1/forge/cycle")
        assert reply.status_code == 409 and reply.json()["error"]["code"] == "forge_disabled"
        _configure(admin, fresh_probability=0.0, probe_every=0, probes_per_family=0)
        ann = admin.agent("ann")
        drawn = []
        for _ in range(6):
            start = _begin(ann)
            drawn.append(start["task"]["id"])
            _fail(ann, start["episode_id"])
        time.sleep(0.5)
        assert admin.get("/v1/forge").json()["cycle"] == 0
        assert admin.get("/v1/forge/decisions").json()["items"] == []
        assert len(set(drawn)) < len(drawn)
    finally:
        proc.stop()


def _step(api: Api, episode: int, index: int, action: str) -> dict:
    answer = api.post(f"/v1/episodes/{episode}/steps", json={"step": index, "action": action})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_draw_follows_the_curriculum_down_to_go_to_near_the_avatar(
    quiet: AppServer,
) -> None:
    admin = Api(quiet, ADMIN_TOKEN)
    _configure(
        admin,
        window=4,
        min_rollouts=1,
        trial_size=1,
        cooldown_cycles=0,
        probe_every=0,
        probes_per_family=0,
        fresh_probability=0.0,
        **NO_WORLD_EVENTS,
    )
    ann = admin.agent("ann")
    hopeless = _begin(ann, family="examine_in_light")
    _fail(ann, hopeless["episode_id"])
    # The hopeless task's own easier variants fail their trials until the curriculum steps
    # down to go_to (family requests draw from the pool as before: trials first).
    rung = None
    for _ in range(6):
        made = admin.post("/v1/forge/cycle").json()["decisions"]
        down = [d for d in made if d["verdict"] == "proposed" and "curriculum" in d["evidence"]]
        if down:
            rung = admin.get(f"/v1/tasks/{down[0]['candidate_id']}").json()
            break
        trial = _begin(ann, family="examine_in_light")
        _fail(ann, trial["episode_id"])
    assert rung is not None and rung["family"] == "go_to" and rung["status"] == "pending"
    assert rung["params"]["hops"] == 1 and rung["params"]["from_family"] == "examine_in_light"
    _configure(admin, trial_size=4)  # its trial stays open through the draws below

    # A begin without a family gets the rung's trial while it is usable from here ...
    first = _begin(ann)
    assert first["task"]["id"] == rung["id"] and _draws(admin)[-1] == "trial"
    assert _solve(ann, admin, first["episode_id"])  # ann now stands at its target
    # ... and where no pool go_to is usable, a fresh go_to near her at the rung's hops, not
    # the hopeless task of another family that the pool could still hand out.
    seen = []
    for _ in range(3):
        start = _begin(ann)
        task = start["task"]
        assert task["family"] == "go_to" and task["params"]["hops"] == 1, task
        assert task["params"]["from_family"] == "examine_in_light"
        seen.append(_draws(admin)[-1])
        row = admin.get(f"/v1/tasks/{task['id']}").json()
        assert row["status"] in ("active", "pending")  # every fresh go_to joins the pool
        assert _solve(ann, admin, start["episode_id"])
    assert seen[0] == "fresh" and set(seen) <= {"fresh", "pool", "trial"}, seen


@pytest.mark.parametrize("family", ["go_to", "follow", "trail", "waymark"])
def test_go_to_requests_sample_fresh_hops_up_to_the_setting(tmp_path: Path, family: str) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'world.db'}", tmp_path / "data", **QUIET, BIGWORLD_GO_TO_HOPS="2"
    ).start()
    try:
        admin = Api(proc, ADMIN_TOKEN)
        _configure(admin, fresh_probability=1.0, probe_every=0, **NO_WORLD_EVENTS)
        ann = admin.agent("ann")
        hops = []
        for _ in range(8):
            start = _begin(ann, family=family)
            assert _draws(admin)[-1] == "fresh"
            assert start["task"]["family"] == family
            if family == "waymark":  # the signposted move is listed first
                move = start["observation"].rpartition(", go to ")[2].partition(".")[0]
                assert start["admissible_actions"][0] == f"go to {move}", start
            hops.append(start["task"]["params"]["hops"])
            _fail(ann, start["episode_id"])
        assert set(hops) == {1, 2}, hops  # at most 2 hops, both drawn
    finally:
        proc.stop()
