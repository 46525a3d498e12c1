"""Policy and reward agents with tiny models running together against a live server: judged
episodes, stored prompts and versions, flagged parse failures, a server crash that loses and
duplicates nothing, and a new policy version that running agents switch to."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from live import live_server

from agents.backends import Sampling, TransformersModel
from agents.client import BigWorldClient, Id
from agents.errors import ConflictError, ValidationError
from agents.models.tiny import MANIFEST
from agents.policy_agent import (
    Decision,
    FleetRunner,
    ModelPolicy,
    PolicyRunner,
    RandomPolicy,
    RunnerConfig,
)
from agents.reward_agent import HeuristicJudge, ModelJudge, RewardConfig, RewardRunner
from world.schemas import EpisodeStarted, StepOut, TaskOut

torch = pytest.importorskip("torch")
VOTES = 3


def _publish(source: Path, out: Path, version: int) -> Path:
    """A 'trained' copy of a model: perturbed weights saved as a new version."""
    shutil.copytree(source, out)
    model = TransformersModel(out, device="cpu")
    with torch.no_grad():
        for p in model.model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.model.save_pretrained(out)
    manifest = json.loads((out / MANIFEST).read_text())
    (out / MANIFEST).write_text(json.dumps({**manifest, "version": version}))
    return out


def _until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.slow
def test_agents_play_judge_survive_a_crash_and_switch_versions(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    with live_server(tmp_path / "data", env={"BIGWORLD_STEP_BUDGET": "5"}) as server:
        admin = BigWorldClient(server.url, server.admin_token)
        creds = [admin.create_agent(f"ann{i}", "policy") for i in range(4)]
        judge_creds = admin.create_agent("rex", "reward")
        trainer = BigWorldClient(server.url, admin.create_agent("tia", "trainer").token)
        quick = Sampling(temperature=1.0, max_new_tokens=12, seed=1)
        runners = [
            PolicyRunner(
                BigWorldClient(server.url, c.token),
                ModelPolicy(
                    TransformersModel(tiny_models["policy"], device="cpu"),
                    "generate" if i == 3 else "rank",
                    quick,
                ),
                RunnerConfig(poll_s=0.5),
            )
            for i, c in enumerate(creds)
        ]
        judge = RewardRunner(
            BigWorldClient(server.url, judge_creds.token),
            ModelJudge(TransformersModel(tiny_models["reward"], device="cpu"), Sampling(1.0, 8, 0)),
            RewardConfig(votes=VOTES, poll_s=0.2),
        )
        threads = [threading.Thread(target=r.run, daemon=True) for r in [*runners, judge]]
        for t in threads:
            t.start()
        assert _until(lambda: sum(r.stats.steps for r in runners) >= 20, 60)
        server.kill()  # a crash mid-run, then the same server comes back
        time.sleep(1.0)
        server.start()
        steps_at_switch = sum(r.stats.steps for r in runners)
        new = _publish(tiny_models["policy"], tmp_path / "policy-v1", 1)
        assert trainer.register_policy(kind="policy", path=str(new), parent=None)["version"] == 1
        assert _until(lambda: all(r.stats.reloads >= 1 for r in runners), 30)
        assert _until(lambda: sum(r.stats.steps for r in runners) >= steps_at_switch + 20, 60)
        for r in runners:
            r.stop.set()
        for t in threads[:-1]:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads[:-1])
        # The reward agent catches up with every ended episode, then stops.
        assert _until(lambda: not list(admin.episodes(needs_votes=VOTES)), 120)
        judge.stop.set()
        threads[-1].join(timeout=30)

        episodes = [admin.episode(e["id"]) for e in admin.episodes()]
        assert episodes and all(
            e["status"] != "open" for e in episodes
        )  # stopped runners abandoned theirs
        acknowledged = sum(r.stats.steps for r in runners)
        stored = [s for e in episodes for s in e["steps"]]
        assert len(stored) == acknowledged  # nothing lost, nothing applied twice
        for e in episodes:
            assert [s["step"] for s in e["steps"]] == list(range(1, e["last_step"] + 1))
            votes = {(j["step"], j["vote"]) for j in e["judgments"]}
            assert votes == {(s["step"], j) for s in e["steps"] for j in range(VOTES)}
            # each stored judgment names the decoding that produced it
            assert {(j["mode"], j["temperature"]) for j in e["judgments"]} <= {("generate", 1.0)}
        assert all(s["prompt"] and s["completion"] and s["policy_version"] for s in stored)
        assert {s["policy_version"] for s in stored} == {"0", "1"}
        by_agent = {
            c.id: [s for e in episodes if e["agent_id"] == c.id for s in e["steps"]] for c in creds
        }
        flagged = 0
        for e in (e for e in episodes if e["agent_id"] == creds[3].id):
            offered = e["admissible_actions"]  # what the policy was offered before each step
            for s in e["steps"]:
                if s["parse_failed"]:  # an unusable answer falls back to action 1, flagged
                    flagged += 1
                    assert s["action"] == offered[0]
                offered = s["admissible_actions"]
        assert flagged, "the generate-mode tiny model should fail to box an answer"
        # generated answers and votes carry the ids they sampled; ranked ones need none
        generated = [s for e in episodes if e["agent_id"] == creds[3].id for s in e["steps"]]
        assert generated and all(s["completion_ids"] for s in generated)
        assert all(s["completion_ids"] is None for c in creds[:3] for s in by_agent[c.id])
        assert all(j["completion_ids"] for e in episodes for j in e["judgments"])
        assert not any(s["parse_failed"] for c in creds[:3] for s in by_agent[c.id])


def test_heuristic_judge_scores_by_recorded_oracle_distance_newest_episode_first(
    tmp_path: Path,
) -> None:
    env = {"BIGWORLD_STEP_BUDGET": "6", "BIGWORLD_RECORD_DISTANCE": "true"}
    with live_server(tmp_path / "data", env=env) as server:
        admin = BigWorldClient(server.url, server.admin_token)
        policy = PolicyRunner(
            BigWorldClient(server.url, admin.create_agent("ann", "policy").token),
            RandomPolicy(3),
            RunnerConfig(max_episodes=3),
        )
        policy.run()
        judge = RewardRunner(
            BigWorldClient(server.url, admin.create_agent("rex", "reward").token),
            HeuristicJudge(),
            RewardConfig(votes=2, batch_steps=4),
        )
        assert judge.run_once() == 3
        first_judgment = [admin.episode(e["id"])["judgments"][0]["id"] for e in admin.episodes()]
        assert first_judgment == sorted(first_judgment, reverse=True)  # the newest came first
        for summary in admin.episodes():
            e = admin.episode(summary["id"])
            assert all(j["mode"] is None and j["temperature"] is None for j in e["judgments"])
            before = e["distance"]
            for s in e["steps"]:
                scores = {j["score"] for j in e["judgments"] if j["step"] == s["step"]}
                want = (
                    1
                    if s["success"] or (s["distance"] is not None and s["distance"] < before)
                    else -1
                )
                assert scores == {want}
                before = s["distance"]


class _Stranded:
    """A client whose avatar has no task of the asked-for family near it."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def begin_episode(self, family: str | None = None, task: object = None) -> str:
        self.asked.append(family)
        if family is not None:
            raise ConflictError(
                "no task can be made near this avatar now", status=409, code="no_task"
            )
        return "an episode of any family"


