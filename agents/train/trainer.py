"""The continual trainer: follows the world's history and publishes better models, forever.

One iteration: read newly ended episodes (cursor over ``episode_ended`` events), keep those
whose steps carry their m judgments, group them (by family, start distance and policy version
by default; ``group_by``), and once enough
samples have an advantage: update the policy (PPO-clip + k3 KL), in ``integrated_rm`` mode the
reward model too (consistency rewards), save a checkpoint per model, register it with
``POST /v1/policies`` (running agents poll the latest version and reload it in place), keep the
last K on disk and persist the cursor. A restarted trainer resumes from ``state.json`` and the
latest checkpoints; while the server is away every call is retried with backoff.

With ``exact_groups`` G the trainer reads no history: each iteration it plays an exact group
itself (G forks of main at its tick, one episode of one task in each: agents/train/exact.py)
and the update, saving and registration are the same.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import torch

from agents.errors import NotFoundError, ServerError, UnreachableError
from agents.train import checkpoints as ckpt
from agents.train.config import TrainConfig
from agents.train.data import (
    SCRIPTED_VERSIONS,
    Episode,
    EpisodeFeed,
    StepText,
    Vote,
    expert_steps,
    read_labelled_steps,
    vote_choice,
)
from agents.train.exact import ExactGroups
from agents.train.learner import (
    Learner,
    Sample,
    UpdateStats,
    rank_accuracy,
    rank_cross_entropy,
)
from agents.train.rewards import (
    configured_advantages,
    group_rollouts,
    reward_model_advantages,
)

log = logging.getLogger("bigworld.train")
INITIAL = "init"  # the version name agents report before they first reload
WAITING_LINE_S = 30.0  # while no update is due, say where things stand this often


class TrainerClient(Protocol):
    """What the trainer needs from :class:`agents.client.BigWorldClient`."""

    def events(
        self, *, page_size: int | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]: ...

    def episode(self, episode_id: int | str) -> dict[str, Any]: ...

    def episodes(
        self, *, page_size: int | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]: ...

    def register_policy(self, **fields: Any) -> dict[str, Any]: ...

    def policies(
        self, *, page_size: int | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]: ...


class Trainer:
    """Trains ``policy_dir`` (and ``reward_dir``) from the history behind ``client``, writing
    checkpoints and state into ``out``."""

    def __init__(
        self,
        client: TrainerClient,
        config: TrainConfig,
        *,
        policy_dir: Path,
        reward_dir: Path | None,
        out: Path,
        clock: Callable[[], float] = time.time,
        demonstrator: Callable[[int], Any] | None = None,
        exact: ExactGroups | None = None,
    ) -> None:
        if config.trains_reward_model and reward_dir is None:
            raise ValueError("mode integrated_rm trains the reward model: expected a reward_dir")
        if config.exact_groups and exact is None:
            raise ValueError(
                "exact_groups plays in forks: expected an ExactGroups (an admin's token to fork "
                "with, a policy agent's to play with)"
            )
        if config.exact_groups and config.group_by != "task":
            # an exact group's rollouts share their round's task id and nothing else does
            log.info("exact groups are compared within their fork point: group_by task")
            config = dataclasses.replace(config, group_by="task")
        self.exact = exact if config.exact_groups else None
        self.client, self.config, self.out, self.clock = client, config, Path(out), clock
        self.demonstrator = demonstrator  # plays n episodes on expert hints (warm_start_play)
        self.initial = {"policy": Path(policy_dir), "reward": reward_dir}
        self.stop = threading.Event()
        self.out.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(config.seed)
        state = ckpt.load_state(self.out)
        self.resumed = state is not None
        self.state = state or ckpt.TrainerState()
        self.paths: dict[str, dict[str, Path]] = {"policy": {}, "reward": {}}
        self.kinds = ("policy", "reward") if config.trains_reward_model else ("policy",)
        self.feed = EpisodeFeed(
            client,
            votes=config.votes,
            use_votes=config.uses_votes,
            include_abandoned=config.include_abandoned,
            wait_s=config.judgment_wait_s,
            now=clock,
            cursor=self.state.cursor,
            pending=self.state.pending,
        )
        self.waiting: dict[int, Episode] = {}
        self.scripted = 0  # ended episodes no model played (SCRIPTED_VERSIONS): not learned from
        for episode_id in self.state.waiting:  # ready before a restart: read them again
            self.feed.pending.setdefault(episode_id, clock())
        self.learners: dict[str, Learner] = {}
        for kind in self.kinds:
            self.learners[kind] = self._learner(kind)
        # labelled steps the reward model keeps ranking right (reward_anchor), taken in turn
        self.anchor = (
            read_labelled_steps(Path(config.reward_anchor)) if config.reward_anchor else []
        )
        self.anchor_at = 0  # the next labelled step an anchoring step takes
        self.history: list[dict[str, float]] = []  # figures of each update, in order

    # -- versions ----------------------------------------------------------------------------
    def _learner(self, kind: str) -> Learner:
        lr = self.config.lr if kind == "policy" else self.config.reward_lr
        latest = self.state.latest.get(kind)
        initial = self.initial[kind]
        assert initial is not None
        path = Path(latest.path) if latest else initial
        learner = Learner(
            path, self.config, lr=lr, version=INITIAL, resolve=partial(self._resolve, kind)
        )
        learner.load_optimizer(self.out / f"optimizer-{kind}.pt")
        if latest is None:  # a fresh run: the starting weights become the first version
            self.state.latest[kind] = ckpt.Version(None, str(initial.resolve()))
        self._publish(kind)
        learner.version = str(self.state.latest[kind].version)
        if self.config.kl_reference == "start":
            learner.reference = self.state.first.get(kind, learner.version)
        return learner

    def _publish(self, kind: str, metrics: dict[str, float] | None = None) -> None:
        """Register the latest checkpoint of ``kind`` unless it already has a version."""
        latest = self.state.latest[kind]
        if latest.version is None:
            record = self._register(kind, latest.path, latest.parent, metrics or {})
            latest.version = str(record["version"])
            self.state.first.setdefault(kind, latest.version)
            if Path(latest.path).parent == self.out.resolve():  # ours, not the starting dir
                ckpt.annotate(Path(latest.path), version=latest.version, parent=latest.parent)
            ckpt.save_state(self.out, self._state())
        self.paths[kind][latest.version] = Path(latest.path)

    def _register(self, kind: str, path: str, parent: str | None, metrics: dict) -> dict:
        """POST /v1/policies once: after a lost answer, look the path up before resending."""
        body = {
            "kind": kind,
            "path": path,
            "parent": int(parent) if parent and parent.isdigit() else None,
            "config": self.config.to_json(),
            "metrics": metrics,
        }
        delay = min(0.5, self.config.max_backoff_s)
        while True:
            try:  # not resendable blindly: a lost answer may hide an applied registration
                return self.client.register_policy(**body)
            except (UnreachableError, ServerError) as exc:
                if self.stop.is_set():
                    raise
                log.warning("registering %s %s: %s; retrying in %.1fs", kind, path, exc, delay)
                self.stop.wait(delay)
                delay = min(self.config.max_backoff_s, delay * 2)
                found = self._patiently(lambda: self._registered(kind, path))
                if found is not None:
                    return found

    def _registered(self, kind: str, path: str) -> dict | None:
        for record in self.client.policies(kind=kind):
            if record.get("path") == path:
                return record
        return None

    def _resolve(self, kind: str, version: str) -> Path | None:
        """The checkpoint directory of a version: ours, the starting one, or the registry's."""
        if version == INITIAL:
            return self.initial[kind]
        if version not in self.paths[kind]:
            try:
                for record in self._patiently(lambda: list(self.client.policies(kind=kind))):
                    self.paths[kind].setdefault(str(record["version"]), Path(record["path"]))
            except NotFoundError:
                return None
        return self.paths[kind].get(version)

    def _canonical(self, kind: str, version: str) -> str:
        """Agents report ``init`` until their first reload: the version the start became."""
        return self.state.first.get(kind, version) if version == INITIAL else version

    def _age(self, version: str) -> int:
        """How many versions behind the policy in training a rollout's version is."""
        current = self.learners["policy"].version
        version = self._canonical("policy", version)
        if not version.isdigit() or not current.isdigit():
            return 0 if version == current else 1 << 30
        return int(current) - int(version)

    # -- resilience --------------------------------------------------------------------------
    def _patiently(self, call: Callable[[], Any]) -> Any:
        delay = min(0.5, self.config.max_backoff_s)
        while True:
            try:
                return call()
            except (UnreachableError, ServerError) as exc:
                if self.stop.is_set():
                    raise
                log.warning("server unavailable (%s); retrying in %.1fs", exc, delay)
                self.stop.wait(delay)
                delay = min(self.config.max_backoff_s, delay * 2)

    def _state(self) -> ckpt.TrainerState:
        self.state.cursor = self.feed.cursor
        self.state.pending = dict(self.feed.pending)
        # an exact group's rollouts (negative ids) lived in forks that are gone: not kept
        self.state.waiting = sorted(i for i in self.waiting if i >= 0)
        return self.state

    # -- one iteration -----------------------------------------------------------------------
    def collect(self) -> int:
        """Read what ended since the cursor (or, with exact groups, play one); returns how many
        episodes became ready."""
        if self.exact is not None:
            return self._play_exact_group(self.exact)
        self._patiently(self.feed.follow)
        ready = self._patiently(self.feed.ready)
        for episode in ready:
            if episode.rollout.policy_version in SCRIPTED_VERSIONS:
                self.scripted += 1  # no model produced it: nothing to take a ratio against
                continue
            # ``init`` and the version it was registered as are the same weights: one group
            version = self._canonical("policy", episode.rollout.policy_version)
            rollout = dataclasses.replace(episode.rollout, policy_version=version)
            self.waiting[rollout.episode_id] = dataclasses.replace(episode, rollout=rollout)
        return len(ready)

    def _play_exact_group(self, exact: ExactGroups) -> int:
        """One exact group with the latest version; a group whose rollouts all succeeded or
        all failed is complete and carries no signal, so it is dropped at once."""
        version = self.learners["policy"].version
        path = Path(self.state.latest["policy"].path)
        episodes = self._patiently(
            lambda: exact.play(self.config, path=path, version=version, stop=self.stop)
        )
        if not episodes:
            return 0
        wins = sum(e.rollout.success for e in episodes)
        if wins in (0, len(episodes)):
            self.feed.dropped += len(episodes)
        else:
            for episode in episodes:
                self.waiting[episode.rollout.episode_id] = episode
        return len(episodes)

    def _due(self) -> tuple[list[Episode], int]:
        """Episodes of groups ready to learn from (consumed), after dropping dead groups."""
        cfg = self.config
        groups = group_rollouts((e.rollout for e in self.waiting.values()), cfg.group_by)
        use: list[Episode] = []
        dead = 0
        for group in groups.values():
            wins = sum(r.success for r in group)
            uniform = wins in (0, len(group))
            stale = self._age(group[0].policy_version) > cfg.max_staleness
            # A uniform group waits for a differing outcome until it is group_size big; then,
            # with votes, its steps are still ranked by them, and without, it is given up.
            complete = len(group) >= cfg.group_size
            if stale or (uniform and complete and not cfg.ranks_uniform_groups):
                dead += len(group)
                for r in group:
                    del self.waiting[r.episode_id]
            elif (uniform and complete) or (len(group) >= cfg.min_group_size and not uniform):
                use.extend(self.waiting[r.episode_id] for r in group)
        return use, dead

    def update(self) -> dict[str, float] | None:
        """Train on the due groups if they give enough samples; returns the figures or None."""
        cfg = self.config
        episodes, dead = self._due()
        self.feed.dropped += dead
        by_id = {e.rollout.episode_id: e for e in episodes}
        rollouts = [e.rollout for e in episodes]
        rng = random.Random(cfg.seed + self.state.iteration)
        advantages, tally = configured_advantages(rollouts, cfg, rng)
        if len(advantages) < cfg.min_samples:
            return None
        if cfg.max_samples and len(advantages) > cfg.max_samples:
            advantages = rng.sample(advantages, cfg.max_samples)
        started = time.perf_counter()
        samples = [
            sample
            for a in advantages
            if (sample := self._policy_sample(by_id[a.episode_id].steps[a.step - 1], a.advantage))
        ]
        stats = {"policy": self.learners["policy"].ppo_update(samples)}
        anchored: UpdateStats | None = None
        if cfg.trains_reward_model:
            votes, rm_tally = reward_model_advantages(
                rollouts,
                lam=cfg.lam,
                m=cfg.votes,
                by=cfg.group_by,
                window=cfg.accuracy_window,
                unparseable=cfg.unparseable_vote_reward,
            )
            rm_samples = [
                self._vote_sample(s, v, a.advantage)
                for a in votes
                for s in [by_id[a.episode_id].steps[a.step - 1]]
                for v in [s.votes[a.vote]]
                if self._resolve("reward", v.model_version) is not None
                and (v.temperature is None or v.temperature > 0)
            ]
            stats["reward"] = self.learners["reward"].ppo_update(rm_samples)
            if self.anchor and stats["reward"].optimizer_steps:
                anchored = self._anchor_steps(
                    stats["reward"].optimizer_steps * cfg.reward_anchor_steps
                )
        for episode_id in by_id:
            self.waiting.pop(episode_id, None)
        seconds = time.perf_counter() - started
        metrics: dict[str, float] = {
            "iteration": float(self.state.iteration + 1),
            "episodes": float(len(rollouts)),
            "accuracy": sum(r.success for r in rollouts) / len(rollouts),
            "groups": float(tally.groups),
            "zero_advantage_samples": float(tally.zero_samples),
            "untrainable_samples": float(len(advantages) - len(samples)),
            "dropped_episodes": float(self.feed.dropped),
            "scripted_episodes": float(self.scripted),
            "update_s": seconds,
            "samples_per_s": stats["policy"].samples / max(seconds, 1e-9),
            **stats["policy"].as_metrics(""),
        }
        if "reward" in stats:
            metrics.update(stats["reward"].as_metrics("rm_"))
        if anchored is not None:
            metrics["rm_anchor_loss"] = anchored.loss
        if self.exact is not None:
            metrics.update(self.exact.figures.as_metrics())
        # a reward model that learned nothing (no task in the accuracy window) keeps its version
        updated = [k for k, s in stats.items() if s.optimizer_steps > 0]
        self._save(metrics, updated)
        return metrics

    def _policy_sample(self, step: StepText, advantage: float) -> Sample | None:
        """The policy's step as it was sampled, or None when it has no probability to train:
        a greedy choice (temperature 0), or a rank choice not on its step's list."""
        mode, temperature = step.decoding
        version = self._canonical("policy", step.policy_version)
        if temperature <= 0:
            return None
        if mode == "rank":
            choice = step.choice
            if choice is None:
                return None
            return Sample(
                step.prompt,
                step.completion,
                advantage,
                version,
                temperature,
                choice.candidates,
                choice.chosen,
            )
        # an answer that did not parse chose no action (the fallback did): penalise the text
        if step.parse_failed:
            advantage = self.config.parse_failure_advantage
        return Sample(
            step.prompt,
            step.completion,
            advantage,
            version,
            temperature,
            completion_ids=step.completion_ids,
        )

    def _anchor_steps(self, n: int) -> UpdateStats:
        """``n`` rank-loss steps of the reward model (reward_anchor_steps for each step its
        consistency update took), each on the next reward_anchor_batch labelled steps, taken
        in turn."""
        size, losses = self.config.reward_anchor_batch, []
        for _ in range(n):
            batch = [self.anchor[(self.anchor_at + i) % len(self.anchor)] for i in range(size)]
            self.anchor_at = (self.anchor_at + size) % len(self.anchor)
            losses.append(rank_cross_entropy(self.learners["reward"], batch).loss)
        return UpdateStats(samples=n * size, loss=sum(losses) / n, optimizer_steps=n)

    def _vote_sample(self, step: StepText, vote: Vote, advantage: float) -> Sample:
        """A reward model's vote as it was sampled: a choice between the verdicts in rank
        mode, its generated answer otherwise."""
        version = self._canonical("reward", vote.model_version)
        temperature = 1.0 if vote.temperature is None else vote.temperature
        ranked = vote_choice(vote)
        if ranked is None:
            return Sample(
                step.reward_prompt,
                vote.rationale,
                advantage,
                version,
                temperature,
                completion_ids=vote.completion_ids,
            )
        candidates, chosen = ranked
        return Sample(
            step.reward_prompt,
            candidates[chosen],
            advantage,
            version,
            temperature,
            candidates,
            chosen,
        )

    def _save(self, metrics: dict[str, float], kinds: list[str]) -> None:
        """Checkpoint, persist, register, prune the ``kinds`` that changed: in this order, so
        a crash at any point leaves a state a restart can finish (an unregistered latest is
        registered then)."""
        self.state.iteration += 1
        started = time.perf_counter()
        learners = {k: self.learners[k] for k in kinds}
        for kind, learner in learners.items():
            parent = learner.version
            path = ckpt.save_checkpoint(
                learner.publishable(),
                learner.tokenizer,
                self.out,
                kind,
                self.state.iteration,
                {
                    "version": None,
                    "parent": parent,
                    "metrics": metrics,
                    "config": self.config.to_json(),
                },
            )
            learner.save_optimizer(self.out / f"optimizer-{kind}.pt")
            self.state.latest[kind] = ckpt.Version(None, str(path.resolve()), parent)
        ckpt.save_state(self.out, self._state())
        for kind, learner in learners.items():
            self._publish(kind, metrics)
            learner.version = str(self.state.latest[kind].version)
            ckpt.prune(self.out, kind, self.config.keep_last, {self.state.latest[kind].path})
        metrics["publish_s"] = time.perf_counter() - started  # save + register (history only)
        self.history.append(metrics)

    def warm_start(self) -> dict[str, float] | None:
        """Behaviour cloning on oracle-played steps, once per run, published as a version.

        With ``warm_start_play`` the trainer first has ``demonstrator`` play that many
        episodes on the oracle's hints. The rank loss clones the choice among a step's
        admissible actions (as a rank-mode agent decides); a tenth of the demonstrated steps
        (at most 64) is held out to measure how often the clone ranks the oracle's action first.
        """
        cfg = self.config
        if cfg.warm_start_steps <= 0 or self.state.warm_started:
            return None
        if cfg.warm_start_play > 0:
            if self.demonstrator is None:
                raise ValueError("warm_start_play > 0 needs a demonstrator (a player token)")
            self.demonstrator(cfg.warm_start_play)
        limit = max(cfg.warm_start_episodes, cfg.warm_start_play)
        steps = self._patiently(lambda: expert_steps(self.client, limit=limit))
        learner = self.learners["policy"]
        demos: list[Any]
        if cfg.warm_start_loss == "rank":
            demos, per_step = (
                [c for s in steps if (c := s.choice) is not None],
                cfg.warm_start_batch,
            )
        else:
            demos = [Sample(s.prompt, s.completion, 0.0, "expert") for s in steps if s.completion]
            per_step = cfg.batch_size
        self.state.warm_started = True
        if not demos:
            log.warning("warm start: no oracle-played episodes found; skipping it")
            ckpt.save_state(self.out, self._state())
            return None
        random.Random(cfg.seed).shuffle(demos)
        held = min(64, len(demos) // 10) if cfg.warm_start_loss == "rank" else 0
        held_out, train = demos[:held], demos[held:]
        started, losses = time.perf_counter(), []
        for k in range(cfg.warm_start_steps):
            batch = [train[(k * per_step + i) % len(train)] for i in range(per_step)]
            if cfg.warm_start_loss == "rank":
                losses.append(rank_cross_entropy(learner, batch).loss)
            else:
                losses.append(learner.bc_update(batch).loss)
        seconds = time.perf_counter() - started
        metrics = {
            "iteration": float(self.state.iteration + 1),
            "warm_start": 1.0,
            "demonstrations": float(len(train)),
            "bc_loss_first": losses[0],
            "bc_loss": sum(losses[-10:]) / len(losses[-10:]),
            "update_s": seconds,
            "samples_per_s": cfg.warm_start_steps * per_step / max(seconds, 1e-9),
        }
        if held_out:
            metrics["heldout_step_accuracy"] = rank_accuracy(learner, held_out)
            metrics["heldout_steps"] = float(len(held_out))
        self._save(metrics, ["policy"])
        return metrics

    def waiting_line(self) -> str:
        """Where the trainer stands while no update is due (an empty world waits here)."""
        groups = group_rollouts((e.rollout for e in self.waiting.values()), self.config.group_by)
        mixed = sum(len({r.success for r in g}) == 2 for g in groups.values())
        return (
            f"waiting for rollouts to learn from: {len(self.waiting)} episodes in "
            f"{len(groups)} groups ({mixed} with both outcomes), "
            f"{len(self.feed.pending)} awaiting judgments, {self.feed.dropped} dropped, "
            f"{self.scripted} scripted; an update needs {self.config.min_samples} samples"
        )

    # -- the loop ----------------------------------------------------------------------------
    def run(self, iterations: int | None = None, progress: bool = True) -> list[dict[str, float]]:
        """Update until ``iterations`` updates were made (None: until ``stop`` is set)."""
        bar = _progress(iterations, progress)
        done, said = 0, float("-inf")
        try:
            if (first := self.warm_start()) is not None:
                bar.show(first)
            while not self.stop.is_set() and (iterations is None or done < iterations):
                try:
                    ready = self.collect()
                    metrics = self.update()
                except (UnreachableError, ServerError):
                    if not self.stop.is_set():
                        raise
                    break  # stopped while the server was away
                ckpt.save_state(self.out, self._state())
                if metrics is None:
                    if progress and self.clock() - said >= WAITING_LINE_S:
                        said = self.clock()
                        print(self.waiting_line(), flush=True)
                    if self.exact is None or not ready:  # an exact group plays the next at once
                        self.stop.wait(self.config.poll_s)
                    continue
                done += 1
                bar.show(metrics)
        finally:
            bar.close()
        return self.history


class _Bar:
    """A progress bar (tqdm when installed, else one line per update) over updates."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.enabled, self.bar = enabled, None
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc="train", unit="update")
            except ImportError:
                self.bar = None

    def show(self, m: dict[str, float]) -> None:
        if not self.enabled:
            return
        fields = {
            "loss": f"{m.get('loss', m.get('bc_loss', 0.0)):.4f}",
            "kl": f"{m.get('kl', 0.0):.4f}",
            "acc": f"{m.get('accuracy', 0.0):.2f}",
            "samples/s": f"{m.get('samples_per_s', 0.0):.1f}",
        }
        if self.bar is not None:
            self.bar.set_postfix(fields, refresh=False)
            self.bar.update(1)
        else:
            print("update " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(total: int | None, enabled: bool) -> _Bar:
    return _Bar(total, enabled)
