"""The policy agent: plays episodes in the persistent world over HTTP, forever.

Each step it builds the prompt from the task, recent history and numbered admissible actions,
asks its policy for a choice, and sends the step with its index, the exact prompt and
completion, and the policy version. Step indices make every send idempotent, so the runner can
lose the server mid-step, reconnect and resend without applying anything twice.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from agents.backends import DECODING_MODES, LanguageModel, Sampling, sent_ids, softmax_sample
from agents.client import BigWorldClient, Id, Record
from agents.errors import (
    AuthenticationError,
    ClientError,
    ConflictError,
    ForbiddenError,
    UnreachableError,
)
from agents.prompts import (
    Turn,
    parse_choice,
    policy_prompt,
    prompt_task_and_actions,
    rank_completion,
)
from agents.versions import VersionWatcher
from world.contract import ErrorCode
from world.schemas import MAX_BATCH_STEPS, EpisodeStarted, StepOut

log = logging.getLogger("bigworld.policy")
T = TypeVar("T")


@dataclass(frozen=True)
class Decision:
    """A chosen action and everything the trainer needs to score it later."""

    index: int  # 0-based into the admissible actions
    action: str
    prompt: str
    completion: str
    parse_failed: bool = False
    reason: str = ""
    mode: str | None = None  # rank | generate for a model's choice; None for scripted ones
    temperature: float | None = None  # the temperature it sampled at (0: greedy)
    completion_ids: tuple[int, ...] | None = None  # generate mode: the ids sampled


class Policy(Protocol):
    @property
    def version(self) -> str: ...

    has_weights: bool  # False: scripted; new registered versions do not concern it

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision: ...

    def reload(self, path: Path, version: str) -> None: ...


class RandomPolicy:
    """Uniform over the admissible actions (a baseline)."""

    has_weights = False

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.version = "random"

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        k = int(self.rng.integers(len(admissible)))
        return Decision(k, admissible[k], prompt, rank_completion(k + 1, admissible[k]))

    def reload(self, path: Path, version: str) -> None:
        """A random policy has no weights."""


class ExplorerPolicy:
    """A scripted baseline that knows only what the policy's prompt shows: the task's words,
    the admissible actions and the recent actions (unlike the oracle, which sees the world).

    It sets down what it holds that the task does not name, takes the task's object when a
    ``take`` offers it and opens what it has not just opened; holding the object (a ``put`` of
    it is offered), it puts it on the task's
    receptacle or uses the task's lamp when they are here, else heads for the named place
    (or the road toward the task's direction); otherwise it goes to a place it has not
    visited in its recent steps, at random. For tasks of other families (or objects named
    in more than one word) it only explores."""

    has_weights = False
    TASKS = (  # the task texts of world.tasks.describe it understands
        re.compile(  # pick_and_place, pick_two_and_place (one at a time)
            r"^put (?:a|an|two) (?P<object>(?!clean )\S+) (?:in|on) (?P<receptacle>.+?) "
            r"in the (?P<place>.+?)(?: to the (?P<direction>\w+))?$"
        ),
        re.compile(
            r"^look at (?P<object>.+?) under the (?P<lamp>.+?) "
            r"in the (?P<place>.+?)(?: to the (?P<direction>\w+))?$"
        ),
    )

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.version = "explorer"

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        task, recent = prompt_task_and_actions(prompt)
        goal = next((m.groupdict() for p in self.TASKS if (m := p.match(task))), {})
        actions = list(admissible)
        action = self._choose(goal, actions, recent)
        k = actions.index(action)
        return Decision(k, action, prompt, rank_completion(k + 1, action))

    def _choose(self, goal: dict[str, Any], admissible: list[str], recent: list[str]) -> str:
        thing = goal.get("object")
        if thing is not None:
            puts = [a for a in admissible if a.startswith(f"put {thing} ")]
            if puts:  # holding it
                if goal.get("receptacle"):
                    onto = [a for a in puts if a.endswith(f" {goal['receptacle']}")]
                    if onto:
                        return onto[0]
                lamp = f"use {goal['lamp']}" if goal.get("lamp") else None
                if lamp is not None and lamp in admissible and recent[-1:] != [lamp]:
                    return lamp  # not twice in a row: using it again turns it off
                if f"go to {goal['place']}" in admissible:
                    return f"go to {goal['place']}"
                road = f"go to {goal['direction']} road" if goal.get("direction") else None
                return self._explore(admissible, recent, road)
            # hands hold only so much (the world's carrying capacity): set down what the task
            # does not need, or a full pair of hands is never offered the task's object
            others = [a for a in admissible if a.startswith("put ")]  # not the task's object
            if others:
                return others[0]
            takes = [a for a in admissible if a.startswith(f"take {thing} ")]
            if takes:
                return takes[0]
        opens = [a for a in admissible if a.startswith("open ") and a not in recent]
        if opens:
            return opens[0]
        return self._explore(admissible, recent, None)

    def _explore(self, admissible: list[str], recent: list[str], toward: str | None) -> str:
        if toward is not None and toward in admissible and toward not in recent[-2:]:
            return toward
        moves = [a for a in admissible if a.startswith("go to ")]
        fresh = [a for a in moves if a not in recent]
        rooms = [a for a in fresh if not a.endswith(" road")]
        pool = rooms or fresh or moves or admissible
        return pool[int(self.rng.integers(len(pool)))]

    def reload(self, path: Path, version: str) -> None:
        """The explorer has no weights."""


class ExpertPolicy:
    """Follows the server's oracle hints (needs a trainer or admin token)."""

    has_weights = False

    def __init__(self, expert_client: BigWorldClient) -> None:
        self.client = expert_client
        self.version = "expert"

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        hint = self.client.expert(episode_id)
        action = hint.get("action")
        if not isinstance(action, str) or action not in admissible:
            return Decision(0, admissible[0], prompt, "", True, f"expert gave {action!r}")
        k = list(admissible).index(action)
        return Decision(k, action, prompt, rank_completion(k + 1, action))

    def reload(self, path: Path, version: str) -> None:
        """The expert has no weights."""


class _Wrapping:
    """A policy around a model (or another policy): its version and reloads are the model's."""

    model: Any  # a LanguageModel, or a Policy

    @property
    def version(self) -> str:
        return self.model.version

    def reload(self, path: Path, version: str) -> None:
        self.model.reload(path, version)


class GuidedPolicy(_Wrapping):
    """A model's policy that follows the oracle's hints in every ``every``-th episode.

    For tests and throughput benchmarks with untrained models, which never finish a task on
    their own (so every group of rollouts fails alike and carries no signal). Guided steps
    carry the model's version and the rank completion of the oracle's action, so the trainer
    scores them like any rollout; this is not how a policy's success should be measured."""

    has_weights = True

    def __init__(self, model: Policy, expert: ExpertPolicy, every: int = 2) -> None:
        if every < 1:
            raise ValueError(f"expected every >= 1, got {every}")
        self.model, self.expert, self.every = model, expert, every
        self.episodes = 0
        self._current: int | str | None = None

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        if episode_id != self._current:
            self._current, self.episodes = episode_id, self.episodes + 1
        if self.episodes % self.every == 0:
            return self.expert.decide(episode_id, prompt, admissible)
        return self.model.decide(episode_id, prompt, admissible)


class ModelPolicy(_Wrapping):
    """A language model in ``rank`` mode (sample from the softmax of each action's
    log-likelihood) or ``generate`` mode (free text ending in ``\\boxed{k}``)."""

    has_weights = True

    def __init__(
        self, model: LanguageModel, mode: str = "rank", sampling: Sampling | None = None
    ) -> None:
        if mode not in DECODING_MODES:
            raise ValueError(f"expected mode in {DECODING_MODES}, got {mode!r}")
        self.model, self.mode, self.sampling = model, mode, sampling or Sampling()
        self.rng = np.random.default_rng(self.sampling.seed)
        self.calls = 0

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        self.calls += 1
        if self.mode == "rank":
            completions = [rank_completion(k + 1, a) for k, a in enumerate(admissible)]
            scores = self.model.score(prompt, completions)
            temperature = self.sampling.temperature
            k, _ = softmax_sample(scores, temperature, float(self.rng.random()))
            return Decision(
                k, admissible[k], prompt, completions[k], False, "", "rank", temperature
            )
        sampling = Sampling(
            self.sampling.temperature, self.sampling.max_new_tokens, self.sampling.seed + self.calls
        )
        answer = self.model.generate([prompt], sampling)[0]
        parsed = parse_choice(answer.text, len(admissible))
        failed, k = parsed.value is None, parsed.value or 0  # unparsed: the first, flagged
        return Decision(
            k,
            admissible[k],
            prompt,
            answer.text,
            failed,
            parsed.reason,
            "generate",
            sampling.temperature,
            answer.token_ids,
        )


@dataclass
class RunnerConfig:
    """How a policy runner behaves (``agent run`` sets it from its flags)."""

    # Ask for tasks of this family. When none can be made near the avatar (409 no_task: it
    # wandered where the family has nothing, say no lamps), one episode of any family is
    # played instead, which moves the avatar on rather than leaving the runner stuck.
    family: str | None = None
    # Play this task spec ({"family", "params"}, as GET /v1/tasks lists it) instead of
    # drawing one: what a paired evaluation or an exact group needs in each of its forks.
    task: Record | None = None
    poll_s: float = 5.0  # how often to look for a newer policy version
    follow_versions: bool = True  # reload newly registered versions (False: keep these weights)
    max_episodes: int | None = None  # stop after this many (None: run until stopped)
    reconnect_max_s: float = 30.0  # longest wait between reconnection attempts
    kind: str = "policy"
    step_interval_s: float = 0.0  # at least this long from one step's request to the next


@dataclass
class RunnerStats:
    episodes: int = 0
    steps: int = 0
    successes: int = 0
    reloads: int = 0
    reconnects: int = 0
    parse_failures: int = 0
    versions: set[str] = field(default_factory=set)
    model_s: float = 0.0  # wall seconds spent choosing actions
    server_s: float = 0.0  # wall seconds spent waiting for step answers


class PolicyRunner:
    """Plays episodes until ``stop`` is set; abandons the open episode when stopped."""

    def __init__(
        self, client: BigWorldClient, policy: Policy, config: RunnerConfig | None = None
    ) -> None:
        self.client, self.policy, self.config = client, policy, config or RunnerConfig()
        self.stop = threading.Event()
        self.stats = RunnerStats()
        self.open_episode: Id | None = None  # begun (or resumed) and not yet seen to end
        self._last_sent = -math.inf  # time.monotonic() of the last step's request
        self.watcher = (
            VersionWatcher(client, self.config.kind, policy, self.config.poll_s)
            if policy.has_weights and self.config.follow_versions
            else None
        )

    # -- resilience --------------------------------------------------------------------------
    def _patiently(self, call: Callable[[], T]) -> T:
        """Run ``call`` until the server answers, backing off while it is unreachable."""
        delay = 0.2
        while True:
            try:
                return call()
            except UnreachableError as exc:
                if self.stop.is_set():
                    raise
                self.stats.reconnects += 1
                log.warning("server unreachable (%s); retrying in %.1fs", exc, delay)
                self.stop.wait(delay)
                delay = min(self.config.reconnect_max_s, delay * 2)

    # -- episodes ----------------------------------------------------------------------------
    def _begin(self) -> tuple[EpisodeStarted, int, list[Turn]]:
        """Begin an episode; after a crash of this runner, resume the one it left open."""
        try:
            return begin_near(self.client, self.config.family, self.config.task)[0], 0, []
        except ConflictError as exc:
            open_id = (
                (exc.details or {}).get("episode_id") if isinstance(exc.details, dict) else None
            )
            if open_id is None:
                raise
            start, steps = self.client.resume(open_id)
            return start, len(steps), [Turn(s["action"], s["observation"]) for s in steps]

    def play_episode(self) -> Record | None:
        start, done_steps, history = self._patiently(self._begin)
        self.open_episode = start.episode_id
        task_text, observation, admissible = (
            start.task.text,
            start.observation,
            start.admissible_actions,
        )
        index = done_steps
        while True:
            if self.stop.is_set():
                self._patiently(lambda: self._abandon(start.episode_id))
                return None
            if self.watcher is not None:
                self.stats.reloads += self.watcher.check()
            prompt = policy_prompt(task_text, history, observation, admissible)
            thinking = time.perf_counter()
            decision = self.policy.decide(start.episode_id, prompt, admissible)
            self.stats.model_s += time.perf_counter() - thinking
            index += 1
            record = self._record(decision)
            if self._pace():
                continue  # stopped while waiting: abandoned at the top of the loop
            try:
                sending = time.perf_counter()
                result = self._patiently(
                    partial(
                        self.client.step, start.episode_id, index, decision.action, record=record
                    )
                )
            except ConflictError as exc:  # ended under us (idle timeout): start afresh
                log.warning("episode %s ended under us: %s", start.episode_id, exc)
                self.open_episode = None
                return None
            self.stats.server_s += time.perf_counter() - sending
            self.stats.steps += 1
            history.append(Turn(decision.action, result.observation))
            observation, admissible = result.observation, result.admissible_actions
            if result.done:
                self.open_episode = None
                self.stats.episodes += 1
                self.stats.successes += bool(result.success)
                return {"episode_id": start.episode_id, "success": result.success, "steps": index}

    def _record(self, decision: Decision) -> Record:
        """What a step sends besides its index and action (the trainer reads it back), counted
        in the stats."""
        self.stats.parse_failures += decision.parse_failed
        self.stats.versions.add(self.policy.version)
        return {
            "policy_version": self.policy.version,
            "prompt": decision.prompt,
            "completion": decision.completion,
            "parse_failed": decision.parse_failed,
            # how the model chose, so that the trainer scores the distribution that sampled
            **(
                {"mode": decision.mode, "temperature": decision.temperature}
                if decision.mode
                else {}
            ),
            **sent_ids(decision.completion_ids),
        }

    def _pace(self) -> bool:
        """Wait until ``step_interval_s`` has passed since the last step's request; True when
        stopped meanwhile."""
        wait = self._last_sent + self.config.step_interval_s - time.monotonic()
        if wait > 0 and self.stop.wait(wait):
            return True
        self._last_sent = time.monotonic()
        return False

    def _abandon(self, episode_id: int | str) -> None:
        try:
            self.client.abandon(episode_id)
        except ConflictError:
            pass  # already ended
        self.open_episode = None

    def run(self) -> RunnerStats:
        while not self.stop.is_set():
            if (
                self.config.max_episodes is not None
                and self.stats.episodes >= self.config.max_episodes
            ):
                break
            try:
                self.play_episode()
            except UnreachableError:
                if self.stop.is_set():
                    break
            except (AuthenticationError, ForbiddenError):
                raise  # a token revoked or of the wrong role: no retry will change that
            except ClientError as exc:
                log.error("episode failed: %s", exc)
                self.stop.wait(1.0)
        # Stopped after an error left an episode open (the next begin would have resumed it).
        if self.open_episode is not None:
            with contextlib.suppress(ClientError):
                self._abandon(self.open_episode)
        return self.stats


def begin_near(
    client: BigWorldClient, family: str | None, task: Record | None = None
) -> tuple[EpisodeStarted, bool]:
    """An episode of ``family`` (or ``task``), and True; when the world has no task of the
    family near the avatar, one of any family, which moves the avatar on, and False."""
    try:
        return client.begin_episode(family=family, task=task), True
    except ConflictError as exc:
        if exc.code != ErrorCode.NO_TASK or family is None:
            raise
        log.warning("no %s task near the avatar now; playing one of any family", family)
        return client.begin_episode(), False


def episodes_at_once(limit: int, at_once: int | None) -> int:
    """How many episodes a fleet holds open: as many as its agent may (``limit``), or
    ``at_once`` if fewer, and never more than one batch of steps."""
    return min(limit, at_once or MAX_BATCH_STEPS, MAX_BATCH_STEPS)


@dataclass
class OpenEpisode:
    """An episode a fleet holds open (:class:`FleetRunner`, the TRL rollouts), as far as it
    has been played: its steps taken (``history``) and what the last one answered."""

    start: EpisodeStarted  # as begun, or as resumed (then with its latest observation)
    history: list[Turn] = field(default_factory=list)
    observation: str = field(init=False)
    admissible: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.observation, self.admissible = self.start.observation, self.start.admissible_actions

    def prompt(self) -> str:
        """The policy's prompt for its next step."""
        return policy_prompt(self.start.task.text, self.history, self.observation, self.admissible)

    def answered(self, action: str, answer: StepOut) -> None:
        """Keep a step taken and what it answered."""
        self.history.append(Turn(action, answer.observation))
        self.observation, self.admissible = answer.observation, answer.admissible_actions


class FleetRunner(PolicyRunner):
    """Plays many episodes at once as one policy agent: as many as the agent may hold open
    (``max_open_episodes``, which an admin sets), or ``at_once`` if fewer. Each turn it asks
    the policy for every open episode's next action and sends them all in one
    ``POST /v1/steps``; an episode that ends is replaced by a new one. It takes up the agent's
    open episodes when it starts (after a crash) and abandons them when stopped."""

    def __init__(
        self,
        client: BigWorldClient,
        policy: Policy,
        config: RunnerConfig | None = None,
        at_once: int | None = None,
    ) -> None:
        super().__init__(client, policy, config)
        self.at_once = at_once
        self.playing: dict[Id, OpenEpisode] = {}

    def run(self) -> RunnerStats:
        me = self._patiently(self.client.me)
        size = episodes_at_once(me.max_open_episodes, self.at_once)
        for episode in self._patiently(
            lambda: list(self.client.episodes(agent=me.id, status="open"))
        ):
            start, steps = self._patiently(partial(self.client.resume, episode["id"]))
            history = [Turn(s["action"], s["observation"]) for s in steps]
            self.playing[start.episode_id] = OpenEpisode(start, history)
        try:
            while not self.stop.is_set():
                self._fill(size)
                if not self.playing or self._pace():
                    break
                self._turn()
        finally:
            for episode_id in list(self.playing):
                with contextlib.suppress(ClientError):
                    self._abandon(episode_id)
                self.playing.pop(episode_id, None)
        return self.stats

    def _fill(self, size: int) -> None:
        """Begin episodes until ``size`` are open, or as many as ``max_episodes`` leaves."""
        cap = self.config.max_episodes
        while len(self.playing) < size and (
            cap is None or self.stats.episodes + len(self.playing) < cap
        ):
            try:
                start, _, history = self._patiently(self._begin)
            except ClientError as exc:
                if exc.code != ErrorCode.OPEN_EPISODE_LIMIT:
                    raise
                log.warning("the agent holds its limit of open episodes elsewhere: %s", exc)
                return
            self.playing[start.episode_id] = OpenEpisode(start, history)

    def _turn(self) -> None:
        """A step of every open episode, sent as one batch."""
        if self.watcher is not None:
            self.stats.reloads += self.watcher.check()
        steps = []
        thinking = time.perf_counter()
        for episode_id, playing in self.playing.items():
            decision = self.policy.decide(episode_id, playing.prompt(), playing.admissible)
            steps.append(
                {
                    **self._record(decision),
                    "episode_id": episode_id,
                    "step": len(playing.history) + 1,
                    "action": decision.action,
                }
            )
        self.stats.model_s += time.perf_counter() - thinking
        sending = time.perf_counter()
        answers = self._patiently(partial(self.client.step_many, steps))
        self.stats.server_s += time.perf_counter() - sending
        for sent, answer in zip(steps, answers, strict=True):
            playing = self.playing[sent["episode_id"]]
            if isinstance(answer, ClientError):  # ended under us (idle timeout), or refused
                log.warning("episode %s step refused: %s", sent["episode_id"], answer)
                del self.playing[sent["episode_id"]]
                with contextlib.suppress(ClientError):  # its slot of max_open_episodes
                    self._abandon(sent["episode_id"])
                continue
            self.stats.steps += 1
            playing.answered(sent["action"], answer)
            if answer.done:
                del self.playing[sent["episode_id"]]
                self.stats.episodes += 1
                self.stats.successes += bool(answer.success)
