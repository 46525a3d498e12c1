"""``bigworld eval``: two policies on identical starts from forks, against a live server."""

from __future__ import annotations

import json

import pytest

from agents.cli import main
from agents.client import BigWorldClient
from agents.policy_agent import ExplorerPolicy, PolicyRunner, RunnerConfig


@pytest.fixture(scope="module")
def server(own_server):
    """This module's own server: the go_to episodes it plays would change other modules' draws."""
    return own_server


def evaluate(server, agents, *args: str) -> list[str]:
    tokens = [flag for a in agents for flag in ("--agent-token", a.token)]
    return ["eval", *args, "--server", server.url, "--token", server.admin_token, *tokens]


def moved(server, agents, episodes: int = 2) -> list:
    """The agents, each having played a few episodes: their avatars stand in different places."""
    for seed, agent in enumerate(agents):
        with BigWorldClient(server.url, agent.token) as player:
            config = RunnerConfig(family="go_to", max_episodes=episodes)
            PolicyRunner(player, ExplorerPolicy(seed), config).run()
    return agents


def test_pairs_play_one_task_from_one_start_and_main_stays(
    server, admin, make_agent, tmp_path, capsys, quiet_forge
):
    agents = moved(server, [make_agent() for _ in range(3)])
    before = admin.world(state_hash=True)
    out = tmp_path / "eval.json"
    command = ["--policies", "explorer", "random", "--forks", "6", "--family", "go_to"]
    assert main([*evaluate(server, agents, *command), "--keep-forks", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "paired" in printed and "unpaired" in printed
    result = json.loads(out.read_text())
    assert result["pairs"] == 3 and result["at_tick"] == before["tick"]
    assert result["A"]["episodes"] == result["B"]["episodes"] == 3

    for pair in result["played"]:  # both sides: the same task from the same start
        starts = []
        for world in (pair["fork_a"], pair["fork_b"]):
            with BigWorldClient(server.url, server.admin_token, world=world) as there:
                (episode,) = list(there.episodes())
                detail = there.episode(episode["id"])
                starts.append((detail["task"]["text"], detail["observation"]))
                assert detail["status"] != "open"
                assert there.world()["tick"] > before["tick"]  # it was played there
        assert starts[0] == starts[1] and starts[0][0] == pair["task"]
        for world in (pair["fork_a"], pair["fork_b"]):
            admin.delete_world(world)
    assert admin.world(state_hash=True) == before  # nothing reached main

    paired, unpaired = result["paired"], result["unpaired"]
    assert paired["low"] <= paired["difference"] <= paired["high"]
    assert paired["difference"] == unpaired["difference"]


def test_forks_are_deleted_unless_kept(server, admin, agent, capsys):
    command = ["--policies", "random", "random", "--forks", "4", "--family", "go_to"]
    assert main(evaluate(server, [agent], *command)) == 0
    assert "2 pairs" in capsys.readouterr().out
    assert not [w for w in admin.worlds() if w["name"].startswith("eval-")]


def test_misuse_is_refused_with_one_line(server, agent, capsys):
    odd = ["--policies", "random", "explorer", "--forks", "3"]
    assert main(evaluate(server, [agent], *odd)) == 2
    assert "even --forks" in capsys.readouterr().err
    unknown = ["--policies", "random", "nowhere", "--forks", "2"]
    assert main(evaluate(server, [agent], *unknown)) == 2
    assert "model directory" in capsys.readouterr().err
    assert main(evaluate(server, [], "--policies", "random", "random", "--forks", "2")) == 2
    assert "--agent-token" in capsys.readouterr().err
