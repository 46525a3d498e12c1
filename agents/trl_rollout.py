"""bigworld episodes as TRL ``GRPOTrainer`` rollouts, through OpenEnv sessions (needs the
``interop`` extra).

TRL 1.16 documents two ways in for environments: ``environment_factory`` (the model calls the
environment's methods as chat-template tools) and ``rollout_func`` (a function that plays the
environment and hands back prompt ids, completion ids and their log-probabilities). The tiny
models have no chat template and cannot write tool calls, so :class:`WorldRollouts` is a
``rollout_func``:

- it plays episodes through OpenEnv sessions at ``/openenv`` (one session per policy agent),
  each ``reset(token=..., family=...)`` an ordinary episode where the avatar stands;
- the model being trained chooses each step as ``bigworld agent run`` does in rank mode: it
  samples from ``softmax(s / T)`` over the admissible actions, ``s`` each candidate answer's mean
  token log-probability (:func:`agents.models.tiny.candidate_scores`);
- every step goes to the world with the policy version in use, the prompt, the answer, the
  mode and the temperature, so the world records what TRL's weights did;
- one TRL sample is one decision: the step's prompt ids, the chosen answer's ids (end token
  included) and their token log-probabilities; its reward is the episode's outcome (+1 or -1,
  :func:`outcome_reward`). GRPO's groups are ``num_generations`` decisions at the same step
  index of as many ended episodes, the comparison of like with like that our trainer makes.

:class:`PublishVersions` registers the starting weights and then the weights after every
optimiser step with ``POST /v1/policies``, as ``bigworld train`` does, and hands the version to
the rollouts, so the world's episodes carry the version TRL published.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOConfig

from agents.backends import softmax_sample
from agents.client import BigWorldClient
from agents.models.tiny import candidate_scores, encode_candidates
from agents.openenv_client import BigWorldAction, BigWorldOpenEnv
from agents.prompts import Turn, first_observation_task, policy_prompt, rank_completion
from agents.train.checkpoints import save_checkpoint
from agents.train.config import TrainConfig

LOAD_TIMEOUT_S = 120.0  # seconds: a server's first /openenv request loads openenv-core


@dataclass(frozen=True)
class Move:
    """One decision of an ended episode, as TRL trains it."""

    step: int  # its index in the episode (from 1): groups compare decisions at one index
    prompt_ids: list[int]
    completion_ids: list[int]  # the chosen answer's ids, its end token included
    logprobs: list[float]  # their log-probabilities under the weights that chose, (len(ids),)
    episode_id: int
    outcome: int = 0  # the episode's: +1 succeeded, -1 failed


@dataclass
class Played:
    """An ended episode, as the rollouts saw it (``t``: seconds since ``started``)."""

    t: float
    episode_id: int
    success: bool
    family: str | None
    task: str | None
    steps: int
    version: str


@dataclass
class WorldRollouts:
    """TRL's ``rollout_func``: ``rollouts(prompts, trainer)`` plays episodes until it has
    ``len(prompts)`` decisions, ``trainer.num_generations`` per group. The dataset's prompts
    only count the samples wanted: the world gives each step's prompt."""

    url: str
    tokens: Sequence[str]  # policy agents' bearer tokens: one OpenEnv session each
    family: str | None = "go_to"
    temperature: float = 1.0  # rank-mode sampling: softmax(scores / temperature)
    seed: int = 0
    policy_version: str = "init"  # set by PublishVersions as versions are registered
    started: float = field(default_factory=time.monotonic)
    played: list[Played] = field(default_factory=list)
    _sessions: list[Any] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.tokens:
            raise ValueError("expected at least one policy agent's token, got none")
        self._rng = np.random.default_rng(self.seed)
        self._turn = 0

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        if len(prompts) % size:
            raise ValueError(f"expected a multiple of {size} prompts, got {len(prompts)}")
        waiting: dict[int, list[Move]] = defaultdict(list)  # step index → decisions
        groups: list[list[Move]] = []
        while len(groups) < len(prompts) // size:
            for move in self.play(trainer.model, trainer.processing_class):
                waiting[move.step].append(move)
                if len(waiting[move.step]) == size:
                    groups.append(waiting.pop(move.step))
        # Decisions left waiting are dropped: the next call's weights are one update newer,
        # and GRPO with one pass (num_iterations=1) assumes its samples are on-policy.
        moves = [m for group in groups[: len(prompts) // size] for m in group]
        return {
            "prompt_ids": [m.prompt_ids for m in moves],
            "completion_ids": [m.completion_ids for m in moves],
            "logprobs": [m.logprobs for m in moves],
            "outcome": [m.outcome for m in moves],
            "episode_id": [m.episode_id for m in moves],
        }

    def play(self, model: Any, tokenizer: Any) -> list[Move]:
        """One episode on the next session; its decisions (none when the world had no task of
        the family near the avatar and an episode of any family was played instead)."""
        k = self._turn % len(self.tokens)
        self._turn += 1
        env = self._session(k)
        try:
            result = env.reset(token=self.tokens[k], family=self.family)
            ours = True
        except RuntimeError as exc:  # OpenEnv's error message carries the REST code
            if "no_task" not in str(exc) or self.family is None:
                raise
            result = env.reset(token=self.tokens[k])  # moves the avatar on, as agent run does
            ours = False
        state = env.state()
        first = result.observation
        task = first_observation_task(first.text)
        text, admissible = first.text, first.admissible_actions
        history: list[Turn] = []
        moves: list[Move] = []
        while not result.done:
            prompt = policy_prompt(task, history, text, admissible)
            action, move = self._choose(model, tokenizer, prompt, admissible, len(history) + 1)
            result = env.step(
                BigWorldAction(
                    action=action,
                    policy_version=self.policy_version,
                    prompt=prompt,
                    completion=rank_completion(admissible.index(action) + 1, action),
                    mode="rank",
                    temperature=self.temperature,
                )
            )
            moves.append(move)
            history.append(Turn(action, result.observation.text))
            text, admissible = result.observation.text, result.observation.admissible_actions
        outcome = 1 if (result.reward or 0) > 0 else -1
        self.played.append(
            Played(
                t=time.monotonic() - self.started,
                episode_id=first.episode_id,
                success=outcome > 0,
                family=state.family,
                task=state.task_id,
                steps=len(moves),
                version=self.policy_version,
            )
        )
        if not ours:
            return []
        return [dataclasses.replace(m, episode_id=first.episode_id, outcome=outcome) for m in moves]

    def _choose(
        self, model: Any, tokenizer: Any, prompt: str, admissible: list[str], step: int
    ) -> tuple[str, Move]:
        completions = [rank_completion(k + 1, a) for k, a in enumerate(admissible)]
        ids, rows = encode_candidates(tokenizer, prompt, completions)
        with torch.no_grad():
            scores = [float(s) for s in candidate_scores(model, ids, rows)]
            k, _ = softmax_sample(scores, self.temperature, float(self._rng.random()))
            logprobs = token_logprobs(model, ids, rows[k])
        return admissible[k], Move(step, ids, rows[k], logprobs, episode_id=0)

    def _session(self, k: int) -> Any:
        if not self._sessions:  # the server loads openenv-core on the first request to /openenv
            httpx.get(f"{self.url.rstrip('/')}/openenv/health", timeout=LOAD_TIMEOUT_S)
        while len(self._sessions) <= k:
            env = BigWorldOpenEnv(base_url=f"{self.url.rstrip('/')}/openenv").sync()
            env.connect()
            self._sessions.append(env)
        return self._sessions[k]

    def close(self) -> None:
        """Close the sessions (each abandons its open episode, if any)."""
        for env in self._sessions:
            env.close()
        self._sessions.clear()


def grpo_config(
    out: Path, *, group: int = 4, batch: int = 8, max_steps: int = 1_000_000, **overrides: Any
) -> GRPOConfig:
    """TRL's GRPO settings for the tiny policy on CPU: ``batch`` decisions per optimiser step
    in groups of ``group``, and the optimiser settings TRL shares with ``bigworld train``
    (learning rate, weight decay, gradient clip, clip ε, KL β to the starting weights, a
    constant learning rate) set as ours; the rest is TRL's default (loss ``dapo``, rewards
    scaled per group, one pass per batch)."""
    ours = TrainConfig()
    settings: dict[str, Any] = {
        "output_dir": str(out),
        "max_steps": max_steps,
        "per_device_train_batch_size": batch,
        "num_generations": group,
        "learning_rate": ours.lr,
        "lr_scheduler_type": "constant",
        "weight_decay": ours.weight_decay,
        "max_grad_norm": ours.grad_clip,
        "epsilon": ours.clip_eps,
        "beta": ours.kl_beta,
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "disable_tqdm": True,
    }
    return GRPOConfig(**(settings | overrides))


def token_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """Each completion token's log-probability after the prompt and the tokens before it."""
    ids = torch.tensor([prompt + completion], device=model.device)
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]  # (len(completion), V)
    chosen = torch.log_softmax(logits.float(), dim=-1)
    return chosen[torch.arange(len(completion)), torch.tensor(completion)].tolist()


def outcome_reward(completions: list[Any], outcome: list[int], **_: Any) -> list[float]:
    """A TRL reward function: each decision's episode outcome (+1 succeeded, -1 failed)."""
    return [float(o) for o in outcome]


class PublishVersions(TrainerCallback):
    """Registers the starting weights before the first rollout, then the weights after every
    ``every`` optimiser steps (saved under ``out``), and hands each version to ``rollouts``."""

    def __init__(
        self,
        client: BigWorldClient,
        rollouts: WorldRollouts,
        start: Path,
        out: Path,
        every: int = 1,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.client, self.rollouts, self.start, self.out = client, rollouts, start, out
        self.every, self.config = every, config or {}
        self.versions: list[str] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._register(str(Path(self.start).resolve()), {"global_step": 0})

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step % self.every:
            return
        model, tokenizer = kwargs["model"], kwargs["processing_class"]
        manifest = {"version": None, "parent": self.rollouts.policy_version}
        path = save_checkpoint(model, tokenizer, self.out, "policy", state.global_step, manifest)
        self._register(str(path.resolve()), {"global_step": state.global_step})

    def _register(self, path: str, metrics: dict[str, Any]) -> None:
        parent = self.rollouts.policy_version
        record = self.client.register_policy(
            kind="policy",
            path=path,
            parent=int(parent) if parent.isdigit() else None,
            config={"trainer": "trl.GRPOTrainer", **self.config},
            metrics=metrics,
        )
        self.rollouts.policy_version = str(record["version"])
        self.versions.append(self.rollouts.policy_version)
