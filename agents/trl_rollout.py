"""bigworld episodes as TRL ``GRPOTrainer`` rollouts, over the REST API (needs the ``interop``
extra, for TRL).

TRL 1.16 documents two ways in for environments: ``environment_factory`` (the model calls the
environment's methods as chat-template tools) and ``rollout_func`` (a function that plays the
environment and hands back prompt ids, completion ids and their log-probabilities). The tiny
models have no chat template and cannot write tool calls, so :class:`WorldRollouts` is a
``rollout_func``:

- each policy agent's token holds as many episodes open at once as the agent may
  (``max_open_episodes``, which an admin sets; 1 by default), or ``at_once`` if fewer; each
  is an ordinary episode where one of the agent's avatars stands;
- each turn, the model being trained chooses every open episode's next step as
  ``bigworld agent run`` does in rank mode: it samples from ``softmax(s / T)`` over the
  admissible actions, ``s`` each candidate answer's mean token log-probability
  (:func:`agents.models.tiny.candidate_scores`); the turn's steps of one token go in one
  ``POST /v1/steps``, and an episode that ended is replaced by a new one; one whose step the
  world refused (it ended under us, say, abandoned as idle) is abandoned and dropped, and its
  decisions are not trained on;
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

import contextlib
import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOConfig

from agents.backends import softmax_sample
from agents.client import BigWorldClient, Record
from agents.errors import ClientError
from agents.models.tiny import candidate_scores, encode_candidates
from agents.policy_agent import OpenEpisode, begin_near, episodes_at_once
from agents.prompts import rank_completion
from agents.train.checkpoints import save_checkpoint
from agents.train.config import TrainConfig

log = logging.getLogger("bigworld.trl")


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
class _Open(OpenEpisode):
    """An open episode of the rollouts, with its decisions. ``ours``: of the family asked for
    (False: of any family, begun when the family had no task near the avatar)."""

    ours: bool = True
    moves: list[Move] = field(default_factory=list)


@dataclass
class _Player:
    """One token's client, how many episodes it holds open at once, and those it holds."""

    client: BigWorldClient
    size: int
    open: dict[int, _Open] = field(default_factory=dict)


