"""A Gymnasium ``Env`` over a bigworld server: episodes in one persistent, never-resetting world.

``reset()`` begins a *new episode* in the same world (abandoning this env's open one first); it
never resets the world. The avatar starts wherever its last episode left it, holding what it
held, and the world's tick only grows.

It passes ``gymnasium.utils.env_checker.check_env``: what identifies a run (the episode id, the
world's tick) is in ``reset``'s info and on the env (:attr:`BigWorldEnv.episode_id`,
:attr:`BigWorldEnv.tick`), never in ``step``'s info, which the checker compares across two
runs of the same seed and action.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from agents.client import BigWorldClient, Id
from agents.errors import ConflictError
from world.schemas import EpisodeStarted, StepOut

# Observations and actions are English text; Gymnasium's default charset is alphanumerics only.
# Observations have line breaks; an action is one line (the server refuses control characters).
OBSERVATION_CHARSET = frozenset(string.printable)
ACTION_CHARSET = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")
MAX_OBSERVATION = 65_536  # characters
MAX_ACTION = 512  # characters; the server answers 422 to longer actions (design §6)


class BigWorldEnv(gym.Env[str, int | str]):
    """One avatar's episodes as a Gymnasium environment.

    Observations are the server's text. An action is an index into the current admissible
    actions (``info["admissible_actions"]``) or the action text itself; the admissible set
    changes every step, so ``action_space`` is the text space and indices are accepted besides.

    ``step`` returns ``reward`` = the episode's outcome (+1 success, -1 failure) on the step
    that ends it and 0 before; ``terminated`` when the goal holds, ``truncated`` when the
    episode ended otherwise (the server's step budget).

    Infos: ``reset`` gives ``episode_id``, ``task``, ``tick`` (the begin tick),
    ``admissible_actions`` and ``step`` 0; ``step`` gives only what the transition decides:
    ``admissible_actions``, ``step``, ``success`` and ``outcome``. The run's ids live on the
    env: ``episode_id`` and ``tick``, the world's tick at the latest answer.

    ``reset(options={"task_id": ..., "family": ...})`` asks for a task; ``family`` given to
    the constructor is the default. ``seed`` only seeds ``np_random`` (the world has its own).
    A ``reset`` before any ``step`` of the open episode, asking for the same task, keeps that
    episode (nothing happened in it; abandoning it would record a failure, outcome -1) and
    returns its start again.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self, client: BigWorldClient, family: str | None = None, render_mode: str | None = None
    ) -> None:
        self.client = client
        self.family = family
        self.render_mode = render_mode
        self.observation_space = spaces.Text(
            MAX_OBSERVATION, min_length=0, charset=OBSERVATION_CHARSET
        )
        self.action_space = spaces.Text(MAX_ACTION, charset=ACTION_CHARSET)
        self.episode_id: Id | None = None
        self.tick: int | None = None  # the world's tick at the latest answer
        self.start: EpisodeStarted | None = None
        self._open = False
        self._asked: tuple[Id | None, str | None] = (None, None)  # the open one's task request
        self._step = 0  # the index of the last acknowledged step; begin is step 0
        self._observation = ""
        self._admissible: list[str] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        asked = (options.get("task_id"), options.get("family", self.family))
        start = self._unplayed(asked)
        if start is None:
            self._abandon_open()
            start = self.start = self.client.begin_episode(task_id=asked[0], family=asked[1])
        self.episode_id, self.tick, self._open, self._step = start.episode_id, start.tick, True, 0
        self._asked = asked
        self._observation, self._admissible = start.observation, start.admissible_actions
        return start.observation, {
            "episode_id": start.episode_id,
            "task": start.task,
            "admissible_actions": list(start.admissible_actions),
            "tick": start.tick,
            "step": 0,
        }

    def step(self, action: int | str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not self._open or self.episode_id is None:
            raise RuntimeError("expected an open episode; call reset() first")
        result = self.client.step(self.episode_id, self._step + 1, self._action_text(action))
        self._step, self._observation, self.tick = result.step, result.observation, result.tick
        self._admissible = result.admissible_actions
        self._open = not result.done
        reward = float(result.outcome or 0.0) if result.done else 0.0
        terminated = result.done and result.success
        truncated = result.done and not result.success
        return result.observation, reward, terminated, truncated, self._info(result)

    def render(self) -> str | None:
        return self._observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Abandon this env's open episode, if any, so the avatar is free for another."""
        self._abandon_open()

    def _action_text(self, action: int | str) -> str:
        if isinstance(action, str):
            return action
        index = int(action)  # numpy integers come from samplers and policies
        if not 0 <= index < len(self._admissible):
            raise ValueError(
                f"expected an action index in [0, {len(self._admissible)}), got {index}"
            )
        return self._admissible[index]

    def _unplayed(self, asked: tuple[Id | None, str | None]) -> EpisodeStarted | None:
        """The open episode's start, if it has had no step, asked for the same task, and is
        still open on the server (which abandons episodes left idle too long)."""
        start = self.start
        if start is None or not (self._open and self._step == 0 and asked == self._asked):
            return None
        return start if self.client.episode(start.episode_id)["status"] == "open" else None

    def _abandon_open(self) -> None:
        if self._open and self.episode_id is not None:
            try:
                self.client.abandon(self.episode_id)
            except ConflictError:
                pass  # already ended: the server closes episodes left idle too long
        self._open = False

    def _info(self, result: StepOut) -> dict[str, Any]:
        # No episode id and no tick: the same seed and action must give the same info.
        return {
            "admissible_actions": list(result.admissible_actions),
            "step": result.step,
            "success": result.success,
            "outcome": result.outcome,
        }
