"""Critic feedback per task (design §8): accuracy over its recent rollouts, per policy version,
the reward model's unanimous −1 votes, and short summaries of where failed rollouts stalled.

Everything here works on plain records (:class:`Rollout`, :class:`StepTrace`) so the server
can build them from its tables and tests can build them by hand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forge.config import ForgeConfig

NOTHING = "Nothing happens."  # the observation of a well-formed but impossible action
LAST_OBSERVATIONS = 2  # observations quoted from the end of a failed rollout
QUOTE_CHARS = 240  # each quoted observation is cut to this many characters


@dataclass(frozen=True)
class Rollout:
    """One ended episode of a task: what the critic counts."""

    episode_id: int
    task_id: str
    avatar_id: str
    success: bool  # outcome +1; failed and abandoned episodes are failures (outcome −1)
    policy_version: str | None  # the version that chose its last step; None if never sent
    steps: int
    end_tick: int
    judged_steps: int = 0  # steps with at least one reward-model vote
    negative_steps: int = 0  # steps where every vote was −1


@dataclass(frozen=True)
class StepTrace:
    """One step of a rollout, for failure summaries."""

    step: int
    action: str
    observation: str
    distance: int | None = None  # oracle plan length after the step, when the server records it


@dataclass(frozen=True)
class Feedback:
    """The critic's view of one task over its most recent ended rollouts (newest first)."""

    task_id: str
    rollouts: int
    successes: int
    by_version: dict[str, dict[str, Any]]
    judged_steps: int
    negative_steps: int
    last_avatar: str | None  # who rolled it out last: the forge plans variants from there
    measured: bool  # at least ``min_rollouts`` rollouts: the accuracy counts

    @property
    def accuracy(self) -> float | None:
        return self.successes / self.rollouts if self.rollouts else None

    def evidence(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "rollouts": self.rollouts,
            "successes": self.successes,
            "by_version": self.by_version,
            "judged_steps": self.judged_steps,
            "negative_steps": self.negative_steps,
            "negative_share": (
                self.negative_steps / self.judged_steps if self.judged_steps else None
            ),
        }


def accuracy(rollouts: Sequence[Rollout]) -> float | None:
    """Successes over rollouts; None when there are none."""
    return sum(r.success for r in rollouts) / len(rollouts) if rollouts else None


def feedback(task_id: str, rollouts: Sequence[Rollout], config: ForgeConfig) -> Feedback:
    """Feedback over the newest ``config.window`` of ``rollouts`` (given newest first)."""
    recent = list(rollouts[: config.window])
    versions: dict[str, list[Rollout]] = {}
    for rollout in recent:
        versions.setdefault(rollout.policy_version or "unknown", []).append(rollout)
    return Feedback(
        task_id=task_id,
        rollouts=len(recent),
        successes=sum(r.success for r in recent),
        by_version={
            version: {"rollouts": len(rs), "accuracy": accuracy(rs)}
            for version, rs in sorted(versions.items())
        },
        judged_steps=sum(r.judged_steps for r in recent),
        negative_steps=sum(r.negative_steps for r in recent),
        last_avatar=recent[0].avatar_id if recent else None,
        measured=len(recent) >= config.min_rollouts,
    )


def failure_summary(trace: Sequence[StepTrace], budget: int | None = None) -> dict[str, Any]:
    """Where one failed rollout stalled: its most repeated action, its longest run of one
    action, how many actions did nothing, the last step that made progress, its last
    observations, and a one-line text saying so."""
    if not trace:
        return {"steps": 0, "text": "ended before any step"}
    actions = Counter(s.action for s in trace)
    action, count = actions.most_common(1)[0]
    run, best_run, run_action = 1, 1, trace[0].action
    for before, after in zip(trace, trace[1:], strict=False):
        run = run + 1 if after.action == before.action else 1
        if run > best_run:
            best_run, run_action = run, after.action
    nothing = sum(s.observation.strip() == NOTHING for s in trace)
    progress = _last_progress(trace)
    last = trace[-1].step
    stalled = f"stalled after step {progress}" if progress < last else "still progressing"
    text = (
        f"{stalled} of {last}{f' (budget {budget})' if budget else ''}; "
        f"'{action}' taken {count} times"
        + (f", {best_run} times in a row ('{run_action}')" if best_run > 2 else "")
        + f"; {nothing} actions did nothing"
    )
    return {
        "steps": last,
        "most_repeated": {"action": action, "times": count},
        "longest_run": {"action": run_action, "times": best_run},
        "nothing_happened": nothing,
        "last_progress_step": progress,
        "distinct_actions": len(actions),
        "last_observations": [s.observation[:QUOTE_CHARS] for s in trace[-LAST_OBSERVATIONS:]],
        "text": text,
    }


def _last_progress(trace: Sequence[StepTrace]) -> int:
    """The last step that brought the oracle's plan length to a new low (when recorded), else
    the last step whose observation had not been seen before in the rollout."""
    if all(s.distance is not None for s in trace):
        best, at = None, 0
        for s in trace:
            if best is None or (s.distance is not None and s.distance < best):
                best, at = s.distance, s.step
        return at
    seen: set[str] = set()
    at = 0
    for s in trace:
        if s.observation not in seen and s.observation.strip() != NOTHING:
            seen.add(s.observation)
            at = s.step
    return at
