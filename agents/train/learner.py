"""One model under training (the policy or the reward model): weights, optimiser, updates.

A :class:`Learner` turns samples into optimiser steps. A sample is what a model sampled — a
rank-mode decision among candidates, or a generated completion — with the temperature it
sampled at, its advantage and the version that produced it. Before an update the learner
computes, once and without gradients, two fixed log-probs per sample (see ``loss.py``):

- ``old``, from the very version that produced the sample: the current weights when that is
  the version in training, else that version's checkpoint (kept on disk, last K); a sample
  whose version is no longer on disk is scored with the current weights and counted;
- ``ref``, from the reference version the KL anchors to (``reference``; the trainer passes the
  version the run started from, so that successive updates cannot drift away from it on noise;
  None: the rollout policy, whose KL is zero on an update's first pass).
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from agents.models.tiny import candidate_scores, encode_candidates, load_model
from agents.train.config import TrainConfig
from agents.train.loss import Encoded, collate, cross_entropy, encode, ppo_loss, token_logprobs

log = logging.getLogger("bigworld.train")


@dataclass(frozen=True)
class Sample:
    """What a model sampled after ``prompt``, and the advantage it earned.

    Generate mode: ``completion`` is the text generated at ``temperature``. Rank mode:
    ``candidates`` holds every candidate completion (``rank_completion(k, action)`` for each
    admissible action, or the judge's verdicts) and ``chosen`` the one sampled from
    ``softmax(scores / temperature)``; ``completion`` is ``candidates[chosen]``."""

    prompt: str
    completion: str
    advantage: float = 0.0  # ignored by behaviour cloning
    version: str = ""  # the model version that produced ``completion``
    temperature: float = 1.0  # > 0: a greedy choice has no probability to take a ratio of
    candidates: tuple[str, ...] = ()  # rank mode only
    chosen: int = 0  # 0-based index into ``candidates``
    # Generate mode: the ids sampled, where the agent recorded them; trained instead of
    # ``completion``'s text, which need not tokenise back to them.
    completion_ids: tuple[int, ...] | None = None

    @property
    def ranked(self) -> bool:
        return bool(self.candidates)


@dataclass(frozen=True)
class Choice:
    """A rank-mode decision: the candidates' completions after one prompt, and the one taken."""

    prompt: str
    candidates: tuple[str, ...]  # rank_completion(k, action) for every admissible action
    chosen: int  # 0-based


@dataclass
class UpdateStats:
    samples: int = 0
    tokens: int = 0  # completion tokens trained on
    seen_tokens: int = 0  # prompt and completion tokens through the model, all passes
    loss: float = 0.0
    policy: float = 0.0
    kl: float = 0.0
    clip_fraction: float = 0.0
    grad_norm: float = 0.0
    optimizer_steps: int = 0
    fallbacks: int = 0  # samples scored with current weights: their version was not on disk

    def as_metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}{k}": float(v) for k, v in vars(self).items()}


def pick_device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


