"""The explorer: a scripted baseline that decides from the policy's prompt alone."""

from __future__ import annotations

import random

from agents.policy_agent import ExplorerPolicy, Policy, RandomPolicy
from agents.prompts import Turn, policy_prompt, prompt_task_and_actions
from world import engine, sampling, tasks
from world.errors import TaskError
from world.state import ORIGIN, MemoryBackend, World

PUT = "put a mug on countertop 1 in the kitchen 2 to the north"
LOOK = "look at book under the desk lamp 1 in the bedroom 1"


def decide(task: str, admissible: list[str], history: tuple[str, ...] = ()) -> str:
    turns = [Turn(a, "You arrive. Nothing happens.") for a in history]
    prompt = policy_prompt(task, turns, "You are in the hall 1.", admissible)
    return ExplorerPolicy(seed=0).decide(1, prompt, admissible).action


def test_the_prompt_gives_back_its_task_and_recent_actions() -> None:
    turns = [Turn("go to kitchen 1", "You arrive at the kitchen 1. It is warm: very.")]
    prompt = policy_prompt(PUT, turns, "You are in the kitchen 1.", ["look"])
    assert prompt_task_and_actions(prompt) == (PUT, ["go to kitchen 1"])


def test_the_explorer_takes_puts_and_lights_what_its_task_names() -> None:
    here = ["look", "go to hall 1", "take mug 2 from table 1", "take cup 1 from table 1"]
    assert decide(PUT, here) == "take mug 2 from table 1"
    holding = ["go to hall 1", "put mug 2 on shelf 1", "put mug 2 on countertop 1"]
    assert decide(PUT, holding) == "put mug 2 on countertop 1"
    lamp = ["use desk lamp 1", "put book 1 on desk 1", "go to hall 1"]
    assert decide(LOOK, lamp) == "use desk lamp 1"
    assert decide(LOOK, lamp, ("use desk lamp 1",)) == "go to hall 1"  # it is on now


def test_the_explorer_heads_for_the_named_place_and_avoids_where_it_just_was() -> None:
    holding = ["go to hall 1", "go to kitchen 2", "put mug 2 on shelf 1"]
    assert decide(PUT, holding) == "go to kitchen 2"
    elsewhere = ["go to hall 1", "go to north road", "go to south road", "put mug 2 on floor 1"]
    assert decide(PUT, elsewhere) == "go to north road"  # the task's direction
    searching = ["look", "go to hall 1", "go to bedroom 1", "go to east road", "open chest 1"]
    assert decide(PUT, searching, ("open chest 1", "go to hall 1")) == "go to bedroom 1"


def _play(policy: Policy, family: str, episodes: int, budget: int = 40) -> int:
    """Episodes of ``family`` near one avatar in an in-memory world; returns the successes."""
    backend, rng, wins, played = MemoryBackend(7), random.Random(7), 0, 0
    world = World(backend)
    world.add_avatar("a", "Alice", ORIGIN)
    world.commit()
    while played < episodes:
        world = World(backend)
        try:
            task = sampling.sample_task(world, "a", key=f"explorer-{rng.random()}", family=family)
        except TaskError:  # none near: walk on
            engine.step(world, "a", rng.choice(engine.observe(world, "a").admissible))
            world.commit()
            continue
        world.commit()
        played += 1
        seen = engine.observe(World(backend), "a")
        observation, admissible, history = seen.text, seen.admissible, []
        for _ in range(budget):
            prompt = policy_prompt(task.text, history, observation, admissible)
            action = policy.decide(played, prompt, admissible).action
            world = World(backend)
            result = engine.step(world, "a", action)
            world.commit()
            history.append(Turn(action, result.observation))
            observation, admissible = result.observation, result.admissible
            if tasks.goal_met(World(backend), task, "a"):
                wins += 1
                break
    return wins


def test_the_explorer_solves_tasks_a_random_walk_does_not() -> None:
    explorer = _play(ExplorerPolicy(seed=7), "pick_and_place", 20)
    random_walk = _play(RandomPolicy(seed=7), "pick_and_place", 20)
    assert explorer >= 4 and explorer > random_walk, (explorer, random_walk)
