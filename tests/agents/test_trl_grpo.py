"""TRL's GRPOTrainer trains the tiny policy on the world over the REST API (design §7).

A short run of the real library (a few GRPO steps): the episodes it played are in the world,
each step under the policy version TRL's run published. A token whose agent may hold several
episodes open plays them at once, each turn's steps in one ``POST /v1/steps``. Needs the
``interop`` extra: without it these tests skip, except under ``CI=true`` where they fail
(``make test`` installs it).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from live import ROOT, LiveServer, readme_snippets

from agents.client import BigWorldClient, Reply, Request
from world.schemas import AgentCreated

if importlib.util.find_spec("trl") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but trl is not installed (make interop)", pytrace=False)
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


@pytest.fixture(scope="module")
def server(own_server: LiveServer) -> LiveServer:
    """This module's own server: the go_to episodes it plays by the dozen would change other
    modules' draws."""
    return own_server


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
    trainer = trainer_view(tiny_models["policy"], 3)
    tokenizer = trainer.processing_class
    # the agent may hold one episode open (the default): they are played one at a time
    rollouts = WorldRollouts(server.url, [make_agent().token], family="go_to", seed=1)
    try:
        out: dict[str, Any] = rollouts(["go_to"] * 6, trainer)
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


def test_a_token_plays_as_many_episodes_at_once_as_its_agent_may_in_batches(
    server: LiveServer,
    admin: BigWorldClient,
    tiny_models: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = admin.create_agent(f"fleet-{uuid.uuid4().hex[:8]}", "policy", max_open_episodes=4)
    batches = sent_steps(monkeypatch)
    rollouts = WorldRollouts(server.url, [fleet.token], family="go_to", seed=2)
    try:
        out = rollouts(["go_to"] * 8, trainer_view(tiny_models["policy"], 2))
    finally:
        rollouts.close()
    assert {len(out[k]) for k in out} == {8}

    # The first turn steps 4 episodes in one request; every step went in a batch, and there
    # were fewer requests than steps.
    assert [(s["episode_id"], s["step"]) for s in batches[0]] == [
        (e, 1) for e in sorted({s["episode_id"] for s in batches[0]})
    ]
    assert len(batches[0]) == 4 == max(len(b) for b in batches)
    steps = [s for batch in batches for s in batch]
    assert len(steps) == sum(p.steps for p in rollouts.played) > len(batches)
    # Every episode ended (those still open once the groups were full were played out), and
    # the world recorded each step as it was sent, with the rollouts' version, prompt,
    # completion, mode and temperature.
    assert not list(admin.episodes(agent=fleet.id, status="open"))
    sent = {(s["episode_id"], s["step"]): s for s in steps}
    for played in rollouts.played:
        detail = admin.episode(played.episode_id)
        assert detail["status"] == ("succeeded" if played.success else "failed")
        assert len(detail["steps"]) == played.steps
        for step in detail["steps"]:
            ours = sent[(played.episode_id, step["step"])]
            for key in ("action", "policy_version", "prompt", "completion", "mode"):
                assert step[key] == ours[key]
            assert (step["policy_version"], step["mode"], step["temperature"]) == (
                "init",
                "rank",
                1.0,
            )


def test_at_once_caps_the_open_episodes_and_close_abandons_them(
    server: LiveServer,
    admin: BigWorldClient,
    tiny_models: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = admin.create_agent(f"fleet-{uuid.uuid4().hex[:8]}", "policy", max_open_episodes=4)
    batches = sent_steps(monkeypatch)
    trainer = trainer_view(tiny_models["policy"], 2)
    rollouts = WorldRollouts(server.url, [fleet.token], family="go_to", seed=3, at_once=2)
    try:
        rollouts.play(trainer.model, trainer.processing_class)
        held = {e["id"] for e in admin.episodes(agent=fleet.id, status="open")}
    finally:
        rollouts.close()
    assert [len(b) for b in batches] == [2]
    assert held <= {s["episode_id"] for s in batches[0]}
    assert not list(admin.episodes(agent=fleet.id, status="open"))
    assert all(admin.episode(e)["status"] == "abandoned" for e in held)


def test_an_episode_whose_step_is_refused_is_dropped_and_the_others_play_on(
    server: LiveServer, admin: BigWorldClient, tiny_models: dict[str, Path]
) -> None:
    fleet = admin.create_agent(f"fleet-{uuid.uuid4().hex[:8]}", "policy", max_open_episodes=3)
    trainer = trainer_view(tiny_models["policy"], 2)
    rollouts = WorldRollouts(server.url, [fleet.token], family="go_to", seed=4)
    try:
        rollouts.play(trainer.model, trainer.processing_class)
        held = sorted(e["id"] for e in admin.episodes(agent=fleet.id, status="open"))
        with BigWorldClient(server.url, fleet.token) as player:
            player.abandon(held[0])  # ended under the rollouts: its next step is refused
        moves = rollouts.play(trainer.model, trainer.processing_class)
    finally:
        rollouts.close()
    assert rollouts.refused == 1
    assert held[0] not in {m.episode_id for m in moves}
    assert held[0] not in {p.episode_id for p in rollouts.played}
    assert len(admin.episode(held[0])["steps"]) == 1  # nothing more of it was taken
    for other in held[1:]:  # the others played their second step in the same turn
        assert len(admin.episode(other)["steps"]) == 2


def trainer_view(model_dir: Path, group: int) -> Any:
    """What rollout_func reads of TRL's trainer: the model, its tokenizer, the group size."""
    return SimpleNamespace(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        num_generations=group,
        num_generations_eval=group,
    )


def sent_steps(monkeypatch: pytest.MonkeyPatch) -> list[list[dict[str, Any]]]:
    """The steps of each ``POST /v1/steps`` the clients send from now on; a step sent alone
    (``POST /v1/episodes/{id}/steps``) fails the test."""
    batches: list[list[dict[str, Any]]] = []
    send = BigWorldClient.send

    def counting(client: BigWorldClient, request: Request) -> Reply:
        assert not (request.path.startswith("/v1/episodes/") and request.path.endswith("/steps"))
        if request.path == "/v1/steps":
            batches.append(request.json)
        return send(client, request)

    monkeypatch.setattr(BigWorldClient, "send", counting)
    return batches


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
