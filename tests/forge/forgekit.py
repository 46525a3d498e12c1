"""Helpers for the forge's pure tests: an in-memory world with an avatar, tasks sampled in
it, and rollout histories of simulated policies whose accuracy per task is known."""

from __future__ import annotations

from forge.critic import Rollout
from forge.pool import PoolTask
from world import sampling, tasks
from world.state import MemoryBackend, World

AVATAR = "ann"


def fresh_world(seed: int = 3) -> World:
    backend = MemoryBackend(seed)
    world = World(backend)
    world.add_avatar(AVATAR, "Ann")
    world.commit()
    return World(backend)


def sample(world: World, family: str, key: str = "k") -> tasks.Task:
    return sampling.sample_task(world, AVATAR, key=key, family=family)


def pooled(task: tasks.Task, **fields: object) -> PoolTask:
    return PoolTask(task.id, task.family, task.params, **fields)  # type: ignore[arg-type]


def rollouts(
    task_id: str,
    accuracy: float,
    n: int,
    *,
    start: int = 1,
    version: str = "v1",
    avatar: str = AVATAR,
) -> list[Rollout]:
    """``n`` ended rollouts, newest first, of a policy whose accuracy on the task is exactly
    ``accuracy`` (round(accuracy * n) successes, spread evenly)."""
    wins = round(accuracy * n)
    made = []
    for i in range(n):
        success = (i * wins) // n != ((i + 1) * wins) // n
        made.append(Rollout(start + i, task_id, avatar, success, version, 10, 100 + i))
    return made[::-1]
