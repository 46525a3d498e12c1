"""Policy agents, a reward agent and the continual trainer running together against a live
server (issue 5): versions advance, the agents switch to them mid-run, and the world keeps
every episode from before the switch with its old version and its judgments.

A tiny untrained model never finishes a task, and groups whose rollouts all fail carry no
signal, so the test's policy agents follow the oracle's hints in every other episode
(``GuidedPolicy``: the steps still carry the model's version, prompt and rank completion,
and the trainer scores them with that version's weights, as it would any rollout). Everything else is real: HTTP,
SQLite, the reward model's sampled votes, PPO updates, checkpoints and in-place reloads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from live import live_server

from agents.backends import Sampling, TransformersModel
from agents.client import BigWorldClient
from agents.policy_agent import (
    ExpertPolicy,
    GuidedPolicy,
    ModelPolicy,
    PolicyRunner,
    RunnerConfig,
)
from agents.reward_agent import ModelJudge, RewardConfig, RewardRunner
from agents.train.config import TrainConfig
from agents.train.trainer import Trainer

pytestmark = pytest.mark.slow
VOTES = 2
FAMILY = "examine_in_light"  # short oracle plans, so guided episodes end well inside the budget
DEADLINE_S = 100.0


def _until(condition: Callable[[], bool], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


def _versions_played(admin: BigWorldClient) -> dict[int, tuple[str, frozenset[str]]]:
    """Episode id → its status and the policy versions its steps carry."""
    out = {}
    for row in admin.episodes():
        detail = admin.episode(row["id"])
        out[int(row["id"])] = (
            detail["status"],
            frozenset(s["policy_version"] for s in detail["steps"]),
        )
    return out


def test_agents_reward_agent_and_trainer_run_together(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    env = {"BIGWORLD_STEP_BUDGET": "10", "BIGWORLD_SEED": "3"}
    with live_server(tmp_path / "data", env=env) as server:
        admin = BigWorldClient(server.url, server.admin_token)
        trainer_client = BigWorldClient(server.url, admin.create_agent("trainer", "trainer").token)
        config = TrainConfig(
            mode="integrated_rm",
            votes=VOTES,
            group_by="family",
            group_size=6,
            min_samples=4,
            batch_size=8,
            micro_batch_size=4,
            lr=1e-3,
            reward_lr=1e-3,
            poll_s=0.5,
            judgment_wait_s=60.0,
            device="cpu",
        )
        trainer = Trainer(
            trainer_client,
            config,
            policy_dir=tiny_models["policy"],
            reward_dir=tiny_models["reward"],
            out=tmp_path / "train",
        )
        runners = []
        for i in range(2):
            model = TransformersModel(tiny_models["policy"], version="init", device="cpu")
            policy = GuidedPolicy(
                ModelPolicy(model, "rank", Sampling(1.0, 1, seed=i)), ExpertPolicy(trainer_client)
            )
            runners.append(
                PolicyRunner(
                    BigWorldClient(server.url, admin.create_agent(f"p{i}", "policy").token),
                    policy,
                    RunnerConfig(family=FAMILY, poll_s=0.5),
                )
            )
        judge = ModelJudge(
            TransformersModel(tiny_models["reward"], version="init", device="cpu"),
            Sampling(temperature=1.0, max_new_tokens=6, seed=5),
        )
        judges = RewardRunner(
            BigWorldClient(server.url, admin.create_agent("rm", "reward").token),
            judge,
            RewardConfig(votes=VOTES, poll_s=0.3, reload_poll_s=0.5),
        )
        loops: list[tuple[threading.Event, Callable[[], object]]] = [
            (r.stop, r.run) for r in runners
        ]
        loops += [(judges.stop, judges.run), (trainer.stop, lambda: trainer.run(progress=False))]
        threads = [threading.Thread(target=run, daemon=True) for _, run in loops]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + DEADLINE_S
        try:
            assert _until(lambda: len(trainer.history) >= 1, deadline), "no first update"
            early = _versions_played(admin)  # history as it stood before any switch to v2+
            assert _until(lambda: len(trainer.history) >= 2, deadline), "no second update"
            newest = trainer.learners["policy"].version
            assert _until(
                lambda: (
                    all(r.policy.version == newest for r in runners)
                    and any(newest in v for _, v in _versions_played(admin).values())
                ),
                deadline,
            ), "agents did not play the newest version"
            for stop, _ in loops[:2] + loops[3:]:  # the reward agent finishes its work
                stop.set()
            assert _until(lambda: not list(admin.episodes(needs_votes=VOTES)), deadline)
        finally:
            for stop, _ in loops:
                stop.set()
            for thread in threads:
                thread.join(timeout=30)

        # versions advanced, each registered with its parent and the update's figures
        policies = sorted(admin.policies(kind="policy"), key=lambda r: r["version"])
        assert len(policies) >= 3 and int(newest) >= 3
        assert [p["parent"] for p in policies[1:]] == [p["version"] for p in policies[:-1]]
        for record in policies[1:]:
            assert {"loss", "kl", "accuracy", "samples", "groups"} <= set(record["metrics"])
            assert record["config"]["mode"] == "integrated_rm"
            assert Path(record["path"]).parent == (tmp_path / "train").resolve()
        # the reward model got a new version only if it learned something
        rewards = list(admin.policies(kind="reward"))
        assert len(rewards) - 1 == sum(m.get("rm_optimizer_steps", 0) > 0 for m in trainer.history)

        # the agents switched: later steps carry the new version; earlier ones kept theirs
        later = _versions_played(admin)
        assert any(newest in v for _, v in later.values())
        old = {"init", str(policies[0]["version"])}
        kept = [e for e, (status, v) in early.items() if status != "open" and v and v <= old]
        assert kept, "no episode ended before the first update"
        for episode_id in kept:
            assert later[episode_id] == early[episode_id]
            detail = admin.episode(episode_id)
            judged = {(j["step"], j["vote"]) for j in detail["judgments"]}
            assert len(judged) == VOTES * len(detail["steps"])
            assert {j["model_version"] for j in detail["judgments"]} <= {
                "init",
                *(str(r["version"]) for r in rewards),
            }
        # the runners took in versions without restarting
        assert all(r.stats.reloads >= 2 for r in runners)