def test_a_runner_stranded_without_its_family_plays_any_task_rather_than_stall() -> None:
    stranded = _Stranded()
    runner = PolicyRunner(stranded, RandomPolicy(0), RunnerConfig(family="examine_in_light"))  # type: ignore[arg-type]
    assert runner._begin() == ("an episode of any family", 0, [])
    assert stranded.asked == ["examine_in_light", None]
    assert runner._begin()[0] == "an episode of any family"  # it asks for its family again
    assert stranded.asked[2] == "examine_in_light"


class _Refused:
    """A client whose server refuses the runner's first step (a 422, as a step whose text the
    schema refuses gets) while the runner is being stopped; it records what is abandoned."""

    def __init__(self, runner_stop: list[threading.Event]) -> None:
        self.stop = runner_stop
        self.abandoned: list[Id] = []

    def begin_episode(self, family: str | None = None, task: object = None) -> EpisodeStarted:
        task = TaskOut(id="t", family="go_to", params={}, text="go to the kitchen 1")
        return EpisodeStarted(
            episode_id=7,
            task=task,
            observation="You are in the square 1.",
            admissible_actions=["look"],
            tick=0,
        )

    def step(self, *_args: object, **_kwargs: object) -> None:
        self.stop[0].set()
        raise ValidationError("the request does not match the schema", status=422)

    def abandon(self, episode_id: Id) -> None:
        self.abandoned.append(episode_id)


def test_a_runner_stopped_after_a_refused_step_abandons_its_episode() -> None:
    stops: list[threading.Event] = []
    client = _Refused(stops)
    runner = PolicyRunner(client, RandomPolicy(0), RunnerConfig())  # type: ignore[arg-type]
    stops.append(runner.stop)
    runner.run()
    assert client.abandoned == [7]
    assert runner.open_episode is None


class _Timed:
    """A client that answers at once and records when each step was asked for; every third
    step ends its episode."""

    def __init__(self) -> None:
        self.sent: list[float] = []

    def begin_episode(self, family: str | None = None, task: object = None) -> EpisodeStarted:
        task = TaskOut(id="t", family="go_to", params={}, text="go to the kitchen 1")
        return EpisodeStarted(
            episode_id=len(self.sent),
            task=task,
            observation="You are in the square 1.",
            admissible_actions=["look"],
            tick=0,
        )

    def step(self, _episode: Id, index: int, *_args: object, **_kwargs: object) -> StepOut:
        self.sent.append(time.monotonic())
        return StepOut(
            step=index,
            observation="You see nothing.",
            admissible_actions=["look"],
            done=index == 3,
            success=False,
            outcome=None,
            tick=1,
        )


