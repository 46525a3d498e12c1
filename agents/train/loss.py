"""Token log-probabilities of "prompt + completion" sequences, and the losses built on them.

Both decoding modes of the policy agent reduce to the same thing: a prompt followed by the
completion the policy was scored on (``rank_completion(k, action)`` in rank mode, the generated
text in generate mode), then end-of-sequence, exactly as ``TransformersModel.score`` tokenises
them. The reward model's samples are the same shape: reward prompt + its answer.

Losses (per token t of a completion, masked over completion tokens only):

    ratio_t = exp(new_t − old_t)
    pg_t    = −min(ratio_t·A, clip(ratio_t, 1−ε, 1+ε)·A)           A: the sample's advantage
    kl_t    = exp(old_t − new_t) − (old_t − new_t) − 1               k3, ≥ 0, to the rollout policy
    loss    = mean over samples of (mean over its tokens of pg_t + β·kl_t)

``old`` are the rollout policy's log-probs (computed before the update, without gradients).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Encoded:
    """One sample's token ids: ``ids[:start]`` is the prompt, ``ids[start:]`` the completion."""

    ids: list[int]
    start: int


@dataclass(frozen=True)
class Batch:
    """Right-padded samples. ``targets_mask[b, t]`` is 1 where ``ids[b, t+1]`` is a
    completion token, i.e. where the log-prob at position t counts."""

    ids: Tensor  # (B, T) long
    attention: Tensor  # (B, T) long, 1 on real tokens
    targets_mask: Tensor  # (B, T-1) float


def encode(
    tokenizer: PreTrainedTokenizerBase, prompt: str, completion: str, max_prompt_tokens: int = 2048
) -> Encoded:
    """Prompt ids (cut to their last ``max_prompt_tokens``) + completion ids + eos."""
    prompt_ids = tokenizer(prompt).input_ids[-max_prompt_tokens:]
    completion_ids = tokenizer(completion).input_ids + [tokenizer.eos_token_id]
    return Encoded(prompt_ids + completion_ids, len(prompt_ids))


def collate(samples: Sequence[Encoded], pad_id: int, device: str | torch.device = "cpu") -> Batch:
    width = max(len(s.ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), width), dtype=torch.long)
    targets = torch.zeros((len(samples), width - 1))
    for b, s in enumerate(samples):
        ids[b, : len(s.ids)] = torch.tensor(s.ids)
        attention[b, : len(s.ids)] = 1
        targets[b, s.start - 1 : len(s.ids) - 1] = 1.0  # position t predicts token t+1
    return Batch(ids.to(device), attention.to(device), targets.to(device))


def token_logprobs(model: torch.nn.Module, batch: Batch) -> Tensor:
    """log p(ids[:, t+1] | ids[:, :t+1]) for every position: (B, T-1), zero where masked."""
    logits = model(input_ids=batch.ids, attention_mask=batch.attention).logits  # (B, T, V)
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T-1, V)
    picked = logp.gather(-1, batch.ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    return picked * batch.targets_mask


@dataclass(frozen=True)
class LossParts:
    loss: Tensor  # scalar, with gradients
    policy: float  # the PPO-clip part
    kl: float  # mean k3 per token
    clip_fraction: float  # share of completion tokens whose ratio was clipped


def ppo_loss(
    new: Tensor, old: Tensor, advantages: Tensor, mask: Tensor, *, eps: float, beta: float
) -> LossParts:
    """PPO-clip with the advantage broadcast over each completion's tokens, plus β·k3 KL.

    new, old, mask: (B, T); advantages: (B,). ``old`` carries no gradient."""
    old = old.detach()
    adv = advantages[:, None]  # (B, 1)
    log_ratio = (new - old) * mask  # (B, T)
    ratio = torch.exp(log_ratio)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)  # (B, T)
    kl = torch.exp(-log_ratio) + log_ratio - 1  # k3 with ref = old: exp(old−new) − (old−new) − 1
    tokens = mask.sum(dim=1).clamp(min=1)  # (B,)
    per_sample = ((pg + beta * kl) * mask).sum(dim=1) / tokens  # (B,)
    with torch.no_grad():
        clipped = ((ratio - 1).abs() > eps).float() * mask
        n = mask.sum().clamp(min=1)
        stats = (
            float((pg * mask).sum() / n),
            float((kl * mask).sum() / n),
            float(clipped.sum() / n),
        )
    return LossParts(per_sample.mean(), *stats)


def cross_entropy(new: Tensor, mask: Tensor) -> Tensor:
    """Behaviour cloning: mean over samples of the mean negative log-prob of the completion."""
    return (-(new * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
