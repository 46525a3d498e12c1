"""Learning metrics: the pure functions on hand-built histories with known answers, and
``GET /v1/metrics/learning`` on a live server over a history played through the API."""

from __future__ import annotations

import time

import pytest
from harness import ADMIN_TOKEN, Api

from forge.models import ForgeDecisionRow
from server.analysis import (
    Decision,
    EpisodeOutcome,
    EpisodeVotes,
    ForgedTask,
    Outcome,
    StepVotes,
)
from server.learning import (
    change_effects,
    choose_bucket,
    forgetting,
    forward_transfer,
    nice_bucket,
    outcome_accuracy,
    outcome_accuracy_over_time,
    season_changes,
    step_accuracy,
    success_over_time,
    totals,
)
from world.rules import RulesVersion, Versions
from world.store import make_engine, session_factory
from world.store.models import TaskRow
from world.values import WorldMeta


def run(task: str, results: str, *, start_id: int = 1, tick: int = 0, length: int = 5):
    """Episodes of one task from a string like "SSF" (S success, F failure), begun one after
    the other, each ``length`` ticks long, from ``tick`` on."""
    return [
        EpisodeOutcome(
            start_id + i, task, tick + i * length, tick + i * length + length - 1, r == "S"
        )
        for i, r in enumerate(results)
    ]


# -- success over time -----------------------------------------------------------------------
def test_success_over_time_buckets_overall_per_family_and_per_version():
    outcomes = [
        Outcome(3, "craft", "1", True),
        Outcome(7, "craft", "1", False),
        Outcome(9, "heat", "2", True),
        Outcome(12, "heat", "2", True),
        Outcome(15, "craft", None, False, episodes=2),  # grouped, and of no known version
    ]
    rows = success_over_time(outcomes, bucket_ticks=10)
    as_tuples = [
        (r.tick_start, r.tick_end, r.family, r.policy_version, r.episodes, r.successes)
        for r in rows
    ]
    assert as_tuples == [
        (0, 10, None, None, 3, 2),
        (10, 20, None, None, 3, 1),
        (0, 10, "craft", None, 2, 1),
        (10, 20, "craft", None, 2, 0),
        (0, 10, "heat", None, 1, 1),
        (10, 20, "heat", None, 1, 1),
        (0, 10, None, "1", 2, 1),
        (0, 10, None, "2", 1, 1),
        (10, 20, None, "2", 1, 1),
    ]
    assert rows[0].success_rate == pytest.approx(2 / 3)
    assert rows[3].success_rate == 0.0


def test_success_over_time_of_nothing_is_empty_and_totals_skip_unknown_versions():
    assert success_over_time([], bucket_ticks=5) == []
    outcomes = [Outcome(1, "craft", None, True), Outcome(2, "craft", "7", False)]
    families = totals(outcomes, "family")
    versions = totals(outcomes, "policy_version")
    assert (families["craft"].episodes, families["craft"].success_rate) == (2, 0.5)
    assert list(versions) == ["7"] and versions["7"].success_rate == 0.0
    assert totals([], "family") == {}


def test_bucket_size_is_round_or_as_asked_within_limits():
    assert nice_bucket(1) == 1
    assert nice_bucket(40) == 1
    assert nice_bucket(41) == 2
    assert nice_bucket(1000) == 50  # 25 wanted: the next of 10, 20, 50
    assert choose_bucket(0, 999, None) == nice_bucket(1000)
    assert choose_bucket(0, 999, 7) == 7
    with pytest.raises(ValueError, match="at most 5000 buckets"):
        choose_bucket(0, 10**6, 1)


# -- forgetting ------------------------------------------------------------------------------
def test_forgetting_is_best_earlier_window_minus_the_newest():
    # windows of 2 counted back from the newest: [S F] now, [F F], [S S] before: 1.0 - 0.5
    episodes = run("a", "SSFFSF")
    result = forgetting(["a"], episodes, window=2)
    (row,) = result.tasks
    assert (row.best_earlier, row.current, row.forgetting) == (1.0, 0.5, 0.5)
    assert result.mean == 0.5 and result.probe_tasks == 1


