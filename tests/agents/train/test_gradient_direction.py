"""The trainer's gradient moves the policy that samples, the right way: on-policy rank-mode
updates through the real learner, on recorded go_to decisions whose correct action is known.

With advantages from the true reward, N updates must raise the probability the agent gives the
correct action by at least 0.2 without lowering it on held-out decisions; with pure-noise
advantages the same updates must keep the policy near where it started (small KL).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.models.tiny import ModelSpec, candidate_scores, encode_candidates, init_model
from agents.prompts import policy_prompt, rank_completion
from agents.train.config import TrainConfig
from agents.train.learner import Learner, Sample
from agents.train.rewards import EPS, standardise

pytestmark = pytest.mark.slow  # a full-size tiny model trained 14 times (some 110 s)

PLACES = [
    f"{room} {i}"
    for room in ("kitchen", "bathroom", "bedroom", "living room", "workshop", "farm", "forest")
    for i in (1, 2, 3)
]
TEMPERATURE = 1.0
UPDATES = 14
TRAIN = 48  # decisions trained on; 16 more are held out
Decision = tuple[str, tuple[str, ...], int]  # prompt, candidates, the correct one


def decisions(seed: int, n: int) -> list[Decision]:
    """One-hop go_to decisions: four exits, ``look`` and ``inventory``, in a random order."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        exits = rng.sample(PLACES, 4)
        here = rng.choice([p for p in PLACES if p not in exits])
        actions = ["look", "inventory", *(f"go to {e}" for e in exits)]
        rng.shuffle(actions)
        observation = f"You are in the {here}. From here you can go to {', '.join(exits)}."
        prompt = policy_prompt(f"go to the {exits[0]}", [], observation, actions)
        candidates = tuple(rank_completion(k + 1, a) for k, a in enumerate(actions))
        out.append((prompt, candidates, actions.index(f"go to {exits[0]}")))
    return out


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_model("policy", tmp_path_factory.mktemp("gradient") / "policy", ModelSpec())


def _policy(learner: Learner) -> Callable[[Decision], np.ndarray]:
    """The agent's sampling distribution (``TransformersModel.score``'s scores, softmax at T)
    under the learner's current weights."""

    @torch.no_grad()
    def probs(d: Decision) -> np.ndarray:
        scores = candidate_scores(learner.model, *encode_candidates(learner.tokenizer, *d[:2]))
        return torch.softmax(scores.double() / TEMPERATURE, 0).numpy()

    return probs


def _train(policy_dir: Path, reward: str) -> tuple[list[float], list[float], float]:
    """p(correct) on the training and held-out decisions before and after, and the mean
    KL(after ‖ before) over all of them."""
    torch.manual_seed(0)
    config = TrainConfig(device="cpu")
    learner = Learner(
        policy_dir, config, lr=config.lr, version="1", resolve=lambda v: policy_dir, reference="1"
    )
    probs = _policy(learner)
    train, held = decisions(1, TRAIN), decisions(2, 16)
    rng = np.random.default_rng(0)
    before = [probs(d) for d in train + held]
    for _ in range(UPDATES):
        chosen = [int(rng.choice(len(p), p=p / p.sum())) for p in map(probs, train)]
        if reward == "true":
            rewards = [float(k == d[2]) for k, d in zip(chosen, train, strict=True)]
        else:
            rewards = list(rng.standard_normal(len(train)))
        samples = [
            Sample(d[0], d[1][k], a, "1", TEMPERATURE, d[1], k)
            for d, k, a in zip(train, chosen, standardise(rewards), strict=True)
            if abs(a) > EPS
        ]
        learner.ppo_update(samples)
    after = [probs(d) for d in train + held]
    correct = [d[2] for d in train + held]
    p_before = [float(p[k]) for p, k in zip(before, correct, strict=True)]
    p_after = [float(p[k]) for p, k in zip(after, correct, strict=True)]
    kl = float(np.mean([(q * np.log(q / p)).sum() for p, q in zip(before, after, strict=True)]))
    return p_before, p_after, kl


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def runs(policy_dir: Path) -> dict[str, tuple[list[float], list[float], float]]:
    return {reward: _train(policy_dir, reward) for reward in ("true", "noise")}


def test_true_advantages_raise_the_correct_actions_probability(runs: dict) -> None:
    before, after, kl = runs["true"]
    rise = _mean(after[:TRAIN]) - _mean(before[:TRAIN])
    assert rise >= 0.2, f"p(correct) {_mean(before[:TRAIN]):.3f} -> {_mean(after[:TRAIN]):.3f}"
    assert _mean(after[TRAIN:]) >= _mean(before[TRAIN:])  # held-out decisions not lowered


def test_noise_advantages_keep_the_policy_near_where_it_was(runs: dict) -> None:
    before, after, kl = runs["noise"]
    # the same number of updates with the true reward moves it several times as far
    assert kl < 0.25 and kl < 0.5 * runs["true"][2], f"KL {kl:.4f} vs {runs['true'][2]:.4f}"
    assert abs(_mean(after) - _mean(before)) < 0.05