def test_a_paced_runner_keeps_its_step_interval_across_episodes() -> None:
    paced, free = _Timed(), _Timed()
    PolicyRunner(paced, RandomPolicy(0), RunnerConfig(max_episodes=3, step_interval_s=0.05)).run()  # type: ignore[arg-type]
    PolicyRunner(free, RandomPolicy(0), RunnerConfig(max_episodes=3)).run()  # type: ignore[arg-type]
    assert len(paced.sent) == len(free.sent) == 9
    gaps = [b - a for a, b in zip(paced.sent, paced.sent[1:], strict=False)]
    assert min(gaps) >= 0.05
    assert free.sent[-1] - free.sent[0] < 0.05 * 8 / 2  # unpaced, it goes as fast as it can


def test_a_runner_stopped_while_pacing_abandons_its_episode_without_stepping() -> None:
    client = _Timed()
    runner = PolicyRunner(client, RandomPolicy(0), RunnerConfig(step_interval_s=30.0))  # type: ignore[arg-type]
    abandoned: list[Id] = []
    client.abandon = abandoned.append  # type: ignore[attr-defined]
    thread = threading.Thread(target=runner.run)
    thread.start()
    deadline = time.monotonic() + 10
    while not client.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    runner.stop.set()  # now waiting 30 s before its second step
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(client.sent) == 1 and abandoned == [0]


def test_runners_stop_when_their_token_is_revoked(tmp_path: Path) -> None:
    with live_server(tmp_path / "data", env={"BIGWORLD_STEP_BUDGET": "4"}) as server:
        admin = BigWorldClient(server.url, server.admin_token)
        ann, rex = admin.create_agent("ann", "policy"), admin.create_agent("rex", "reward")
        runners = [
            PolicyRunner(BigWorldClient(server.url, ann.token), RandomPolicy(1), RunnerConfig()),
            RewardRunner(
                BigWorldClient(server.url, rex.token), HeuristicJudge(), RewardConfig(poll_s=0.2)
            ),
        ]
        failures: list[BaseException] = []

        def run(runner: PolicyRunner | RewardRunner) -> None:
            try:
                runner.run()
            except BaseException as exc:  # noqa: BLE001 - the test reads what ended it
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in runners]
        for thread in threads:
            thread.start()
        assert _until(lambda: runners[0].stats.episodes >= 2, 60)
        for agent in (ann, rex):
            admin.revoke_agent(agent.id)
        for thread in threads:
            thread.join(timeout=30)  # within the server's auth cache bound, not forever
        assert not any(t.is_alive() for t in threads)
        assert sorted(type(f).__name__ for f in failures) == ["AuthenticationError"] * 2


def test_a_fleet_runner_plays_many_episodes_at_once_with_one_token(
    server, admin: BigWorldClient
) -> None:
    """One agent holding four open episodes plays ten, stepping them in batches; the two it
    had open when it started (a crashed runner's) are among them, and none is left open."""
    fleet = admin.create_agent(
        f"fleet-{time.monotonic_ns() % 10**6}", "policy", max_open_episodes=4
    )
    with BigWorldClient(server.url, fleet.token) as client:
        left = [client.begin_episode().episode_id for _ in range(2)]
        client.step(left[0], 1, "look")
        runner = FleetRunner(client, RandomPolicy(3), RunnerConfig(max_episodes=10))
        stats = runner.run()
        played = list(client.episodes(agent=fleet.id))
        steps = [s for e in played for s in client.episode(e["id"])["steps"]]
    assert stats.episodes == 10
    assert {e["status"] for e in played} <= {"succeeded", "failed"}  # none open, none abandoned
    assert set(left) <= {e["id"] for e in played}
    assert {e["avatar_id"] for e in played} == {
        fleet.name,
        *(f"{fleet.name}.{k}" for k in (2, 3, 4)),
    }
    assert len(steps) == stats.steps + 1  # and the step taken before the runner started
    assert sum(s["policy_version"] is None for s in steps) == 1


class OneEmptyAnswer(RandomPolicy):
    """Random, but its first decision sends an empty action, which the world refuses (422)
    and which leaves that episode open."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.refused: Id | None = None

    def decide(self, episode_id: Id, prompt: str, admissible: Sequence[str]) -> Decision:
        decision = super().decide(episode_id, prompt, admissible)
        if self.refused is None:
            self.refused = episode_id
            return Decision(decision.index, "", prompt, decision.completion)
        return decision


def test_a_fleet_runner_abandons_an_episode_whose_step_is_refused_and_plays_on(
    server, admin: BigWorldClient
) -> None:
    """The refused episode gives back its slot of the agent's open episodes (abandoned, not
    left open until the idle timeout)."""
    fleet = admin.create_agent(
        f"fleet-{time.monotonic_ns() % 10**6}", "policy", max_open_episodes=2
    )
    policy = OneEmptyAnswer(5)
    with BigWorldClient(server.url, fleet.token) as client:
        stats = FleetRunner(client, policy, RunnerConfig(max_episodes=4)).run()
        played = list(client.episodes(agent=fleet.id))
        refused = client.episode(policy.refused)
    assert refused["status"] == "abandoned" and not refused["steps"]
    assert stats.episodes == 4
    assert {e["status"] for e in played if e["id"] != policy.refused} <= {"succeeded", "failed"}