def test_forgetting_ignores_incomplete_earlier_windows_and_order_of_input():
    # 5 episodes, window 2: newest [S S], earlier complete [F F]; the oldest S stands alone
    episodes = list(reversed(run("a", "SFFSS")))
    (row,) = forgetting(["a"], episodes, window=2).tasks
    assert (row.best_earlier, row.current, row.forgetting) == (0.0, 1.0, -1.0)


def test_forgetting_without_enough_history_is_none_and_mean_skips_it():
    episodes = run("a", "SF") + run("b", "SSFF", start_id=10) + run("other", "SSSS", start_id=20)
    result = forgetting(["a", "b", "c"], episodes, window=2)
    by_task = {r.task_id: r for r in result.tasks}
    assert by_task["a"].current == 0.5 and by_task["a"].forgetting is None
    assert by_task["b"].forgetting == 1.0
    assert by_task["c"].current is None and by_task["c"].episodes == 0
    assert result.mean == 1.0 and result.probe_tasks == 3
    assert forgetting([], episodes, window=2).mean is None


# -- forward transfer ------------------------------------------------------------------------
def test_forward_transfer_compares_first_episodes_with_the_parent_then():
    parent = run("p", "SSFFSS", tick=0)  # ends at ticks 4, 9, ..., 29
    child = run("c", "SFFS", start_id=100, tick=20)
    # created at tick 19: the parent's last 2 by then are F F (ending at 14 and 19): 0.0;
    # the child's first 2: S F: 0.5
    tasks = [ForgedTask("c", "harder", "p", 19)]
    result = forward_transfer(tasks, parent + child, window=2)
    (row,) = result.tasks
    assert (row.success, row.parent_success, row.transfer) == (0.5, 0.0, 0.5)
    assert (row.episodes, row.parent_episodes) == (2, 2)
    assert result.mean == 0.5 and result.forged_tasks == 1


def test_forward_transfer_without_episodes_on_either_side_is_none():
    parent = run("p", "SS", tick=50)  # all after the child was made
    tasks = [
        ForgedTask("c", "easier", "p", 10),
        ForgedTask("d", "harder", None, 10),
        ForgedTask("e", "harder", "p", 100),
    ]
    child = run("c", "S", start_id=50, tick=11) + run("e", "F", start_id=60, tick=101)
    rows = {r.task_id: r for r in forward_transfer(tasks, parent + child, window=3).tasks}
    assert rows["c"].success == 1.0 and rows["c"].parent_success is None
    assert rows["c"].transfer is None
    assert rows["d"].episodes == 0 and rows["d"].transfer is None
    assert rows["e"].parent_success == 1.0 and rows["e"].transfer == -1.0
    assert forward_transfer([], parent, window=3).mean is None


# -- world changes ---------------------------------------------------------------------------
def test_change_effects_adaptation_and_recovery():
    before = run("a", "SSFS", tick=0)  # ticks 0-19
    after = run("a", "FFSSS", start_id=10, tick=20)
    change = Decision(id=7, cycle=1, tick=20, kind="world.storm", task_id=None, verdict="applied")
    (effect,) = change_effects([change], before + after, window=2)
    # level: last 2 before = F S = 0.5; rolling after F: [S F] 0.5, F: [F F] 0.0 (drop at 2),
    # S: [F S] 0.5 (back at 3)
    assert effect.success_before == 0.5
    assert (effect.adaptation_episodes, effect.recovery_episodes) == (2, 3)
    assert effect.decision_id == 7 and effect.episodes_after == 5


def test_change_effects_never_dropping_never_recovering_and_without_history():
    steady = run("a", "SS", tick=0) + run("a", "SSS", start_id=10, tick=20)
    change = Decision(1, 1, 20, "world.drift", None, "applied")
    (effect,) = change_effects([change], steady, window=2)
    assert (effect.adaptation_episodes, effect.recovery_episodes) == (None, 0)

    broken = run("a", "SS", tick=0) + run("a", "FFF", start_id=10, tick=20)
    (effect,) = change_effects([change], broken, window=2)
    assert (effect.adaptation_episodes, effect.recovery_episodes) == (1, None)

    (effect,) = change_effects([change], run("a", "FS", start_id=10, tick=20), window=2)
    assert effect.success_before is None and effect.adaptation_episodes is None
    assert effect.recovery_episodes is None
    assert change_effects([], steady, window=2) == []


