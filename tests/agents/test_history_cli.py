"""``bigworld history``: listings and exports against a live server."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from agents.cli import main


def play(client, steps: int) -> str:
    start = client.begin_episode()
    for index in range(1, steps + 1):
        client.step(start.episode_id, index, "look")
    client.abandon(start.episode_id)
    return str(start.episode_id)


@pytest.mark.parametrize("verb", ["episodes", "events", "export"])
def test_every_command_has_help(verb, capsys):
    assert main(["history", verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--server" in out and "--from-tick" in out
    assert main(["history", "--help"]) == 0
    assert "export" in capsys.readouterr().out


def test_episodes_filtered_by_agent_as_jsonl(server, client, agent, capsys):
    ids = {play(client, 1), play(client, 2)}
    argv = [
        "history",
        "episodes",
        "--server",
        server.url,
        "--token",
        server.admin_token,
        "--agent",
        str(agent.id),
        "--format",
        "jsonl",
    ]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {str(r["id"]) for r in rows} == ids


def test_server_and_token_come_from_the_environment(server, client, agent, capsys, monkeypatch):
    episode = play(client, 1)
    monkeypatch.setenv("BIGWORLD_SERVER", server.url)
    monkeypatch.setenv("BIGWORLD_TOKEN", agent.token)
    assert main(["history", "episodes", "--agent", str(agent.id)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[0] == "id" and episode in table[1]
    monkeypatch.setenv("BIGWORLD_TOKEN", "wrong")
    assert main(["history", "episodes"]) == 1
    assert "401" in capsys.readouterr().err


def test_events_in_a_tick_range(server, client, capsys):
    play(client, 3)
    tick = client.world()["tick"]
    argv = [
        "history",
        "events",
        "--server",
        server.url,
        "--token",
        server.admin_token,
        "--from-tick",
        str(tick - 2),
        "--to-tick",
        str(tick),
        "--format",
        "jsonl",
        "--limit",
        "0",
    ]
    assert main(argv) == 0
    ticks = [json.loads(line)["tick"] for line in capsys.readouterr().out.splitlines()]
    assert ticks and all(tick - 2 <= t <= tick for t in ticks)


def test_export_steps_to_parquet_with_nested_fields_as_strings(server, client, agent, tmp_path):
    play(client, 2)
    play(client, 3)
    out = tmp_path / "steps.parquet"
    argv = [
        "history",
        "export",
        "--what",
        "steps",
        "--out",
        str(out),
        "--server",
        server.url,
        "--token",
        server.admin_token,
        "--agent",
        str(agent.id),
    ]
    assert main(argv) == 0
    table = pq.read_table(out).to_pylist()
    assert len(table) == 5
    assert sorted(r["step"] for r in table) == [1, 1, 2, 2, 3]
    assert all(r["action"] == "look" for r in table)
    assert isinstance(json.loads(table[0]["admissible_actions"]), list)


def test_export_episodes_to_jsonl_with_a_limit(server, client, agent, tmp_path):
    for _ in range(3):
        play(client, 1)
    out = tmp_path / "episodes.jsonl"
    argv = [
        "history",
        "export",
        "--what",
        "episodes",
        "--format",
        "jsonl",
        "--out",
        str(out),
        "--server",
        server.url,
        "--token",
        server.admin_token,
        "--agent",
        str(agent.id),
        "--limit",
        "2",
    ]
    assert main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 and all(r["status"] != "open" for r in rows)


def test_export_refuses_filters_of_the_other_kind(tmp_path, capsys):
    argv = [
        "history",
        "export",
        "--what",
        "episodes",
        "--kind",
        "take",
        "--out",
        str(tmp_path / "x.jsonl"),
    ]
    assert main(argv) == 2
    assert "takes no kind filter" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
