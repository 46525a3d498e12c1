"""The rules of an episode: how one begins, what a step does to it, and how it ends.

Pure functions over a World (design §4): the server loads an episode's rows, calls these and
writes what they return; nothing here reads a clock or a database. An episode ends with
success the moment its goal holds (outcome +1), with failure when its step budget is spent
(−1), or abandoned (−1) when its agent gives up or leaves it idle. Nothing is reset.

The events logged here are stored in every world already, so their names and payloads are
part of the log's format: ``episode_begun`` and ``goal_check`` are inputs that
:mod:`world.replay` re-applies, ``episode_ended`` is what trainers follow.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from world import engine, tasks
from world.state import World
from world.tasks import Task

OPEN, SUCCEEDED, FAILED, ABANDONED = "open", "succeeded", "failed", "abandoned"
TASK_PROMPT = "\n\nYour task is to: "  # as ALFWorld appends the goal to the first observation


@dataclass(frozen=True)
class Episode:
    """What the rules know of an open episode."""

    id: int
    avatar: str
    task_id: str  # the id of its task's pool row
    family: str
    budget: int  # the steps it may take
    last_step: int  # the steps taken so far (0 before the first)


@dataclass(frozen=True)
class Ending:
    """How an episode ended: its status and outcome."""

    status: str
    outcome: int


@dataclass(frozen=True)
class StepOutcome:
    """What one step did to its episode. ``ending`` is None while the episode stays open."""

    episode: Episode  # the episode after the step (``last_step`` is the step's index)
    result: engine.StepResult
    success: bool
    ending: Ending | None

    @property
    def done(self) -> bool:
        return self.ending is not None

    @property
    def outcome(self) -> int | None:
        return self.ending.outcome if self.ending is not None else None


def begin(
    world: World, avatar: str, task: Task, *, key: str | None, family: str | None, draw: str
) -> engine.Observation:
    """Start an episode of ``task`` where the avatar stands; returns its first observation
    (step 0), the task's text appended. ``key`` is the sampling key of a freshly drawn task
    (None otherwise), ``family`` the family asked for, ``draw`` how the task was chosen."""
    world.emit(
        "episode_begun",
        avatar,
        [f"avatar:{avatar}"],
        {"key": key, "family": family, "task": {"id": task.id, **task.spec()}, "draw": draw},
    )
    seen = _at_decision(world, task, avatar, engine.observe(world, avatar))
    return engine.Observation(seen.text + TASK_PROMPT + task.text, seen.admissible)


def advance(world: World, episode: Episode, task: Task, action: str, index: int) -> StepOutcome:
    """Take step ``index`` (the one after ``episode.last_step``) of an open episode of
    ``task``: apply the action, check the goal, and end the episode when the goal holds or
    the budget is spent. Raises ``ActionError`` for malformed text before anything changes."""
    result = engine.step(world, episode.avatar, action)
    success = tasks.goal_met(world, task, episode.avatar)
    world.emit(
        "goal_check",
        episode.avatar,
        [f"avatar:{episode.avatar}"],
        {
            "episode": episode.id,
            "step": index,
            "task": task.spec(),
            "task_id": episode.task_id,
            "met": success,
        },
    )
    after = replace(episode, last_step=index)
    ending = None
    if success or index >= episode.budget:
        ending = Ending(SUCCEEDED, 1) if success else Ending(FAILED, -1)
        _end(world, after, ending)
    else:
        seen = engine.Observation(result.observation, result.admissible)
        seen = _at_decision(world, task, episode.avatar, seen)
        result = replace(result, observation=seen.text, admissible=seen.admissible)
    return StepOutcome(after, result, success, ending)


def _at_decision(
    world: World, task: Task, avatar: str, seen: engine.Observation
) -> engine.Observation:
    """``seen`` as the task's family shows it at a decision: its signpost after the text (a
    trail's), and the action it leads with listed first (a waymark's), where it has them."""
    guide = tasks.guide(world, task, avatar)
    admissible = seen.admissible
    if guide.lead in admissible:
        admissible = (guide.lead, *(a for a in admissible if a != guide.lead))
    text = seen.text if guide.sign is None else f"{seen.text} {guide.sign}"
    return engine.Observation(text, admissible)


def abandon(world: World, episode: Episode) -> Ending:
    """End an episode its agent gave up on (or left idle too long)."""
    ending = Ending(ABANDONED, -1)
    _end(world, episode, ending)
    return ending


def _end(world: World, episode: Episode, ending: Ending) -> None:
    """Log that ``episode`` ended after ``episode.last_step`` steps (trainers follow these)."""
    world.emit(
        "episode_ended",
        episode.avatar,
        [f"avatar:{episode.avatar}"],
        {
            "episode_id": episode.id,
            "status": ending.status,
            "outcome": ending.outcome,
            "family": episode.family,
            "task_id": episode.task_id,
            "steps": episode.last_step,
        },
    )