class Learner:
    """Weights and AdamW state of one model, trained with PPO-clip or cross-entropy.

    ``resolve(version)`` gives the checkpoint directory of a version (None when unknown)."""

    def __init__(
        self,
        path: Path,
        config: TrainConfig,
        *,
        lr: float,
        version: str,
        resolve: Callable[[str], Path | None],
        reference: str | None = None,
    ) -> None:
        self.config, self.version, self.resolve = config, version, resolve
        self.reference = reference  # the version the KL anchors to (None: the rollout policy)
        self.device = pick_device(config.device)
        self.model, self.tokenizer = load_model(path, self.device)
        if config.lora:
            self.model = _with_lora(self.model, config)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=config.weight_decay)
        self._snapshots: dict[str, Any] = {}  # version → model: old versions in use, at most 2

    # -- persistence -------------------------------------------------------------------------
    def publishable(self) -> Any:
        """The model to save: LoRA adapters merged into a copy, the model itself otherwise."""
        if self.config.lora:
            return copy.deepcopy(self.model).merge_and_unload()
        return self.model

    def save_optimizer(self, path: Path) -> None:
        torch.save(self.optimizer.state_dict(), path)

    def load_optimizer(self, path: Path) -> None:
        if path.exists():
            self.optimizer.load_state_dict(torch.load(path, map_location=self.device))

    # -- log-probs ---------------------------------------------------------------------------
    def encode(self, samples: Sequence[Sample]) -> list[Encoded]:
        """Generated completions as sampled: their recorded ids, else their text (whose end
        token, if any, is in it)."""
        return [
            encode(
                self.tokenizer,
                s.prompt,
                s.completion,
                self.config.max_prompt_tokens,
                add_end=s.ranked,
                completion_ids=s.completion_ids,
            )
            for s in samples
        ]

    def _behaviour_model(self, version: str) -> Any | None:
        """The weights that produced ``version``'s samples, or None when they are gone."""
        if version == self.version:
            return self.model
        if version in self._snapshots:
            return self._snapshots[version]
        path = self.resolve(version)
        if path is None or not Path(path).exists():
            return None
        model, _ = load_model(Path(path), self.device)
        keep = {self.reference} - {version}
        self._snapshots = {v: m for v, m in self._snapshots.items() if v in keep}
        self._snapshots[version] = model
        return model

    def decision_logprob(self, model: Any, sample: Sample) -> Tensor:
        """``log softmax(s / T)[k]`` of a rank decision under ``model``: a scalar, with
        gradients when grad mode is on."""
        prompt, rows = encode_candidates(
            self.tokenizer, sample.prompt, sample.candidates, self.config.max_prompt_tokens
        )
        scores = candidate_scores(model, prompt, rows)  # (C,)
        return torch.log_softmax(scores / sample.temperature, dim=0)[sample.chosen]

    def unit_logprobs(
        self, model: Any, samples: Sequence[Sample], encoded: Sequence[Encoded]
    ) -> tuple[Tensor, Tensor]:
        """Log-probs of a chunk's units under ``model`` and their mask: (B, 1) for rank
        decisions, (B, T-1) at each sample's temperature for generated completions."""
        if samples[0].ranked:
            logp = torch.stack([self.decision_logprob(model, s) for s in samples])[:, None]
            return logp, torch.ones_like(logp)
        batch = collate(encoded, self.tokenizer.pad_token_id, self.device)
        temperatures = torch.tensor([s.temperature for s in samples], device=self.device)
        return token_logprobs(model, batch, temperatures), batch.targets_mask

    @torch.no_grad()
    def fixed_logprobs(
        self, chunks: list[list[int]], encoded: list[Encoded], samples: Sequence[Sample]
    ) -> tuple[list[Tensor], list[Tensor], int]:
        """Per chunk (a list of sample indices), the rollout versions' unit log-probs and the
        reference's, and how many samples (or references) fell back to the current weights."""
        self.model.eval()
        old_out, ref_out, fallbacks = [], [], 0

        def score(version: str, chunk: list[int], counted: int) -> Tensor:
            nonlocal fallbacks
            model = self._behaviour_model(version)
            if model is None:
                model = self.model
                fallbacks += counted
            picked = [samples[i] for i in chunk]
            return self.unit_logprobs(model, picked, [encoded[i] for i in chunk])[0]

        for chunk in chunks:
            rows: Tensor | None = None
            for version in sorted({samples[i].version for i in chunk}):
                mine = torch.tensor([samples[i].version == version for i in chunk])
                logp = score(version, chunk, int(mine.sum()))  # (B, U)
                rows = logp if rows is None else torch.where(mine[:, None], logp, rows)
            assert rows is not None
            old_out.append(rows)
            reference = self.reference
            if reference is None or {samples[i].version for i in chunk} == {reference}:
                ref_out.append(rows)  # the reference sampled them all: its log-probs are old's
            else:
                ref_out.append(score(reference, chunk, len(chunk)))
        return old_out, ref_out, fallbacks

    # -- updates -----------------------------------------------------------------------------
    def _chunks(self, samples: Sequence[Sample]) -> list[list[int]]:
        """Micro-batches of sample indices, rank decisions and generated completions apart;
        sorted by version so that most score with one model."""
        size = self.config.micro_batch_size
        chunks = []
        for ranked in (True, False):
            order = sorted(
                (i for i in range(len(samples)) if samples[i].ranked == ranked),
                key=lambda i: (samples[i].version, i),
            )
            chunks += [order[i : i + size] for i in range(0, len(order), size)]
        return chunks

    def _optimise(
        self, chunks: list[list[int]], step_loss: Callable[[int, list[int]], Any]
    ) -> UpdateStats:
        """Run the epochs: accumulate micro-batch losses into optimiser steps of ``batch_size``."""
        cfg, stats = self.config, UpdateStats()
        per_step = max(1, cfg.batch_size // cfg.micro_batch_size)
        rng = random.Random(cfg.seed + len(chunks))
        self.model.train()
        totals = {"loss": 0.0, "policy": 0.0, "kl": 0.0, "clip_fraction": 0.0}
        passes = 0
        for _ in range(cfg.ppo_epochs):
            order = list(range(len(chunks)))
            rng.shuffle(order)
            for start in range(0, len(order), per_step):
                group = order[start : start + per_step]
                weight_total = sum(len(chunks[c]) for c in group)
                self.optimizer.zero_grad(set_to_none=True)
                for c in group:
                    parts, tokens = step_loss(c, chunks[c])
                    (parts["loss"] * len(chunks[c]) / weight_total).backward()
                    for k in totals:
                        value = parts[k]
                        value = value.detach() if isinstance(value, Tensor) else value
                        totals[k] += float(value) * len(chunks[c])
                    stats.tokens += tokens
                    stats.seen_tokens += int(parts.get("seen", 0))
                    passes += len(chunks[c])
                norm = torch.nn.utils.clip_grad_norm_(
                    [p for p in self.model.parameters() if p.requires_grad], cfg.grad_clip
                )
                self.optimizer.step()
                stats.optimizer_steps += 1
                stats.grad_norm = max(stats.grad_norm, float(norm))
        self.model.eval()
        for k, v in totals.items():
            setattr(stats, k, v / max(1, passes))
        stats.samples = sum(len(c) for c in chunks)
        return stats

    def ppo_update(self, samples: Sequence[Sample]) -> UpdateStats:
        """PPO-clip + β·k3 KL over ``samples`` (advantages already standardised): one ratio per
        rank decision, one per token of a generated completion."""
        samples = [s for s in samples if s.temperature > 0]  # the trainer drops greedy ones
        if not samples:
            return UpdateStats()
        encoded = self.encode(samples)
        chunks = self._chunks(samples)
        old, ref, fallbacks = self.fixed_logprobs(chunks, encoded, samples)

        def step_loss(c: int, chunk: list[int]) -> tuple[dict[str, Any], int]:
            picked = [samples[i] for i in chunk]
            new, mask = self.unit_logprobs(self.model, picked, [encoded[i] for i in chunk])
            adv = torch.tensor([s.advantage for s in picked], device=self.device)  # (B,)
            parts = ppo_loss(
                new, old[c], ref[c], adv, mask, eps=self.config.clip_eps, beta=self.config.kl_beta
            )
            seen = sum(len(encoded[i].ids) for i in chunk)
            return {
                "loss": parts.loss,
                "policy": parts.policy,
                "kl": parts.kl,
                "clip_fraction": parts.clip_fraction,
                "seen": seen,
            }, int(mask.sum())

        stats = self._optimise(chunks, step_loss)
        stats.fallbacks = fallbacks
        return stats

    def bc_update(self, samples: Sequence[Sample]) -> UpdateStats:
        """Cross-entropy on each sample's completion and its end (behaviour cloning)."""
        if not samples:
            return UpdateStats()
        limit = self.config.max_prompt_tokens
        encoded = [encode(self.tokenizer, s.prompt, s.completion, limit) for s in samples]
        chunks = [
            list(range(i, min(i + self.config.micro_batch_size, len(samples))))
            for i in range(0, len(samples), self.config.micro_batch_size)
        ]
        pad = self.tokenizer.pad_token_id

        def step_loss(c: int, chunk: list[int]) -> tuple[dict[str, Any], int]:
            batch = collate([encoded[i] for i in chunk], pad, self.device)
            loss = cross_entropy(token_logprobs(self.model, batch), batch.targets_mask)
            figures = {
                "loss": loss,
                "policy": float(loss.detach()),
                "kl": 0.0,
                "clip_fraction": 0.0,
                "seen": int(batch.attention.sum()),
            }
            return figures, int(batch.targets_mask.sum())

        return self._optimise(chunks, step_loss)


def rank_scores(learner: Learner, choice: Choice) -> Tensor:
    """Each candidate completion's score after the prompt, (C,), as the agent ranks them
    (``TransformersModel.score``), with gradients when grad mode is on."""
    prompt, rows = encode_candidates(
        learner.tokenizer, choice.prompt, choice.candidates, learner.config.max_prompt_tokens
    )
    return candidate_scores(learner.model, prompt, rows)


def rank_cross_entropy(learner: Learner, choices: Sequence[Choice]) -> UpdateStats:
    """Behaviour cloning of a rank-mode policy, one optimiser step: cross-entropy of the
    softmax over each prompt's candidates (as the agent samples from) on the chosen one.

    Sharper than cloning the chosen text alone, which mostly teaches what actions look like."""
    if not choices:
        return UpdateStats()
    learner.model.train()
    learner.optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for choice in choices:
        scores = rank_scores(learner, choice)
        loss = -torch.log_softmax(scores, dim=0)[choice.chosen] / len(choices)
        loss.backward()
        total += float(loss.detach())
    norm = torch.nn.utils.clip_grad_norm_(
        [p for p in learner.model.parameters() if p.requires_grad], learner.config.grad_clip
    )
    learner.optimizer.step()
    learner.model.eval()
    return UpdateStats(samples=len(choices), loss=total, grad_norm=float(norm), optimizer_steps=1)


@torch.no_grad()
def rank_accuracy(learner: Learner, choices: Sequence[Choice]) -> float:
    """Share of ``choices`` whose chosen candidate the model ranks first (greedy rank mode)."""
    if not choices:
        return 0.0
    learner.model.eval()
    hits = sum(int(rank_scores(learner, c).argmax()) == c.chosen for c in choices)
    return hits / len(choices)


def _with_lora(model: Any, config: TrainConfig) -> Any:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:  # optional: large models on a GPU only
        raise RuntimeError("--lora needs the peft package (pip install peft)") from exc
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_targets),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)
