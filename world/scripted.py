"""Scripted agents for tests and baselines: uniform random and the oracle follower.

Both speak the policy agents' interface, :class:`Agent`: given the observation text and the
admissible actions, answer one action. Neither uses global randomness or the wall clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from world import oracle, rng
from world.oracle import DEFAULT_BUDGET, Plan
from world.tasks import Task

if TYPE_CHECKING:
    from world.state import World

FALLBACK = "look"  # what the oracle agent does when it has no plan (it changes nothing)


class Agent(Protocol):
    """Anything that picks an action from an observation and the admissible actions."""

    def act(self, observation: str, admissible: tuple[str, ...]) -> str: ...


class RandomAgent:
    """Picks uniformly among the admissible actions; draw ``n`` is keyed by (seed, n)."""

    def __init__(self, seed: int, name: str = "random") -> None:
        self.seed = seed
        self.name = name
        self.count = 0

    def act(self, observation: str, admissible: tuple[str, ...]) -> str:
        if not admissible:
            return FALLBACK
        draw = rng.uniform(self.seed, self.count, f"agent:{self.name}", "act")
        self.count += 1
        return admissible[min(int(draw * len(admissible)), len(admissible) - 1)]


class OracleAgent:
    """Follows the oracle's plan for ``task``, replanning when the world moved under it.

    The agent reads the world it is given (reassign :attr:`world` when a new transaction
    opens one) but never changes it: only the actions it returns do, once the caller steps
    them. It replans when the clock is not where its last action left it (someone else
    acted), when the next planned action is not admissible, or when its plan ran out.
    """

    def __init__(
        self, world: World, task: Task, avatar_id: str, *, budget: int = DEFAULT_BUDGET
    ) -> None:
        self.world = world
        self.task = task
        self.avatar_id = avatar_id
        self.budget = budget
        self.plan: Plan | None = None
        self.replans = 0
        self._queue: list[str] = []
        self._expect_tick: int | None = None

    def replan(self) -> Plan | None:
        self.replans += 1
        self.plan = oracle.plan(self.world, self.task, self.avatar_id, budget=self.budget)
        self._queue = list(self.plan.actions) if self.plan else []
        return self.plan

    @property
    def solvable(self) -> bool:
        """Whether the last plan (made now if none yet) reaches the goal."""
        if self.plan is None and self.replans == 0:
            self.replan()
        return self.plan is not None

    def act(self, observation: str, admissible: tuple[str, ...]) -> str:
        stale = self._expect_tick is not None and self.world.tick != self._expect_tick
        if stale or not self._queue or self._queue[0] not in admissible:
            self.replan()
        if not self._queue or self._queue[0] not in admissible:
            self._expect_tick = None
            return FALLBACK
        self._expect_tick = self.world.tick + 1
        return self._queue.pop(0)