def test_change_effects_leave_out_episodes_running_across_the_change():
    # begun at 18, ended at 25: neither before nor after a change at tick 20
    straddling = EpisodeOutcome(5, "a", 18, 25, False)
    episodes = [*run("a", "S", tick=0), straddling, *run("a", "S", start_id=10, tick=30)]
    (effect,) = change_effects([Decision(1, 1, 20, "world.flood", None, "applied")], episodes, 1)
    assert effect.success_before == 1.0 and effect.adaptation_episodes is None
    assert effect.episodes_after == 1


# -- the reward model ------------------------------------------------------------------------
def test_step_accuracy_agrees_with_plan_distance():
    votes = [
        StepVotes(score=1, before=5, after=4),  # closer, +1: right
        StepVotes(score=-1, before=5, after=4),  # closer, -1: wrong
        StepVotes(score=-1, before=4, after=4, votes=2),  # no progress, -1: right (twice)
        StepVotes(score=1, before=3, after=6),  # farther, +1: wrong
        StepVotes(score=0, before=3, after=2),  # unparseable: wrong
    ]
    assert step_accuracy(votes) == (6, pytest.approx(3 / 6))
    assert step_accuracy([]) == (0, None)


def test_outcome_accuracy_needs_the_sign_of_the_mean_vote():
    votes = [
        EpisodeVotes(end_tick=3, vote_sum=2, outcome=1),  # right
        EpisodeVotes(end_tick=4, vote_sum=-1, outcome=-1, episodes=2),  # right, twice
        EpisodeVotes(end_tick=12, vote_sum=0, outcome=1),  # no sign: wrong
        EpisodeVotes(end_tick=13, vote_sum=3, outcome=-1),  # wrong
    ]
    assert outcome_accuracy(votes) == (5, pytest.approx(3 / 5))
    over_time = outcome_accuracy_over_time(votes, bucket_ticks=10)
    assert [(b.tick_start, b.tick_end, b.episodes, b.outcome_accuracy) for b in over_time] == [
        (0, 10, 3, 1.0),
        (10, 20, 2, 0.0),
    ]
    assert outcome_accuracy([]) == (0, None)


# -- seasons ---------------------------------------------------------------------------------
def test_season_changes_follow_the_dynamics_versions():
    meta = WorldMeta(seed=0, versions=Versions([RulesVersion(season_length=10)]))
    assert season_changes(meta, 35) == [(10, "summer"), (20, "autumn"), (30, "winter")]
    assert season_changes(meta, 9) == []
    drifted = WorldMeta(
        seed=0,
        versions=Versions(
            [
                RulesVersion(season_length=10),
                RulesVersion(version=2, since_tick=15, season_length=30),
            ]
        ),
    )
    # from tick 15 a season lasts 30 ticks: tick 15 is still spring (15 // 30 = 0)
    assert season_changes(drifted, 65) == [
        (10, "summer"),
        (15, "spring"),
        (30, "summer"),
        (60, "autumn"),
    ]


