"""Exact groups: G rollouts of one task from one state, played by the trainer in forks.

A persistent world never resets, so the rollouts the trainer groups (by task, family or start
distance) never started from the same state. With ``exact_groups`` G the trainer plays its
own: each round it reads main's tick T, forks main G times at T (``POST /v1/worlds``, an
admin's token), begins one episode in the first fork as a policy agent (a draw, of
``exact_family`` when given, where that agent's avatar stood at T), and plays that task's spec
(``{"family", "params"}``) in every fork with the trainer's latest version: the same avatar,
the same world, the same task, so the G episodes start from one state. It checks they did
(same task text, same step-0 observation, same begin tick), reads each episode back from its
fork, deletes the forks and hands the G episodes to the update as one group: each gets a
trainer-unique episode id (negative: never a world's) and the task id
``"<round>@<T>/<task id>"``, which no other round shares, so grouping by task makes exactly
these groups.

The policy plays in rank mode at temperature 1 (as ``bigworld agent run``'s ``model``
backend), loaded with :class:`agents.backends.TransformersModel` from the checkpoint of the
version the trainer publishes, reloaded in place when a newer one is published; the G
rollouts play at once, one thread each, their model calls one at a time.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.backends import Generated, LanguageModel, Sampling, TransformersModel
from agents.client import BigWorldClient, RetryPolicy
from agents.errors import (
    AuthenticationError,
    ClientError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ValidationError,
)
from agents.policy_agent import ModelPolicy, Policy, PolicyRunner, RunnerConfig
from agents.train.config import TrainConfig
from agents.train.data import Episode, episode_from_detail
from world.contract import MAIN_WORLD
from world.schemas import EpisodeStarted

log = logging.getLogger("bigworld.train.exact")
# What a misconfigured round raises at once (a token of the wrong role, an unknown family),
# where retrying the next round would only fail the same way.
FATAL = (AuthenticationError, ForbiddenError, ValidationError)

PolicyFactory = Callable[[str, int, str, Path], Policy]
"""``(fork, index in the group, version, checkpoint) → the policy that plays there``."""


class _Serial:
    """A model whose calls run one at a time: the G rollouts' threads share its weights (and
    its tokenizer, which is not safe to call from two threads at once)."""

    def __init__(self, model: LanguageModel) -> None:
        self.model, self.lock = model, threading.Lock()
        self.version = model.version

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        with self.lock:
            return self.model.generate(prompts, sampling)

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        with self.lock:
            return self.model.score(prompt, completions)

    def reload(self, path: Path, version: str) -> None:
        with self.lock:
            self.model.reload(path, version)
            self.version = version


@dataclass
class ExactFigures:
    """What the rounds gave so far (in the trainer's update figures as ``exact_*``)."""

    rounds: int = 0  # rounds begun
    played: int = 0  # rounds that gave G checked episodes (a group each)
    mixed: int = 0  # of those, groups with both outcomes (the ones that train)
    rollouts: int = 0  # episodes of those groups
    successes: int = 0
    failed: int = 0  # rounds given up: no task near the avatar, an error, a mismatch, a stop
    fork_s: float = 0.0  # making and deleting forks
    play_s: float = 0.0  # playing the G episodes and reading them back

    def as_metrics(self) -> dict[str, float]:
        return {f"exact_{k}": float(v) for k, v in vars(self).items()}


class ExactGroups:
    """Plays the trainer's exact groups on the server at ``url``: forks with ``fork_token``
    (an admin's), rollouts with ``player_token`` (a policy agent's). ``make_policy`` replaces
    the trainer's model as the player (tests); by default the published checkpoint plays."""

    def __init__(
        self,
        url: str,
        fork_token: str,
        player_token: str,
        *,
        retry: RetryPolicy | None = None,
        make_policy: PolicyFactory | None = None,
    ) -> None:
        self.url, self.player_token, self.retry = url, player_token, retry
        self.admin = BigWorldClient(url, fork_token, retry=retry)
        self.make_policy = make_policy
        self.tag = secrets.token_hex(2)  # this trainer's forks, apart from a restart's
        self.figures = ExactFigures()
        self.count = 0  # rollouts handed out: their ids are -1, -2, …
        self.model: _Serial | None = None
        self.leftovers: list[str] = []  # forks whose deletion failed, tried again each round

    # -- one round ------------------------------------------------------------------------
    def play(
        self, config: TrainConfig, *, path: Path, version: str, stop: threading.Event
    ) -> list[Episode] | None:
        """One exact group of ``config.exact_groups`` episodes played by ``version`` (whose
        checkpoint is ``path``), or None when the round was given up (then nothing is left
        behind either). Forks made are deleted whatever happens."""
        size = config.exact_groups
        if size < 2:
            raise ValueError(f"expected exact_groups >= 2, got {size}")
        self._delete_leftovers()
        self.figures.rounds += 1
        tick = int(self.admin.world()["tick"])
        prefix = f"g{abs(config.seed) % 10**6}-{self.tag}-{self.figures.rounds}"
        names = [f"{prefix}-{i}" for i in range(size)]
        made: list[str] = []
        started = time.perf_counter()
        try:
            for name in names:
                self.leftovers.append(name)  # until its deletion is seen through
                self.admin.fork_world(MAIN_WORLD, tick, name, state_hash=False)
                made.append(name)
                self.leftovers.remove(name)
            self.figures.fork_s += time.perf_counter() - started
            playing = time.perf_counter()
            details = self._play_forks(config, names, path, version, stop)
            self.figures.play_s += time.perf_counter() - playing
        finally:
            deleting = time.perf_counter()
            for name in made:
                self._delete(name)
            self.figures.fork_s += time.perf_counter() - deleting
        episodes = None if details is None else self._group(details, tick, prefix, config)
        if episodes is None:
            self.figures.failed += 1
            return None
        wins = sum(e.rollout.success for e in episodes)
        self.figures.played += 1
        self.figures.mixed += 0 < wins < len(episodes)
        self.figures.rollouts += len(episodes)
        self.figures.successes += wins
        return episodes

    def _play_forks(
        self,
        config: TrainConfig,
        names: list[str],
        path: Path,
        version: str,
        stop: threading.Event,
    ) -> list[dict[str, Any]] | None:
        """Each fork's episode detail, one task in all (None: the round is given up)."""
        with self._player(names[0]) as first:
            try:
                start = self._draw(first, config.exact_family)
            except ConflictError as exc:  # no task near the avatar now
                log.warning("exact group: no task to play in %s: %s", names[0], exc)
                return None
        spec = {"family": start.task.family, "params": start.task.params}
        policies = [self._policy(name, i, version, path, config) for i, name in enumerate(names)]
        with ThreadPoolExecutor(len(names), thread_name_prefix="exact") as pool:
            futures = [
                pool.submit(self._play_one, name, policy, spec, stop)
                for name, policy in zip(names, policies, strict=True)
            ]
            results, errors = [], []
            for future in futures:
                try:
                    results.append(future.result())
                except FATAL:
                    raise
                except ClientError as exc:
                    errors.append(exc)
        if errors or any(r is None for r in results):
            log.warning("exact group given up: %s", errors[0] if errors else "stopped")
            return None
        return [r for r in results if r is not None]

    def _play_one(
        self, name: str, policy: Policy, spec: dict[str, Any], stop: threading.Event
    ) -> dict[str, Any] | None:
        """Play ``spec`` once in fork ``name`` (the first fork resumes the episode its draw
        began) and read the episode back; None when stopped meanwhile."""
        with self._player(name) as client:
            # one version for the whole round: the trainer reloads the shared model between
            config = RunnerConfig(task=spec, max_episodes=1, follow_versions=False)
            runner = PolicyRunner(client, policy, config)
            runner.stop = stop  # a trainer told to stop abandons the round's episodes
            record = runner.play_episode()
            if record is None:
                return None
            return client.episode(record["episode_id"])

    @staticmethod
    def _draw(client: BigWorldClient, family: str | None) -> EpisodeStarted:
        try:
            return client.begin_episode(family=family)
        except ConflictError as exc:
            if exc.code != "no_task" or family is None:
                raise
            log.warning("exact group: no %s task near the avatar; drawing any family", family)
            return client.begin_episode()

    def _group(
        self, details: list[dict[str, Any]], tick: int, prefix: str, config: TrainConfig
    ) -> list[Episode] | None:
        """The G episodes as one group, after checking they began alike."""
        first = details[0]
        for detail in details[1:]:
            same = (
                detail["task"].get("text") == first["task"].get("text")
                and detail["observation"] == first["observation"]
                and detail["admissible_actions"] == first["admissible_actions"]
                and detail["begin_tick"] == first["begin_tick"] == tick
            )
            if not same:
                log.warning(
                    "exact group given up: its episodes began differently (%r at %s, %r at %s)",
                    first["task"].get("text"),
                    first["begin_tick"],
                    detail["task"].get("text"),
                    detail["begin_tick"],
                )
                return None
        episodes = []
        for detail in details:
            episode = episode_from_detail(detail, votes=config.votes, use_votes=False)
            if episode is None:  # no steps, or steps without the policy's texts
                log.warning("exact group given up: episode %s cannot be learned", detail["id"])
                return None
            episodes.append(episode)
        out = []
        for episode in episodes:
            self.count += 1
            rollout = replace(
                episode.rollout,
                episode_id=-self.count,
                task_id=f"{prefix}@{tick}/{episode.rollout.task_id}",
            )
            out.append(replace(episode, rollout=rollout))
        return out

    # -- players and models -----------------------------------------------------------------
    def _player(self, world: str) -> BigWorldClient:
        return BigWorldClient(self.url, self.player_token, retry=self.retry, world=world)

    def _policy(self, name: str, i: int, version: str, path: Path, config: TrainConfig) -> Policy:
        if self.make_policy is not None:
            return self.make_policy(name, i, version, path)
        seed = hash((config.seed, self.figures.rounds, i)) % 2**32
        return ModelPolicy(
            self._model(path, version, config.device), "rank", Sampling(1.0, 1, seed)
        )

    def _model(self, path: Path, version: str, device: str | None) -> _Serial:
        """The shared model at ``version``: loaded once, reloaded in place when it changed."""
        if self.model is None:
            self.model = _Serial(TransformersModel(path, version=version, device=device))
        elif self.model.version != version:
            self.model.reload(path, version)
        return self.model

    # -- forks ------------------------------------------------------------------------------
    def _delete(self, name: str) -> None:
        try:
            self.admin.delete_world(name)
        except NotFoundError:
            pass
        except ClientError as exc:
            log.warning("could not delete fork %s (%s); trying again next round", name, exc)
            self.leftovers.append(name)

    def _delete_leftovers(self) -> None:
        leftovers, self.leftovers = self.leftovers, []
        for name in leftovers:
            self._delete(name)

    def close(self) -> None:
        self._delete_leftovers()
        self.admin.close()
