"""The Gymnasium adapter: reset begins a new episode in the same world; rewards are outcomes;
Gymnasium's own checker passes."""

from __future__ import annotations

import json
import warnings

import httpx
import pytest
from gymnasium.utils.env_checker import check_env

from agents.client import BigWorldClient, RetryPolicy
from agents.gym_env import BigWorldEnv

TASK = {"id": "t1", "family": "pick_and_place", "params": {}, "text": "put a mug on the desk"}


def test_reset_begins_a_new_episode_in_the_same_world(client):
    env = BigWorldEnv(client)
    observation, info = env.reset(seed=3)
    first = info["episode_id"]
    assert observation and info["admissible_actions"] and info["step"] == 0
    assert env.observation_space.contains(observation)

    observation, reward, terminated, truncated, info = env.step(0)  # an index
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["step"] == 1 and info["success"] is False
    assert "episode_id" not in info and "tick" not in info  # the run's ids live on the env
    tick_before_reset = env.tick
    _, _, _, _, info = env.step("look")  # the action text
    assert info["step"] == 2 and env.tick > tick_before_reset and env.episode_id == first
    tick_before_reset = env.tick

    observation, info = env.reset()
    assert info["episode_id"] != first and env.episode_id == info["episode_id"]
    assert client.episode(first)["status"] != "open"  # the open one was abandoned, not left
    assert info["tick"] >= tick_before_reset  # the world's tick never goes back
    env.close()
    assert client.episode(info["episode_id"])["status"] != "open"


def test_bad_index_is_refused_before_anything_is_sent(client):
    env = BigWorldEnv(client)
    _, info = env.reset()
    with pytest.raises(ValueError, match="expected an action index"):
        env.step(len(info["admissible_actions"]))
    assert client.episode(info["episode_id"])["steps"] == []
    env.close()


def test_sampled_actions_are_valid_requests(client):
    """Whatever the action space samples, the server takes as a step (an impossible action is
    a normal step whose observation says nothing happens), and observations fit their space."""
    env = BigWorldEnv(client)
    env.reset()
    env.action_space.seed(0)
    for index in range(1, 4):
        observation, reward, _, _, info = env.step(env.action_space.sample())
        assert info["step"] == index and reward == 0.0
        assert env.observation_space.contains(observation)
    env.close()


def test_step_before_reset_is_an_error(client):
    with pytest.raises(RuntimeError, match="reset"):
        BigWorldEnv(client).step(0)


def test_episode_that_runs_out_of_steps_is_truncated_with_outcome_minus_one(client):
    env = BigWorldEnv(client)
    env.reset()
    for _ in range(1000):
        _, reward, terminated, truncated, info = env.step("wait")
        if terminated or truncated:
            break
        assert reward == 0.0
    assert truncated and not terminated
    assert reward == -1.0 and info["outcome"] == -1
    with pytest.raises(RuntimeError):
        env.step("wait")  # the episode is over until the next reset


def test_success_terminates_with_reward_plus_one():
    """The server's answer to a step that reaches the goal, via a fake transport."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/episodes":
            return httpx.Response(
                200,
                json={
                    "episode_id": 5,
                    "task": TASK,
                    "tick": 1,
                    "observation": "You see a mug.",
                    "admissible_actions": ["take mug 1 from shelf 1"],
                },
            )
        body = json.loads(request.content)
        assert body == {"step": 1, "action": "take mug 1 from shelf 1"}
        return httpx.Response(
            200,
            json={
                "step": 1,
                "observation": "Done.",
                "admissible_actions": [],
                "done": True,
                "success": True,
                "outcome": 1,
                "tick": 2,
            },
        )

    client = BigWorldClient(
        "http://bigworld.test",
        "tok",
        retry=RetryPolicy(attempts=1),
        transport=httpx.MockTransport(handler),
    )
    env = BigWorldEnv(client, family="pick_and_place")
    env.reset()
    observation, reward, terminated, truncated, info = env.step(0)
    assert (observation, reward, terminated, truncated) == ("Done.", 1.0, True, False)
    assert info["success"] is True and env.tick == 2


def test_reset_before_any_step_keeps_the_unplayed_episode(client, agent):
    """Nothing happened in it, and abandoning it would record a failure; asking for another
    family does begin another episode."""
    env = BigWorldEnv(client)
    _, first = env.reset(seed=1)
    _, again = env.reset(seed=2)
    assert again == first and again is not first  # the same start, in a new info
    env.step("look")
    _, second = env.reset()
    assert second["episode_id"] != first["episode_id"]
    _, third = env.reset(options={"family": "go_to"})
    assert third["episode_id"] != second["episode_id"] and third["task"].family == "go_to"
    env.close()
    statuses = {e["id"]: e["status"] for e in client.episodes(agent=agent.id)}
    assert sorted(statuses.values()) == ["abandoned"] * 3


def test_gymnasium_check_env_passes_and_leaves_no_episode_open(client, agent):
    """``check_env`` itself, against a live server: its step-determinism check compares two
    runs' step infos, which must not carry the episode id or the tick."""
    env = BigWorldEnv(client)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    env.close()
    said = [str(w.message) for w in caught]
    assert all("render modes" in text for text in said), said  # no spec: render not checked
    episodes = list(client.episodes(agent=agent.id))
    assert all(e["status"] == "abandoned" for e in episodes)
    # One per run of the checker's steps, and the last reset's, which close abandons; without
    # keeping unplayed episodes there were 12.
    assert len(episodes) <= 5, len(episodes)
