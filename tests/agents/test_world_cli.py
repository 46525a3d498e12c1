"""``bigworld world fork|list|delete`` and the client's forks, against a live server."""

from __future__ import annotations

import json

import pytest

from agents.cli import main
from agents.client import BigWorldClient
from agents.errors import ForbiddenError


def world(server, *args: str) -> list[str]:
    return ["world", *args, "--server", server.url, "--token", server.admin_token]


def test_fork_list_and_delete_from_the_command_line(server, client, capsys):
    start = client.begin_episode()
    client.step(start.episode_id, 1, "look")
    client.abandon(start.episode_id)
    then = client.world(at_tick=1)

    assert main([*world(server, "fork"), "--at-tick", "1", "--name", "cli-fork"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["name"] == "cli-fork" and made["parent"] == "main" and made["at_tick"] == 1
    assert made["state_hash"] == then["state_hash"]

    assert main([*world(server, "list"), "--format", "jsonl"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [w["name"] for w in listed][:1] == ["main"] and "cli-fork" in {w["name"] for w in listed}
    assert main(world(server, "list")) == 0
    assert "cli-fork" in capsys.readouterr().out  # the table

    assert main([*world(server, "delete"), "cli-fork"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "cli-fork"
    assert main([*world(server, "delete"), "cli-fork"]) == 1  # gone: a one-line error
    assert "no world 'cli-fork'" in capsys.readouterr().err


def test_a_policy_token_cannot_fork(client):
    with pytest.raises(ForbiddenError):
        client.fork_world("main", 0, "mine")


@pytest.mark.parametrize("verb", ["fork", "list", "delete"])
def test_every_world_verb_has_help(verb, capsys):
    assert main(["world", verb, "--help"]) == 0
    assert "--server" in capsys.readouterr().out


def test_a_client_of_a_fork_plays_there_and_the_main_world_stays(server, admin, agent, quiet_forge):
    tick = admin.world()["tick"]
    name = f"play-{agent.id}"
    made = admin.fork_world("main", tick, name)
    before = admin.world(state_hash=True)
    with BigWorldClient(server.url, agent.token, world=name) as there:
        start = there.begin_episode()
        assert start.tick == tick
        reply = there.step(start.episode_id, 1, start.admissible_actions[0])
        assert reply.tick == tick + 1
        assert there.world()["tick"] == tick + 1
        assert [e["id"] for e in there.episodes(agent=agent.id)] == [start.episode_id]
        assert there.abandon(start.episode_id)
        assert [w["name"] for w in there.worlds()][0] == "main"  # not a world's route
    assert admin.world(state_hash=True) == before
    assert not list(admin.episodes(agent=agent.id))
    assert made["state_hash"] == admin.world(at_tick=tick)["state_hash"]
    admin.delete_world(name)
