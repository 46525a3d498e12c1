"""LoRA (peft) on the tiny Qwen2 model, on CPU: only adapters learn, versions are saved merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agents.backends import TransformersModel
from agents.models.tiny import load_model
from agents.prompts import policy_prompt, rank_completion
from agents.train import checkpoints as ckpt
from agents.train.config import TrainConfig
from agents.train.learner import Choice, Learner, rank_cross_entropy, rank_scores

pytest.importorskip("peft")

ACTIONS = ["go to countertop 1", "take mug 1 from countertop 1", "look"]
PROMPT = policy_prompt("put a mug in cabinet 1.", [], "You see mug 1 on countertop 1.", ACTIONS)
CHOICE = Choice(PROMPT, tuple(rank_completion(k + 1, a) for k, a in enumerate(ACTIONS)), 1)


def _lora_learner(path: Path, **overrides: object) -> Learner:
    config = TrainConfig(
        lora=True,
        lora_rank=4,
        lora_alpha=8,
        lr=2e-2,
        device="cpu",
        **overrides,  # type: ignore[arg-type]
    )
    return Learner(path, config, lr=config.lr, version="1", resolve=lambda v: None)


def test_a_lora_update_trains_only_adapters_and_changes_the_output(
    models: dict[str, Path],
) -> None:
    learner = _lora_learner(models["policy"])
    trainable = [n for n, p in learner.model.named_parameters() if p.requires_grad]
    adapted = {n.split(".")[-4] for n in trainable}  # ...q_proj.lora_A.default.weight
    assert trainable and all(".lora_" in n for n in trainable)
    assert adapted == set(TrainConfig().lora_targets)
    frozen = {
        n: p.detach().clone() for n, p in learner.model.named_parameters() if "lora_" not in n
    }
    with torch.no_grad():
        before = rank_scores(learner, CHOICE)
    for _ in range(4):
        rank_cross_entropy(learner, [CHOICE])
    with torch.no_grad():
        after = rank_scores(learner, CHOICE)
    assert torch.log_softmax(after, 0)[1] > torch.log_softmax(before, 0)[1]
    for name, p in learner.model.named_parameters():
        if name in frozen:
            assert torch.equal(p, frozen[name]), name  # the base weights never move


def test_only_chosen_modules_get_adapters(models: dict[str, Path]) -> None:
    learner = _lora_learner(models["policy"], lora_targets=("q_proj", "v_proj"))
    adapted = {n.split(".")[-4] for n, p in learner.model.named_parameters() if p.requires_grad}
    assert adapted == {"q_proj", "v_proj"}


def test_a_lora_version_is_saved_merged_and_agents_reload_it_in_place(
    models: dict[str, Path], tmp_path: Path
) -> None:
    learner = _lora_learner(models["policy"])
    for _ in range(4):
        rank_cross_entropy(learner, [CHOICE])
    path = ckpt.save_checkpoint(
        learner.publishable(), learner.tokenizer, tmp_path, "policy", 1, {"version": "2"}
    )
    # a plain Hugging Face checkpoint of the base architecture, no adapter files
    assert (path / "model.safetensors").exists() and not (path / "adapter_config.json").exists()
    assert json.loads((path / "config.json").read_text())["model_type"] == "qwen2"
    merged, _ = load_model(path)
    start, _ = load_model(models["policy"])
    assert merged.state_dict().keys() == start.state_dict().keys()
    # the learner keeps its adapters after publishing (merging works on a copy)
    assert any(".lora_A." in n for n, _ in learner.model.named_parameters())
    # a running agent swaps the merged weights in and ranks as the learner does
    agent = TransformersModel(models["policy"], version="1", device="cpu")
    old = agent.score(PROMPT, CHOICE.candidates)
    agent.reload(path, "2")
    new = agent.score(PROMPT, CHOICE.candidates)
    with torch.no_grad():
        ours = rank_scores(learner, CHOICE).tolist()
    assert agent.version == "2" and new != pytest.approx(old, abs=1e-4)
    assert new == pytest.approx(ours, abs=1e-3)
