"""The reward agent: judges every step of finished episodes, m times each.

For each step it shows the reward model the policy's prompt, the policy's answer and the next
observation. In ``generate`` mode the model reasons and answers ``\\boxed{1}`` or
``\\boxed{-1}`` (unparseable answers count 0), a batch of steps in one call, m answers per
step. In ``rank`` mode, for tiny models that cannot keep up generating, it scores the two
verdicts after the prompt (one forward pass per step) and draws the m votes from their softmax.
Judgments carry their vote number, so resending them after a lost answer or a crash stores
nothing twice, and a model's judgments carry the mode and temperature that produced them.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from agents import prompts
from agents.backends import DECODING_MODES, LanguageModel, Sampling, sent_ids, softmax_sample
from agents.client import BigWorldClient, Record
from agents.errors import (
    AuthenticationError,
    ClientError,
    ForbiddenError,
    NotFoundError,
    UnreachableError,
)
from agents.versions import VersionWatcher

log = logging.getLogger("bigworld.reward")


@dataclass(frozen=True)
class Vote:
    score: int  # +1, -1, or 0 when the answer could not be parsed
    rationale: str
    # How a model produced the vote, stored with the judgment so that votes drawn by
    # different decodings are told apart; None for a scripted judge.
    mode: str | None = None
    temperature: float | None = None
    completion_ids: tuple[int, ...] | None = None  # generate mode: the ids sampled


class Judge(Protocol):
    version: str
    has_weights: bool  # False: scripted; new registered versions do not concern it

    def judge(self, episode: Record, steps: Sequence[Record], votes: int) -> list[list[Vote]]:
        """``votes`` votes for each of ``steps`` (steps of ``episode``), in their order."""
        ...

    def reload(self, path: Path, version: str) -> None: ...


class ModelJudge:
    """A reward model in ``generate`` mode (m sampled answers per step, parsed) or ``rank``
    mode (m verdicts drawn from softmax(scores / T) of the two verdict completions)."""

    has_weights = True

    def __init__(
        self,
        model: LanguageModel,
        sampling: Sampling | None = None,
        mode: str = "generate",
    ) -> None:
        if mode not in DECODING_MODES:
            raise ValueError(f"expected mode in {DECODING_MODES}, got {mode!r}")
        self.model, self.mode = model, mode
        self.sampling = sampling or Sampling(temperature=1.0, max_new_tokens=48)

    @property
    def version(self) -> str:
        return self.model.version

    def reload(self, path: Path, version: str) -> None:
        self.model.reload(path, version)

    def judge(self, episode: Record, steps: Sequence[Record], votes: int) -> list[list[Vote]]:
        texts = [
            prompts.reward_prompt(
                step.get("prompt") or "",
                step.get("completion") or "",
                step["action"],
                step["observation"],
            )
            for step in steps
        ]
        if self.mode == "rank":
            return [
                self._rank(episode, step, text, votes)
                for step, text in zip(steps, texts, strict=True)
            ]
        sampling = replace(self.sampling, seed=self.sampling.seed + steps[0]["step"], n=votes)
        answers = self.model.generate(texts, sampling)
        temperature = float(self.sampling.temperature)  # the schema takes a float
        return [
            [
                Vote(
                    prompts.parse_judgment(a.text).value or 0,
                    a.text,
                    "generate",
                    temperature,
                    a.token_ids,
                )
                for a in answers[i : i + votes]
            ]
            for i in range(0, len(answers), votes)
        ]

    def _rank(self, episode: Record, step: Record, text: str, votes: int) -> list[Vote]:
        """One scoring call for the step, then one draw per vote. Each draw depends only on
        (seed, episode, step, vote), so a resent or re-judged step gets the same votes
        whatever the batching, while the m votes of a step are independent."""
        candidates = [prompts.verdict_completion(v) for v in prompts.VERDICTS]
        scores = self.model.score(text, candidates)
        temperature = float(self.sampling.temperature)
        out = []
        for j in range(votes):
            draw = _unit("rank", self.sampling.seed, episode["id"], step["step"], j)
            k, _ = softmax_sample(scores, temperature, draw)
            # The rationale is the verdict's completion itself: the text the trainer scores.
            out.append(Vote(prompts.VERDICTS[k], candidates[k], "rank", temperature))
        return out


class HeuristicJudge:
    """Judges by the oracle's plan distance recorded with each step: a step is good when it
    brought the goal closer (or reached it). ``noise`` flips votes, deterministically, to
    stand in for an imperfect reward model in tests and baselines."""

    has_weights = False

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.noise, self.seed = noise, seed
        self.version = f"heuristic-{noise:g}"

    def reload(self, path: Path, version: str) -> None:
        """No weights."""

    def judge(self, episode: Record, steps: Sequence[Record], votes: int) -> list[list[Vote]]:
        return [self._votes(episode, step, votes) for step in steps]

    def _votes(self, episode: Record, step: Record, votes: int) -> list[Vote]:
        before, after = step.get("distance_before"), step.get("distance")
        if step.get("success"):
            score, why = 1, "the goal holds after this step"
        elif before is None or after is None:
            score, why = 0, "no oracle distance recorded for this step"
        elif after < before:
            score, why = 1, f"the plan to the goal shrank from {before} to {after} steps"
        else:
            score, why = -1, f"the plan to the goal went from {before} to {after} steps"
        out = []
        for j in range(votes):
            flip = score != 0 and _unit(self.seed, episode["id"], step["step"], j) < self.noise
            final = -score if flip else score
            out.append(Vote(final, f"{why}. \\boxed{{{final}}}" if final else why))
        return out


RATIONALE_CHARS = 2000  # a rationale is stored up to this many characters


def _judgment(step: int, vote: int, v: Vote, version: str) -> Record:
    """The judgment posted for vote ``vote`` on ``step``; a model's names its mode and
    temperature (a scripted judge's has neither)."""
    body: Record = {
        "step": step,
        "vote": vote,
        "score": v.score,
        "rationale": v.rationale[:RATIONALE_CHARS],
        "model_version": version,
    }
    if v.mode is not None:
        body.update(mode=v.mode, temperature=v.temperature)
    body.update(sent_ids(v.completion_ids))  # what was sampled, even where the text is cut
    return body


def _unit(*key: object) -> float:
    """A uniform draw in [0, 1) that depends only on ``key``."""
    digest = hashlib.blake2b("\x1f".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


@dataclass
class RewardConfig:
    votes: int = 3  # m: judgments per step
    batch_steps: int = 8  # steps judged in one call of the judge (and stored in one request)
    relist_s: float = 10.0  # look again for newly ended episodes after judging this long
    # episode ids behind the newest one listed that are still looked at: a judge that falls
    # further behind leaves the older ones unjudged rather than list them all again each time
    backlog: int = 1000
    poll_s: float = 1.0  # wait between looks for unjudged episodes
    reload_poll_s: float = 5.0


class RewardRunner:
    """Judges finished episodes that lack judgments until ``stop`` is set."""

    def __init__(
        self, client: BigWorldClient, judge: Judge, config: RewardConfig | None = None
    ) -> None:
        self.client, self.judge, self.config = client, judge, config or RewardConfig()
        self.stop = threading.Event()
        self.newest = 0  # the newest episode id listed short of votes so far
        self.watcher = (
            VersionWatcher(client, "reward", judge, self.config.reload_poll_s)
            if judge.has_weights
            else None
        )
        self.judged_episodes = 0
        self.judged_steps = 0

    def judge_episode(self, episode_id: int | str) -> int:
        detail = self.client.episode(episode_id)
        have = {(j["step"], j.get("vote", 0)) for j in detail.get("judgments") or ()}
        m = self.config.votes
        due: list[Record] = []
        previous_distance = detail.get("distance")
        for step in detail.get("steps") or ():
            if not all((step["step"], j) in have for j in range(m)):
                due.append({**step, "distance_before": previous_distance})
            previous_distance = step.get("distance")
        posted, size = 0, max(1, self.config.batch_steps)
        for start in range(0, len(due), size):
            batch = due[start : start + size]
            body = [
                _judgment(step["step"], j, v, self.judge.version)
                for step, votes in zip(batch, self.judge.judge(detail, batch, m), strict=True)
                for j, v in enumerate(votes)
                if (step["step"], j) not in have
            ]
            self.client.post_judgments(episode_id, body)
            posted += len(body)
            self.judged_steps += len(batch)
        self.judged_episodes += 1
        return posted

    def run_once(self) -> int:
        """Judge ended episodes with a step short of m votes, newest first, until none is left
        or ``relist_s`` has passed; returns how many. The trainer learns from fresh rollouts,
        so a judge that fell behind (or joined a world with an unjudged past) serves them
        first and works the backlog off while it keeps up. Only the last ``backlog`` episode
        ids before the newest one seen are listed: each listing stays bounded however long
        the world has run."""
        done, listed = 0, time.monotonic()
        cursor = (
            str(self.newest - self.config.backlog) if self.newest > self.config.backlog else None
        )
        rows = list(self.client.episodes(needs_votes=self.config.votes, cursor=cursor))
        self.newest = max([self.newest, *(int(row["id"]) for row in rows)])
        for row in reversed(rows):
            if self.stop.is_set() or time.monotonic() - listed > self.config.relist_s:
                break
            try:
                self.judge_episode(row["id"])
                done += 1
            except NotFoundError:
                continue
        return done

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if self.watcher is not None:
                    self.watcher.check()
                if self.run_once() == 0:
                    self.stop.wait(self.config.poll_s)
            except UnreachableError:
                self.stop.wait(self.config.poll_s)
            except (AuthenticationError, ForbiddenError):
                raise  # a token revoked or of the wrong role: no retry will change that
            except ClientError as exc:
                log.error("judging failed: %s", exc)
                self.stop.wait(self.config.poll_s)
