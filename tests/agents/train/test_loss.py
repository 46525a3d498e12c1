"""The PPO-clip + k3 loss against a plain reference, and log-probs against the agents' scores:
a rank decision's log-prob is that of the agent's candidate softmax at its temperature."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from agents.backends import TransformersModel
from agents.models.tiny import load_model
from agents.prompts import policy_prompt, rank_completion
from agents.train.config import TrainConfig
from agents.train.learner import Choice, Learner, Sample, rank_cross_entropy
from agents.train.loss import Encoded, collate, cross_entropy, encode, ppo_loss, token_logprobs

ACTIONS = ["go to countertop 1", "take mug 1 from countertop 1", "look"]
PROMPT = policy_prompt(
    "put a clean mug in cabinet 1.",
    [],
    "You are in the kitchen. You see mug 1 on countertop 1.",
    ACTIONS,
)


def reference(new, old, ref, adv, mask, eps, beta):  # type: ignore[no-untyped-def]
    """Unit by unit, in plain Python floats."""
    total, tokens_all = 0.0, 0
    pg_sum = kl_sum = 0.0
    for b in range(len(new)):
        sample, tokens = 0.0, 0
        for t in range(len(new[b])):
            if not mask[b][t]:
                continue
            ratio = math.exp(new[b][t] - old[b][t])
            clipped = min(max(ratio, 1 - eps), 1 + eps)
            pg = -min(ratio * adv[b], clipped * adv[b])
            kl = math.exp(ref[b][t] - new[b][t]) - (ref[b][t] - new[b][t]) - 1
            sample += pg + beta * kl
            pg_sum, kl_sum, tokens = pg_sum + pg, kl_sum + kl, tokens + 1
        total += sample / tokens
        tokens_all += tokens
    return total / len(new), pg_sum / tokens_all, kl_sum / tokens_all


def test_ppo_loss_matches_a_plain_reference_including_clipping_and_kl() -> None:
    new = [[-1.0, -0.2, -3.0, -0.5], [-2.0, -0.1, -0.7, 0.0]]
    old = [[-1.5, -0.2, -2.0, -9.0], [-1.9, -0.4, -0.7, 0.0]]  # ratios far outside 1±ε too
    ref = [[-1.2, -0.3, -2.5, -1.0], [-2.0, -0.1, -0.2, 0.0]]  # the KL's anchor, not old
    adv = [1.3, -0.8]
    mask = [[0, 1, 1, 1], [1, 1, 1, 0]]
    parts = ppo_loss(
        torch.tensor(new),
        torch.tensor(old),
        torch.tensor(ref),
        torch.tensor(adv),
        torch.tensor(mask, dtype=torch.float),
        eps=0.2,
        beta=0.01,
    )
    loss, pg, kl = reference(new, old, ref, adv, mask, 0.2, 0.01)
    assert float(parts.loss) == pytest.approx(loss, rel=1e-6)
    assert parts.policy == pytest.approx(pg, rel=1e-6)
    assert parts.kl == pytest.approx(kl, rel=1e-6)
    assert parts.clip_fraction == pytest.approx(3 / 6)  # ratios e^-1, e^8.5 and e^0.3 clip
    # with β large the KL term dominates: it is the loss's only part when A = 0
    zero = ppo_loss(
        torch.tensor(new),
        torch.tensor(old),
        torch.tensor(ref),
        torch.zeros(2),
        torch.tensor(mask, dtype=torch.float),
        eps=0.2,
        beta=1.0,
    )
    assert float(zero.loss) == pytest.approx(reference(new, old, ref, [0, 0], mask, 0.2, 1.0)[0])


def test_gradients_flow_except_through_clipped_tokens() -> None:
    old = torch.tensor([[-1.0, -1.0, -1.0]])
    new = torch.tensor([[-1.0, -0.5, -1.5]], requires_grad=True)  # ratios 1, e^0.5, e^-0.5
    mask = torch.ones(1, 3)
    ppo_loss(new, old, old, torch.tensor([1.0]), mask, eps=0.2, beta=0.0).loss.backward()
    assert new.grad is not None
    # A > 0: token 0 unclipped (grad −A·ratio/3), token 1 clipped above (no gradient),
    # token 2 below 1−ε keeps the unclipped branch (min picks it): gradient −A·ratio/3
    assert new.grad[0].tolist() == pytest.approx([-1 / 3, 0.0, -math.exp(-0.5) / 3])
    # the KL term alone pulls toward the reference: d k3 / d new = 1 − e^(ref−new)
    new.grad = None
    ref = torch.tensor([[-2.0, -2.0, -2.0]])
    ppo_loss(new, old, ref, torch.tensor([0.0]), mask, eps=0.2, beta=1.0).loss.backward()
    expected = [(1 - math.exp(-2.0 - n)) / 3 for n in (-1.0, -0.5, -1.5)]
    assert new.grad[0].tolist() == pytest.approx(expected)


def test_collate_masks_exactly_the_completion_targets() -> None:
    batch = collate([Encoded([5, 6, 7, 8], 2), Encoded([9, 10, 11], 1)], pad_id=0)
    assert batch.ids.tolist() == [[5, 6, 7, 8], [9, 10, 11, 0]]
    assert batch.attention.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    # position t predicts token t+1: sample 0's completion is tokens 2..3 → positions 1..2
    assert batch.targets_mask.tolist() == [[0, 1, 1], [1, 1, 0]]


def test_completion_logprobs_equal_the_policy_agents_rank_scores(models: dict[str, Path]) -> None:
    agent = TransformersModel(models["policy"], device="cpu")
    completions = [rank_completion(k, a) for k, a in [(1, "go to countertop 1"), (3, "look")]]
    scores = agent.score(PROMPT, completions)
    model, tokenizer = load_model(models["policy"])
    batch = collate([encode(tokenizer, PROMPT, c) for c in completions], tokenizer.pad_token_id)
    with torch.no_grad():
        # the agent's rank score is the completion's mean token log-prob
        ours = (token_logprobs(model, batch).sum(dim=1) / batch.targets_mask.sum(dim=1)).tolist()
    assert ours == pytest.approx(scores, abs=1e-3)
    # a long prompt keeps its end, where the actions and the question are
    cut = encode(tokenizer, PROMPT, completions[0], max_prompt_tokens=8)
    assert cut.start == 8 and cut.ids[:8] == tokenizer(PROMPT).input_ids[-8:]


def test_cross_entropy_is_the_mean_negative_log_prob_per_token() -> None:
    new = torch.tensor([[-1.0, -2.0, 0.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert float(cross_entropy(new, mask)) == pytest.approx((1.5 + 4.0) / 2)


def _learner(path: Path, **overrides: object) -> Learner:
    config = TrainConfig(batch_size=4, micro_batch_size=2, lr=1e-2, **overrides)  # type: ignore[arg-type]
    return Learner(path, config, lr=config.lr, version="1", resolve=lambda v: None)


CANDIDATES = tuple(rank_completion(k + 1, a) for k, a in enumerate(ACTIONS))


def _ranked(chosen: int, advantage: float, temperature: float = 0.5, version: str = "1") -> Sample:
    completion = CANDIDATES[chosen]
    return Sample(PROMPT, completion, advantage, version, temperature, CANDIDATES, chosen)


def test_a_rank_decisions_log_prob_is_the_agents_softmax_at_its_temperature(
    models: dict[str, Path],
) -> None:
    learner = _learner(models["policy"])
    scores = torch.tensor(
        TransformersModel(models["policy"], device="cpu").score(PROMPT, CANDIDATES)
    )
    samples = [_ranked(1, 1.0, 0.5), _ranked(2, 1.0, 2.0)]
    old, ref, _ = learner.fixed_logprobs([[0, 1]], learner.encode(samples), samples)
    expected = [torch.log_softmax(scores / 0.5, 0)[1], torch.log_softmax(scores / 2.0, 0)[2]]
    assert old[0][:, 0].tolist() == pytest.approx([float(x) for x in expected], abs=1e-4)
    assert torch.equal(ref[0], old[0])  # no reference version: the rollout policy


def test_a_ppo_update_moves_probability_toward_positive_advantages(
    models: dict[str, Path],
) -> None:
    learner = _learner(models["policy"])
    # at T = 5 neither is near probability 0 or 1 (summed scores favour short candidates)
    samples = [_ranked(1, 1.0, 5.0), _ranked(2, -1.0, 5.0)] * 2
    text = [Sample(PROMPT, CANDIDATES[1] + "</s>", 1.0, "1", 0.7)]  # a generated completion

    def logps() -> list[float]:
        old, _, _ = learner.fixed_logprobs([[0, 1]], learner.encode(samples), samples)
        return old[0][:, 0].tolist()

    before = logps()
    for _ in range(5):
        stats = learner.ppo_update(samples + text)
    after = logps()
    assert after[0] > before[0] and after[1] < before[1]
    # a micro-batch holds one kind: two rank chunks of 2 and one generated, two per step
    assert stats.optimizer_steps == 2 and stats.samples == 5 and stats.grad_norm > 0
    assert stats.kl >= 0 and stats.fallbacks == 0
    assert learner.ppo_update([_ranked(1, 1.0, temperature=0.0)]).samples == 0  # greedy


def test_rollout_logprobs_come_from_the_version_that_produced_the_sample(
    models: dict[str, Path], tmp_path: Path
) -> None:
    learner = _learner(models["policy"])
    old_dir = tmp_path / "v1"
    learner.model.save_pretrained(old_dir)
    learner.tokenizer.save_pretrained(old_dir)
    sample = _ranked(0, 1.0)
    first = learner.fixed_logprobs([[0]], learner.encode([sample]), [sample])[0][0]
    for _ in range(3):
        learner.ppo_update([sample] * 4)
    learner.version, learner.resolve = "2", lambda v: old_dir if v == "1" else None
    learner.reference = "1"
    again, ref, fallbacks = learner.fixed_logprobs([[0]], learner.encode([sample]), [sample])
    assert torch.allclose(again[0], first, atol=1e-5) and fallbacks == 0
    assert torch.allclose(ref[0], first, atol=1e-5)  # the reference is version 1 too
    gone = _ranked(0, 1.0, version="0")  # no checkpoint on disk
    _, _, fallbacks = learner.fixed_logprobs([[0]], learner.encode([gone]), [gone])
    assert fallbacks == 1


def test_behaviour_cloning_raises_the_demonstrated_completion(models: dict[str, Path]) -> None:
    learner = _learner(models["policy"])
    demo = Sample(PROMPT, rank_completion(2, "take mug 1 from countertop 1"))
    before = learner.bc_update([demo] * 4).loss
    for _ in range(5):
        after = learner.bc_update([demo] * 4).loss
    assert after < before


def test_rank_cloning_is_the_cross_entropy_of_the_agents_candidate_softmax(
    models: dict[str, Path],
) -> None:
    learner = _learner(models["policy"])
    candidates = tuple(rank_completion(k + 1, a) for k, a in enumerate(ACTIONS))
    agent = TransformersModel(models["policy"], device="cpu")
    before = torch.log_softmax(torch.tensor(agent.score(PROMPT, candidates)), dim=0)  # (C,)
    stats = rank_cross_entropy(learner, [Choice(PROMPT, candidates, 1)])
    assert stats.loss == pytest.approx(float(-before[1]), abs=1e-3) and stats.grad_norm > 0
    for _ in range(5):
        rank_cross_entropy(learner, [Choice(PROMPT, candidates, 1)])
    batch = collate(
        [encode(learner.tokenizer, PROMPT, c) for c in candidates], learner.tokenizer.pad_token_id
    )
    with torch.no_grad():
        per_token = token_logprobs(learner.model, batch).sum(dim=1) / batch.targets_mask.sum(dim=1)
        after = torch.log_softmax(per_token, dim=0)
    assert after[1] > before[1]