# -- the route on a live server --------------------------------------------------------------
@pytest.fixture
def live(database_url, tmp_path):
    from harness import AppServer

    # Distances on every step (for the reward model's step accuracy); no forge cycles, so the
    # only world change is the one this test records.
    proc = AppServer(
        database_url,
        tmp_path / "data",
        BIGWORLD_RECORD_DISTANCE="true",
        BIGWORLD_FORGE_ENABLED="false",
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def play(policy: Api, admin: Api, body: dict, *, succeed: bool, version: str) -> dict:
    """One episode: the oracle's actions to success, or one step and abandon."""
    begun = policy.post("/v1/episodes", json=body)
    assert begun.status_code == 201, begun.text
    episode = begun.json()["episode_id"]
    if succeed:
        for index in range(1, 60):
            hint = admin.get(f"/v1/episodes/{episode}/expert").json()
            # a repeated task may hold already (the world keeps what the last episode did)
            action = hint["action"] or "look"
            assert hint["action"] or hint["plan_length"] == 0, hint
            step = {"step": index, "action": action, "policy_version": version}
            out = policy.post(f"/v1/episodes/{episode}/steps", json=step).json()
            if out["done"]:
                assert out["success"], out
                break
    else:
        # undo a placement the last episode left (the goal would hold at once), else look
        params, admissible = begun.json()["task"]["params"], begun.json()["admissible_actions"]
        undo = [
            a
            for a in admissible
            if a.startswith(f"take {params.get('object')} ")
            and a.endswith(f" from {params.get('receptacle_label')}")
        ]
        step = {"step": 1, "action": (undo or ["look"])[0], "policy_version": version}
        out = policy.post(f"/v1/episodes/{episode}/steps", json=step).json()
        assert not out["done"], out
        assert policy.post(f"/v1/episodes/{episode}/abandon").status_code == 200
    return admin.get(f"/v1/episodes/{episode}").json()


def judge(reward: Api, episode: dict, *, extra_wrong_vote: bool = False) -> None:
    """One vote per step agreeing with the outcome; optionally a second, wrong, on step 1."""
    score = 1 if episode["status"] == "succeeded" else -1
    votes = [{"step": s["step"], "score": score, "model_version": "r1"} for s in episode["steps"]]
    if extra_wrong_vote:
        votes.append({"step": 1, "vote": 1, "score": -score, "model_version": "r1"})
    reply = reward.post(f"/v1/episodes/{episode['id']}/judgments", json=votes)
    assert reply.status_code == 201, reply.text


def store(database_url: str, change) -> None:
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            change(session)
            session.commit()
    finally:
        engine.dispose()


def expected_reward_figures(episodes: list[dict]) -> tuple[int, int, float, float]:
    """(judged steps, votes, step accuracy, outcome accuracy) straight from episode details."""
    steps = votes = right = agreeing = 0
    for e in episodes:
        distance = {0: e["distance"], **{s["step"]: s["distance"] for s in e["steps"]}}
        judged = {j["step"] for j in e["judgments"]}
        steps += len(judged)
        for j in e["judgments"]:
            votes += 1
            closer = distance[j["step"]] < distance[j["step"] - 1]
            right += j["score"] == (1 if closer else -1)
        total = sum(j["score"] for j in e["judgments"])
        agreeing += (total > 0) == (e["status"] == "succeeded") and total != 0
    return steps, votes, right / votes, agreeing / len(episodes)


def test_learning_route_on_a_played_history(live, database_url):
    admin = Api(live, ADMIN_TOKEN)
    policy, reward = admin.agent("learner"), admin.agent("critic", "reward")
    episodes = []

    def episode(body, succeed, version):
        episodes.append(play(policy, admin, body, succeed=succeed, version=version))
        return episodes[-1]

    first = episode({"family": "pick_and_place"}, True, "v1")
    parent = {"task_id": first["task"]["id"]}
    episode(parent, True, "v1")
    episode(parent, False, "v1")
    change_tick = admin.get("/v1/world").json()["tick"]
    for succeed in (False, True, False):
        episode(parent, succeed, "v2")
    forged_tick = admin.get("/v1/world").json()["tick"]
    child = episode({"family": "examine_in_light"}, True, "v2")
    episode({"task_id": child["task"]["id"]}, True, "v2")
    for i, e in enumerate(episodes):
        judge(reward, e, extra_wrong_vote=i == 0)
    episodes = [admin.get(f"/v1/episodes/{e['id']}").json() for e in episodes]

    def record(session):
        session.get(TaskRow, first["task"]["id"]).probe = True
        forged = session.get(TaskRow, child["task"]["id"])
        forged.origin, forged.parent_id, forged.created_tick = (
            "harder",
            first["task"]["id"],
            forged_tick,
        )
        session.add(
            ForgeDecisionRow(
                cycle=1,
                tick=change_tick,
                kind="world.storm",
                verdict="applied",
                evidence={},
                created_at=time.time(),
            )
        )

    store(database_url, record)
    reply = admin.get("/v1/metrics/learning", params={"window": 2, "bucket_ticks": 10**6})
    assert reply.status_code == 200, reply.text
    got = reply.json()

    assert got["tick"] == admin.get("/v1/world").json()["tick"]
    assert (got["episodes"], got["average_success"], got["bucket_ticks"]) == (8, 5 / 8, 10**6)
    assert [
        (r["family"], r["policy_version"], r["episodes"], r["successes"])
        for r in got["success_over_time"]
    ] == [
        (None, None, 8, 5),
        ("examine_in_light", None, 2, 2),
        ("pick_and_place", None, 6, 3),
        (None, "v1", 3, 2),
        (None, "v2", 5, 3),
    ]
    assert got["families"]["pick_and_place"] == {"episodes": 6, "successes": 3, "success_rate": 0.5}
    assert got["versions"]["v1"]["success_rate"] == pytest.approx(2 / 3)

    # probe task: S S F F S F, windows of 2 from the newest: now 0.5, best before 1.0
    (probe,) = [t for t in got["forgetting"]["tasks"] if t["task_id"] == first["task"]["id"]]
    assert (probe["best_earlier"], probe["current"], probe["forgetting"]) == (1.0, 0.5, 0.5)
    assert got["forgetting"]["mean"] == 0.5
    # forged child: S S on its first two; its parent's last two by then: S F
    (forged,) = got["forward_transfer"]["tasks"]
    assert (forged["success"], forged["parent_success"], forged["transfer"]) == (1.0, 0.5, 0.5)
    # the change: S F before; then F (rolling F F: drop at 1), S (F S: back at 2)
    (change,) = got["world_changes"]
    assert change["tick"] == change_tick and change["kind"] == "world.storm"
    assert (change["success_before"], change["adaptation_episodes"]) == (0.5, 1)
    assert change["recovery_episodes"] == 2

    steps, votes, step_acc, outcome_acc = expected_reward_figures(episodes)
    model = got["reward_model"]
    assert (model["judged_steps"], model["votes"]) == (steps, votes)
    assert model["step_accuracy"] == pytest.approx(step_acc)
    assert model["outcome_accuracy"] == pytest.approx(outcome_acc)
    assert 0 < step_acc < 1  # the oracle's steps shorten the plan; one vote is wrong

    # scoped: one family; a tick range
    scoped = admin.get(
        "/v1/metrics/learning", params={"family": "examine_in_light", "window": 2}
    ).json()
    assert (scoped["episodes"], scoped["average_success"]) == (2, 1.0)
    assert scoped["world_changes"][0]["success_before"] is None
    assert all(t["task_id"] != first["task"]["id"] for t in scoped["forgetting"]["tasks"])
    early = admin.get("/v1/metrics/learning", params={"to_tick": change_tick}).json()
    assert (early["episodes"], early["versions"]["v1"]["episodes"]) == (3, 3)
    assert (
        sum(
            r["episodes"]
            for r in early["success_over_time"]
            if r["family"] is None and r["policy_version"] is None
        )
        == 3
    )


def test_learning_route_refuses_bad_input_and_serves_an_empty_world(live):
    admin = Api(live, ADMIN_TOKEN)
    empty = admin.get("/v1/metrics/learning").json()
    assert (empty["episodes"], empty["average_success"], empty["success_over_time"]) == (
        0,
        None,
        [],
    )
    assert empty["forgetting"]["mean"] is None and empty["world_changes"] == []
    assert empty["reward_model"]["step_accuracy"] is None
    for params in (
        {"from_tick": 5, "to_tick": 4},
        {"bucket_ticks": 0},
        {"window": 0},
        {"window": 101},
    ):
        reply = admin.get("/v1/metrics/learning", params=params)
        assert reply.status_code == 422 and "error" in reply.json(), params
    assert Api(live).get("/v1/metrics/learning").status_code == 401
