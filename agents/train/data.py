"""What the trainer reads from the server: ended episodes, followed with a cursor, as samples.

The feed follows ``episode_ended`` events (``GET /v1/events?kind=episode_ended``, keyset cursor
= the last event id read), fetches each episode with its steps and judgments
(``GET /v1/episodes/{id}``) and turns it into an :class:`Episode` once every step carries the m
judgments the trainer waits for. Nothing here touches the database: a trainer on another
machine reads the same history and resumes from its saved cursor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agents.prompts import VERDICTS, rank_completion, reward_prompt, verdict_completion
from agents.train.learner import Choice
from agents.train.rewards import Rollout

Record = dict[str, Any]
ENDED = ("succeeded", "failed", "abandoned")
SCRIPTED_VERSIONS = frozenset({"expert", "explorer", "random", ""})  # steps no model produced


class HistorySource(Protocol):
    """The part of :class:`agents.client.BigWorldClient` the trainer reads with."""

    def events(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]: ...

    def episode(self, episode_id: int | str) -> Record: ...

    def episodes(self, *, page_size: int | None = None, **filters: Any) -> Iterator[Record]: ...


@dataclass(frozen=True)
class Vote:
    vote: int  # 0-based vote number j
    score: int  # S_ij: +1, −1, or 0 when the reward model's answer did not parse
    rationale: str  # the reward model's whole answer (its training completion)
    model_version: str
    mode: str | None = None  # rank | generate, as the judge recorded it
    temperature: float | None = None
    completion_ids: tuple[int, ...] | None = None  # a generated answer's ids, when recorded


@dataclass(frozen=True)
class StepText:
    """One step's texts: the policy's prompt and completion, and what followed."""

    step: int  # 1-based
    prompt: str
    completion: str
    policy_version: str
    action: str
    observation: str  # the observation that followed the action
    votes: tuple[Vote, ...] = ()
    admissible: tuple[str, ...] = ()  # the actions the policy chose among at this step
    mode: str | None = None  # rank | generate, as the policy recorded it
    temperature: float | None = None  # the temperature it sampled at
    parse_failed: bool = False
    completion_ids: tuple[int, ...] | None = None  # a generated answer's ids, when recorded

    @property
    def choice(self) -> Choice | None:
        """The step as a rank-mode decision (None when its action was not on the list)."""
        if self.action not in self.admissible:
            return None
        candidates = tuple(rank_completion(k + 1, a) for k, a in enumerate(self.admissible))
        return Choice(self.prompt, candidates, self.admissible.index(self.action))

    @property
    def reward_prompt(self) -> str:
        return reward_prompt(self.prompt, self.completion, self.action, self.observation)

    @property
    def decoding(self) -> tuple[str, float]:
        """How the policy chose: its recorded mode and temperature. A client that recorded
        neither is taken as rank mode at temperature 1 when its completion is the chosen
        action's rank completion, else as generate mode at temperature 1."""
        if self.mode is not None:
            return self.mode, 1.0 if self.temperature is None else self.temperature
        choice = self.choice
        ranked = choice is not None and choice.candidates[choice.chosen] == self.completion
        return ("rank" if ranked else "generate"), 1.0


def verdict_choice(prompt: str, verdict: int) -> Choice:
    """A step labelled ``verdict`` (±1) as a rank-mode decision between the judge's verdicts."""
    if isinstance(verdict, bool) or verdict not in VERDICTS:
        raise ValueError(f"expected a verdict in {VERDICTS}, got {verdict!r}")
    return Choice(prompt, tuple(verdict_completion(v) for v in VERDICTS), VERDICTS.index(verdict))


def write_labelled_steps(path: Path, steps: Iterable[Choice]) -> int:
    """Labelled steps as JSON lines, ``{"prompt": a reward prompt, "verdict": 1 or -1}``
    (what ``TrainConfig.reward_anchor`` reads); returns how many."""
    lines = [json.dumps({"prompt": c.prompt, "verdict": VERDICTS[c.chosen]}) for c in steps]
    path.write_text("".join(line + "\n" for line in lines))
    return len(lines)


