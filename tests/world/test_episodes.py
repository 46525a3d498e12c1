"""The rules of an episode: its begin, goal check, budget and abandonment, the events they log,
and a replay of those events that rebuilds the same world. No database."""

from __future__ import annotations

import dataclasses

import pytest

from world import episodes
from world.episodes import Ending, Episode
from world.errors import ActionError
from world.replay import replay
from world.state import MemoryBackend, World
from world.tasks import Task

KITCHEN = "0,0:2"  # where the ``sim`` fixture's Alice stands
LIVING_ROOM = "0,0:1"  # one ``go to`` away from it
GO_TO = Task.make("go_to", {"place": LIVING_ROOM, "place_name": "living room 1", "hops": 1})


def _episode(budget: int = 5, last_step: int = 0) -> Episode:
    return Episode(
        id=3, avatar="a", task_id=GO_TO.id, family="go_to", budget=budget, last_step=last_step
    )


def _events(sim, since: int, kind: str) -> list[dict]:
    return [e.payload for e in sim.backend.events[since:] if e.kind == kind]


def test_begin_logs_the_task_and_answers_the_first_look_with_the_task(sim) -> None:
    with sim.tx() as world:
        first = episodes.begin(world, "a", GO_TO, key="a/1", family="go_to", draw="fresh")
    assert first.text == sim.observe("a").text + "\n\nYour task is to: " + GO_TO.text
    assert first.admissible == sim.observe("a").admissible
    assert _events(sim, 0, "episode_begun") == [
        {
            "key": "a/1",
            "family": "go_to",
            "task": {"id": GO_TO.id, **GO_TO.spec()},
            "draw": "fresh",
        }
    ]


def test_a_step_that_meets_the_goal_succeeds_with_plus_one(sim) -> None:
    since = len(sim.backend.events)
    with sim.tx() as world:
        taken = episodes.advance(world, _episode(), GO_TO, "go to living room 1", 1)
    assert (taken.success, taken.done, taken.outcome) == (True, True, 1)
    assert taken.ending == Ending("succeeded", 1)
    assert taken.episode == _episode(last_step=1)
    assert taken.result.accepted and taken.result.tick == sim.tick
    assert _events(sim, since, "goal_check") == [
        {"episode": 3, "step": 1, "task": GO_TO.spec(), "task_id": GO_TO.id, "met": True}
    ]
    assert _events(sim, since, "episode_ended") == [
        {
            "episode_id": 3,
            "status": "succeeded",
            "outcome": 1,
            "family": "go_to",
            "task_id": GO_TO.id,
            "steps": 1,
        }
    ]
    kinds = [e.kind for e in sim.backend.events[since:]]
    assert kinds == ["action", "goal_check", "episode_ended", "state"]


def test_the_episode_stays_open_until_the_budget_is_spent_then_fails(sim) -> None:
    since = len(sim.backend.events)
    with sim.tx() as world:
        taken = episodes.advance(world, _episode(budget=2), GO_TO, "look", 1)
    assert (taken.success, taken.done, taken.outcome, taken.ending) == (False, False, None, None)
    assert _events(sim, since, "episode_ended") == []
    with sim.tx() as world:
        taken = episodes.advance(world, taken.episode, GO_TO, "wait", 2)
    assert taken.ending == Ending("failed", -1) and not taken.success
    assert [p["steps"] for p in _events(sim, since, "episode_ended")] == [2]
    assert [p["met"] for p in _events(sim, since, "goal_check")] == [False, False]


def test_the_goal_wins_over_the_budget_on_the_last_step(sim) -> None:
    with sim.tx() as world:
        taken = episodes.advance(world, _episode(budget=1), GO_TO, "go to living room 1", 1)
    assert taken.ending == Ending("succeeded", 1)


def test_an_impossible_action_is_a_step_and_malformed_text_changes_nothing(sim) -> None:
    with sim.tx() as world:
        taken = episodes.advance(world, _episode(), GO_TO, "take moon 1 from sky 1", 1)
    assert taken.result.observation == "Nothing happens." and not taken.done
    before, tick = len(sim.backend.events), sim.tick
    with sim.tx() as world, pytest.raises(ActionError):
        episodes.advance(world, _episode(last_step=1), GO_TO, "look\x00", 2)
    assert (len(sim.backend.events), sim.tick) == (before, tick)


def test_abandoning_ends_with_minus_one_after_the_steps_taken(sim) -> None:
    with sim.tx() as world:
        ending = episodes.abandon(world, _episode(last_step=4))
    assert ending == Ending("abandoned", -1)
    assert _events(sim, 0, "episode_ended") == [
        {
            "episode_id": 3,
            "status": "abandoned",
            "outcome": -1,
            "family": "go_to",
            "task_id": GO_TO.id,
            "steps": 4,
        }
    ]


def test_a_replay_of_an_episodes_log_rebuilds_the_same_world() -> None:
    """Each committed World's events, numbered as the store numbers them, rebuild it."""
    backend, log = MemoryBackend(7), []
    episode = _episode(budget=3)
    actions = ["open fridge 1", "look", "go to living room 1"]
    for index in range(len(actions) + 2):
        world = World(backend)
        if index == 0:
            world.add_avatar("a", "Alice", KITCHEN)
        elif index == 1:
            episodes.begin(world, "a", GO_TO, key=None, family=None, draw="requested")
        else:
            taken = episodes.advance(world, episode, GO_TO, actions[index - 2], index - 1)
            episode = taken.episode
        log += [{**dataclasses.asdict(e), "txn": index} for e in world.commit().events]
    assert taken.ending == Ending("succeeded", 1)
    rebuilt = MemoryBackend(7)
    assert replay(log, rebuilt) == 5
    assert World(rebuilt).state_hash() == World(backend).state_hash()
