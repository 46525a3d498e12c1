"""``bigworld world fork|list|delete`` and the client's forks, against a live server."""

from __future__ import annotations

import json

import pytest

from agents.cli import main
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