def read_labelled_steps(path: Path) -> list[Choice]:
    """The labelled steps of :func:`write_labelled_steps`' file; a line that is not one names
    its number."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            row = json.loads(line)
            out.append(verdict_choice(str(row["prompt"]), row["verdict"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}, line {number}: expected a labelled step ({exc})") from exc
    if not out:
        raise ValueError(f"{path}: no labelled steps")
    return out


def vote_choice(vote: Vote) -> tuple[tuple[str, ...], int] | None:
    """A rank-mode vote as a decision between the verdicts: (candidates, chosen), or None."""
    if vote.mode != "rank" or vote.score not in VERDICTS:
        return None
    return tuple(verdict_completion(v) for v in VERDICTS), VERDICTS.index(vote.score)


@dataclass(frozen=True)
class Episode:
    rollout: Rollout
    steps: tuple[StepText, ...]


class NotReady(Exception):
    """Raised when an ended episode still lacks some of the judgments the trainer waits for."""


def _ids(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(i) for i in value)


def episode_from_detail(detail: Record, *, votes: int, use_votes: bool) -> Episode | None:
    """The trainer's view of ``GET /v1/episodes/{id}``; None when it cannot be learned from
    (still open, no steps, or steps without the policy's prompt and completion).

    Raises :class:`NotReady` when ``use_votes`` and a step has fewer than ``votes`` judgments.
    """
    if detail.get("status") not in ENDED or detail.get("outcome") is None:
        return None
    raw_steps = sorted(detail.get("steps") or (), key=lambda s: s["step"])
    if not raw_steps or any(not s.get("prompt") or s.get("completion") is None for s in raw_steps):
        return None
    by_step: dict[int, dict[int, Vote]] = {}
    for j in detail.get("judgments") or ():
        vote = Vote(
            int(j.get("vote", 0)),
            int(j["score"]),
            j.get("rationale") or "",
            j["model_version"],
            j.get("mode"),
            j.get("temperature"),
            _ids(j.get("completion_ids")),
        )
        by_step.setdefault(int(j["step"]), {}).setdefault(vote.vote, vote)
    steps = []
    # the list a step chose among: the one answered at begin, then each previous step's
    offered = [detail.get("admissible_actions") or ()] + [
        s.get("admissible_actions") or () for s in raw_steps
    ]
    for s, admissible in zip(raw_steps, offered, strict=False):
        chosen = tuple(sorted(by_step.get(s["step"], {}).values(), key=lambda v: v.vote))[:votes]
        if use_votes and len(chosen) < votes:
            raise NotReady(f"step {s['step']} has {len(chosen)} of {votes} judgments")
        steps.append(
            StepText(
                step=int(s["step"]),
                prompt=s["prompt"],
                completion=s["completion"],
                policy_version=str(s.get("policy_version") or ""),
                action=s["action"],
                observation=s["observation"],
                votes=chosen if use_votes else (),
                admissible=tuple(admissible),
                mode=s.get("mode"),
                temperature=s.get("temperature"),
                parse_failed=bool(s.get("parse_failed")),
                completion_ids=_ids(s.get("completion_ids")),
            )
        )
    task = detail.get("task") or {}
    rollout = Rollout(
        episode_id=int(detail["id"]),
        task_id=str(task.get("id", "")),
        family=str(detail.get("family") or task.get("family", "")),
        # the version that began the episode names it; a mid-episode switch keeps per-step
        # versions for the log-ratio but does not split the group
        policy_version=steps[0].policy_version,
        outcome=1 if detail["outcome"] > 0 else -1,
        steps=len(steps),
        votes=tuple(tuple(v.score for v in s.votes) for s in steps) if use_votes else (),
        start_distance=detail.get("distance"),
    )
    return Episode(rollout, tuple(steps))


class EpisodeFeed:
    """Follows ended episodes from ``cursor`` on; episodes waiting for judgments are retried
    until ``wait_s`` after they were first seen. ``now`` is a clock in seconds."""

    def __init__(
        self,
        source: HistorySource,
        *,
        votes: int,
        use_votes: bool,
        include_abandoned: bool,
        wait_s: float,
        now: Callable[[], float],
        cursor: str | None = None,
        pending: dict[int, float] | None = None,
    ) -> None:
        self.source, self.votes, self.use_votes = source, votes, use_votes
        self.include_abandoned, self.wait_s, self.now = include_abandoned, wait_s, now
        self.cursor = cursor
        self.pending: dict[int, float] = dict(pending or {})  # episode id → first seen
        self.dropped = 0  # episodes given up on (never judged in time, or not learnable)

    def follow(self) -> int:
        """Read newly ended episodes' ids after the cursor; returns how many were new."""
        new = 0
        filters: dict[str, Any] = {"kind": "episode_ended", "cursor": self.cursor}
        for event in self.source.events(**{k: v for k, v in filters.items() if v is not None}):
            self.cursor = str(event["id"])
            payload = event.get("payload") or {}
            if payload.get("status") == "abandoned" and not self.include_abandoned:
                continue
            episode_id = payload.get("episode_id")
            if episode_id is not None and int(episode_id) not in self.pending:
                self.pending[int(episode_id)] = self.now()
                new += 1
        return new

    def ready(self) -> list[Episode]:
        """Pending episodes that can be learned from now (each returned once). One listing of
        the episodes still short of m judgments spares fetching those again and again; it
        starts at the oldest pending episode, so it stays as long as ``wait_s`` of episodes
        however far the judges fall behind."""
        short: set[int] = set()
        if self.use_votes and self.pending:
            oldest = str(min(self.pending) - 1)  # the cursor: ids after it
            listed = self.source.episodes(needs_votes=self.votes, cursor=oldest)
            short = {int(row["id"]) for row in listed}
        out = []
        for episode_id, seen in sorted(self.pending.items()):
            try:
                if episode_id in short:
                    raise NotReady(f"episode {episode_id} is listed short of judgments")
                episode = episode_from_detail(
                    self.source.episode(episode_id), votes=self.votes, use_votes=self.use_votes
                )
            except NotReady:
                if self.now() - seen > self.wait_s:
                    del self.pending[episode_id]
                    self.dropped += 1
                continue
            del self.pending[episode_id]
            if episode is None:
                self.dropped += 1
            else:
                out.append(episode)
        return out


def expert_steps(source: HistorySource, *, limit: int, agent: int | None = None) -> list[StepText]:
    """Steps of successful oracle-played episodes (policy version "expert"), in id order,
    from at most ``limit`` episodes: the warm start's demonstrations."""
    out: list[StepText] = []
    seen = 0
    filters: dict[str, Any] = {"status": "succeeded"}
    if agent is not None:
        filters["agent"] = agent
    for row in source.episodes(**filters):
        if seen >= limit:
            break
        episode = episode_from_detail(source.episode(row["id"]), votes=0, use_votes=False)
        if episode is None or any(s.policy_version != "expert" for s in episode.steps):
            continue
        seen += 1
        out.extend(episode.steps)
    return out
