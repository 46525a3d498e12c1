"""TRL's GRPOTrainer trains the tiny policy on the world through OpenEnv sessions (design §7).

A short run of the real library (a few GRPO steps): the episodes it played are in the world,
each step under the policy version TRL's run published. Needs the ``interop`` extra: without
it these tests skip, except under ``CI=true`` where they fail (``make test`` installs it).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from live import ROOT, LiveServer, readme_snippets

from agents.client import BigWorldClient
from world.schemas import AgentCreated

if importlib.util.find_spec("trl") is None or importlib.util.find_spec("openenv") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            "CI=true but trl or openenv-core is not installed (make interop)", pytrace=False
        )
    pytest.skip("needs the interop extra (make interop)", allow_module_level=True)

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from agents.prompts import parse_box  # noqa: E402
from agents.trl_rollout import (  # noqa: E402
    PublishVersions,
    WorldRollouts,
    grpo_config,
    outcome_reward,
)

STEPS = 3
GROUP = 2  # decisions per GRPO group


def grpo(
    model_dir: Path, rollouts: WorldRollouts, publish: PublishVersions, out: Path
) -> GRPOTrainer:
    config = grpo_config(out / "trl", group=GROUP, batch=2 * GROUP, max_steps=STEPS, seed=0)
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=AutoTokenizer.from_pretrained(model_dir, padding_side="left"),
        reward_funcs=outcome_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": ["go_to"] * 16}),
        rollout_func=rollouts,
        callbacks=[publish],
    )


@pytest.mark.slow
def test_grpo_trains_on_world_episodes_under_the_versions_it_published(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    tiny_models: dict[str, Path],
    tmp_path: Path,
) -> None:
    players = [make_agent().token for _ in range(2)]
    trainer_agent = make_agent("trainer")
    rollouts = WorldRollouts(server.url, players, family="go_to", seed=0)
    with BigWorldClient(server.url, trainer_agent.token) as client:
        publish = PublishVersions(client, rollouts, tiny_models["policy"], tmp_path / "out")
        trainer = grpo(tiny_models["policy"], rollouts, publish, tmp_path)
        try:
            trainer.train()
        finally:
            rollouts.close()

    assert trainer.state.global_step == STEPS
    assert len(publish.versions) == STEPS + 1  # the start, then every optimiser step
    registered = {str(p["version"]): p for p in admin.policies(kind="policy")}
    assert set(publish.versions) <= set(registered)
    assert registered[publish.versions[0]]["path"] == str(tiny_models["policy"].resolve())
    for parent, child in zip(publish.versions, publish.versions[1:], strict=False):
        assert str(registered[child]["parent"]) == parent
        assert Path(registered[child]["path"], "model.safetensors").exists()

    # Every episode TRL's rollouts played is an ordinary episode of the world, its steps
    # recorded under the version that chose them, in rank mode at the rollouts' temperature.
    assert len(rollouts.played) >= STEPS * 2  # at least one group of GROUP per sample pair
    seen: set[str] = set()
    for played in rollouts.played:
        detail = admin.episode(played.episode_id)
        assert detail["status"] == ("succeeded" if played.success else "failed")
        assert len(detail["steps"]) == played.steps
        for step in detail["steps"]:
            assert step["policy_version"] == played.version
            assert (step["mode"], step["temperature"]) == ("rank", 1.0)
            assert parse_box(step["completion"]).ok
            assert step["completion"].startswith(step["action"] + "\n")
        seen.add(played.version)
    # rollouts after the first update played under a version TRL published, not the start
    assert publish.versions[0] in seen and seen - {publish.versions[0]}
    assert seen <= set(publish.versions[:-1])


def test_a_group_is_decisions_at_one_step_index_with_their_episodes_outcomes(
    server: LiveServer, make_agent: Callable[..., AgentCreated], tiny_models: dict[str, Path]
) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_models["policy"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    rollouts = WorldRollouts(server.url, [make_agent().token], family="go_to", seed=1)

    class Trainer:  # what rollout_func reads of TRL's trainer
        num_generations = num_generations_eval = 3
        processing_class = tokenizer

    Trainer.model = model  # type: ignore[attr-defined]
    try:
        out: dict[str, Any] = rollouts(["go_to"] * 6, Trainer())
    finally:
        rollouts.close()
    assert {len(out[k]) for k in out} == {6}
    outcomes = {p.episode_id: (1 if p.success else -1) for p in rollouts.played}
    assert [outcomes[e] for e in out["episode_id"]] == out["outcome"]
    for group in (slice(0, 3), slice(3, 6)):
        assert len(set(out["episode_id"][group])) == 3  # one decision from each of 3 episodes
    eos = tokenizer.eos_token_id
    for ids, logprobs in zip(out["completion_ids"], out["logprobs"], strict=True):
        assert ids[-1] == eos and len(logprobs) == len(ids) and max(logprobs) <= 0.0


@pytest.mark.slow
def test_readme_trl_snippet_runs(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    tmp_path: Path,
) -> None:
    (snippet,) = readme_snippets("TRL", "python")
    player, trainer_agent = make_agent(), make_agent("trainer")
    env = {
        **os.environ,
        "BIGWORLD_SERVER": server.url,
        "BIGWORLD_TOKEN": player.token,
        "BIGWORLD_TRAINER_TOKEN": trainer_agent.token,
        "PYTHONPATH": str(ROOT),
    }
    ran = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=tmp_path,  # it writes its models under ./trl-run
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    played, _, version = ran.stdout.strip().splitlines()[-1].partition(" episodes, last version ")
    assert int(played) >= 4 and version.isdigit()
    ours = str(tmp_path.resolve())
    registered = {str(p["version"]) for p in admin.policies(kind="policy") if ours in p["path"]}
    assert version in registered and len(registered) == 5  # the start and 4 GRPO steps
    played_under = {
        s["policy_version"]
        for row in admin.episodes(agent=player.id)
        for s in admin.episode(row["id"])["steps"]
    }
    assert len(played_under) >= 2 and played_under <= registered