@dataclass
class WorldRollouts:
    """TRL's ``rollout_func``: ``rollouts(prompts, trainer)`` plays episodes until it has
    ``len(prompts)`` decisions, ``trainer.num_generations`` per group. The dataset's prompts
    only count the samples wanted: the world gives each step's prompt."""

    url: str
    tokens: Sequence[str]  # policy agents' bearer tokens: each holds its agent's episodes
    family: str | None = "go_to"
    temperature: float = 1.0  # rank-mode sampling: softmax(scores / temperature)
    seed: int = 0
    at_once: int | None = None  # episodes a token holds open at once (None: as its agent may)
    policy_version: str = "init"  # set by PublishVersions as versions are registered
    started: float = field(default_factory=time.monotonic)
    played: list[Played] = field(default_factory=list)
    refused: int = 0  # episodes dropped because the world refused a step of theirs
    _players: list[_Player] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.tokens:
            raise ValueError("expected at least one policy agent's token, got none")
        self._rng = np.random.default_rng(self.seed)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        if len(prompts) % size:
            raise ValueError(f"expected a multiple of {size} prompts, got {len(prompts)}")
        model, tokenizer = trainer.model, trainer.processing_class
        waiting: dict[int, list[Move]] = defaultdict(list)  # step index → decisions
        groups: list[list[Move]] = []
        while len(groups) < len(prompts) // size:
            for move in self.play(model, tokenizer):
                waiting[move.step].append(move)
                if len(waiting[move.step]) == size:
                    groups.append(waiting.pop(move.step))
        # The episodes still open are played to their end with these weights, and dropped with
        # the decisions left waiting: the next call's weights are one update newer, and GRPO
        # with one pass (num_iterations=1) assumes its samples are on-policy.
        while any(player.open for player in self._players):
            self._turn(model, tokenizer)
        moves = [m for group in groups[: len(prompts) // size] for m in group]
        return {
            "prompt_ids": [m.prompt_ids for m in moves],
            "completion_ids": [m.completion_ids for m in moves],
            "logprobs": [m.logprobs for m in moves],
            "outcome": [m.outcome for m in moves],
            "episode_id": [m.episode_id for m in moves],
        }

    def play(self, model: Any, tokenizer: Any) -> list[Move]:
        """Begin episodes until every token holds as many open as it may, then take a step of
        each; the decisions of the episodes that ended (none of those begun of any family)."""
        self._fill()
        return self._turn(model, tokenizer)

    def _turn(self, model: Any, tokenizer: Any) -> list[Move]:
        """A step of every open episode, one ``POST /v1/steps`` per token; the decisions of the
        episodes that ended."""
        ended: list[Move] = []
        for player in self._players:
            steps: list[Record] = []
            for episode_id, episode in player.open.items():
                prompt = episode.prompt()
                k, move = self._choose(
                    model, tokenizer, prompt, episode.admissible, len(episode.history) + 1
                )
                episode.moves.append(move)
                action = episode.admissible[k]
                steps.append(
                    {
                        "episode_id": episode_id,
                        "step": move.step,
                        "action": action,
                        "policy_version": self.policy_version,
                        "prompt": prompt,
                        "completion": rank_completion(k + 1, action),
                        "mode": "rank",
                        "temperature": self.temperature,
                    }
                )
            if not steps:
                continue
            for sent, answer in zip(steps, player.client.step_many(steps), strict=True):
                if isinstance(answer, ClientError):  # ended under us (idle timeout), or refused
                    self._drop(player, sent["episode_id"], answer)
                    continue
                episode = player.open[sent["episode_id"]]
                episode.answered(sent["action"], answer)
                if answer.done:
                    del player.open[sent["episode_id"]]
                    ended += self._ended(episode, 1 if answer.success else -1)
        return ended

    def _drop(self, player: _Player, episode_id: int, refused: ClientError) -> None:
        """An episode whose step the world refused: abandoned (its slot of the agent's open
        episodes freed; suppressed where it ended already) and its decisions never trained
        on, since it has no outcome."""
        log.warning("episode %s step refused: %s", episode_id, refused)
        del player.open[episode_id]
        self.refused += 1
        with contextlib.suppress(ClientError):
            player.client.abandon(episode_id)

    def _ended(self, episode: _Open, outcome: int) -> list[Move]:
        """Record an ended episode; its decisions with its outcome, if they are used."""
        episode_id = episode.start.episode_id
        self.played.append(
            Played(
                t=time.monotonic() - self.started,
                episode_id=episode_id,
                success=outcome > 0,
                family=episode.start.task.family,
                task=episode.start.task.id,
                steps=len(episode.moves),
                version=self.policy_version,
            )
        )
        if not episode.ours:
            return []
        return [
            dataclasses.replace(m, episode_id=episode_id, outcome=outcome) for m in episode.moves
        ]

    def _choose(
        self, model: Any, tokenizer: Any, prompt: str, admissible: list[str], step: int
    ) -> tuple[int, Move]:
        completions = [rank_completion(k + 1, a) for k, a in enumerate(admissible)]
        ids, rows = encode_candidates(tokenizer, prompt, completions)
        with torch.no_grad():
            scores = [float(s) for s in candidate_scores(model, ids, rows)]
            k, _ = softmax_sample(scores, self.temperature, float(self._rng.random()))
            logprobs = token_logprobs(model, ids, rows[k])
        return k, Move(step, ids, rows[k], logprobs, episode_id=0)

    def _fill(self) -> None:
        """Begin episodes until every token holds as many open as it may."""
        if not self._players:
            for token in self.tokens:
                client = BigWorldClient(self.url, token)
                size = episodes_at_once(client.me().max_open_episodes, self.at_once)
                self._players.append(_Player(client, size))
        for player in self._players:
            while len(player.open) < player.size:
                start, ours = begin_near(player.client, self.family)  # as agent run does
                player.open[start.episode_id] = _Open(start, ours=ours)

    def close(self) -> None:
        """Abandon the episodes still open and close the clients."""
        for player in self._players:
            for episode_id in player.open:
                with contextlib.suppress(ClientError):  # ended meanwhile, or no server
                    player.client.abandon(episode_id)
            player.client.close()
        self._players.clear()


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
