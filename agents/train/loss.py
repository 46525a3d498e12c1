"""Log-probabilities of what the policy (or reward model) sampled, and the losses built on them.

The log-probability trained is the one that sampled (design §7):

- **rank mode**: the model scored every candidate completion after the prompt (``s_j``: the
  mean token log-prob of ``rank_completion(j, action)`` + end-of-sequence) and sampled
  candidate k from ``softmax(s / T)``. One decision, one log-prob: ``log softmax(s / T)[k]``.
- **generate mode**: the model sampled text token by token at temperature T; each token's
  log-prob is ``log softmax(logits / T)`` at its position.

Losses, over *units*: a rank decision is one unit; a generated completion's tokens are units
averaged per completion. With ``new``, ``old`` (the rollout policy, computed before the update
without gradients) and ``ref`` (the reference the KL anchors to) per unit and the advantage A:

    ratio = exp(new − old)
    pg    = −min(ratio·A, clip(ratio, 1−ε, 1+ε)·A)
    kl    = exp(ref − new) − (ref − new) − 1                         k3, ≥ 0
    loss  = mean over samples of (mean over its units of pg + β·kl)

So in rank mode ε bounds how far one update moves the probability of the chosen action itself,
not of each of its ~10 tokens.
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
    tokenizer: PreTrainedTokenizerBase,
    prompt: str,
    completion: str,
    max_prompt_tokens: int = 2048,
    *,
    add_end: bool = True,
    completion_ids: Sequence[int] | None = None,
) -> Encoded:
    """Prompt ids (cut to their last ``max_prompt_tokens``) + completion ids (+ eos).

    ``add_end``: append end-of-sequence, as rank candidates are scored. A *generated*
    completion is encoded with ``add_end=False``: one that ended on its own carries the end
    token as text (the agents' backends keep it) and one cut at ``max_new_tokens`` does not,
    so the sample is what the model produced, not the text plus an end it never chose.
    ``completion_ids``: the ids the model sampled, taken as they are (decoded text does not
    always encode back to them); ids outside the vocabulary (another tokenizer's) fall back
    to the text."""
    prompt_ids = tokenizer(prompt).input_ids[-max_prompt_tokens:]
    if completion_ids is not None and all(0 <= i < len(tokenizer) for i in completion_ids):
        return Encoded(prompt_ids + list(completion_ids), len(prompt_ids))
    ids = tokenizer(completion).input_ids
    if add_end:
        ids = ids + [tokenizer.eos_token_id]
    return Encoded(prompt_ids + ids, len(prompt_ids))


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


def token_logprobs(
    model: torch.nn.Module, batch: Batch, temperatures: Tensor | None = None
) -> Tensor:
    """log p(ids[:, t+1] | ids[:, :t+1]) at each sample's temperature (B,), 1 when None:
    (B, T-1), zero where masked."""
    logits = model(input_ids=batch.ids, attention_mask=batch.attention).logits  # (B, T, V)
    logits = logits[:, :-1].float()  # (B, T-1, V)
    if temperatures is not None:
        logits = logits / temperatures[:, None, None]
    logp = torch.log_softmax(logits, dim=-1)  # (B, T-1, V)
    picked = logp.gather(-1, batch.ids[:, 1:, None]).squeeze(-1)  # (B, T-1)
    return picked * batch.targets_mask


@dataclass(frozen=True)
class LossParts:
    loss: Tensor  # scalar, with gradients
    policy: float  # the PPO-clip part
    kl: float  # mean k3 per unit (rank decision or completion token)
    clip_fraction: float  # share of units whose ratio left [1−ε, 1+ε]


def ppo_loss(
    new: Tensor,
    old: Tensor,
    ref: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps: float,
    beta: float,
) -> LossParts:
    """PPO-clip with each sample's advantage on each of its units, plus β·k3 KL to ``ref``.

    new, old, ref, mask: (B, U) — U = 1 for rank decisions, completion tokens in generate
    mode; advantages: (B,). ``old`` and ``ref`` carry no gradient."""
    old, ref = old.detach(), ref.detach()
    adv = advantages[:, None]  # (B, 1)
    log_ratio = (new - old) * mask  # (B, U)
    ratio = torch.exp(log_ratio)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)  # (B, U)
    to_ref = (ref - new) * mask
    kl = torch.exp(to_ref) - to_ref - 1  # k3: exp(ref−new) − (ref−new) − 1
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
