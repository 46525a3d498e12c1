"""``bigworld history``: listings and exports against a live server."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from agents.cli import main


def play(client, steps: int) -> str:
    """An episode of up to ``steps`` looks, then abandoned (a task's budget may end it first:
    the shared server's draws depend on what the tests before played)."""
    start = client.begin_episode()
    for index in range(1, steps + 1):
        if client.step(start.episode_id, index, "look").done:
            return str(start.episode_id)
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
    played = [play(client, 2), play(client, 3)]
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
    steps = sorted(s["step"] for e in played for s in client.episode(e)["steps"])
    assert len(steps) >= 3 and sorted(r["step"] for r in table) == steps
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


# -- judgments, decisions, policy versions; pandas round trips --------------------------------


def play_as(client, steps: int, version: str) -> list[int]:
    """An episode of up to ``steps`` looks by ``version`` (a begun task may already hold, which
    ends it at once); abandoned if still open. Returns the step numbers taken."""
    start = client.begin_episode()
    taken = []
    for index in range(1, steps + 1):
        taken.append(index)
        if client.step(start.episode_id, index, "look", {"policy_version": version}).done:
            return taken
    client.abandon(start.episode_id)
    return taken


def export(server, out, what: str, *extra: str) -> int:
    argv = ["history", "export", "--what", what, "--out", str(out), "--server", server.url]
    return main([*argv, "--token", server.admin_token, *extra])


def test_export_judgments_loads_in_pandas_with_the_judged_steps_version(
    server, client, agent, make_agent, tmp_path
):
    import pandas as pd

    from agents.client import BigWorldClient

    played = {"v-old": play_as(client, 2, "v-old"), "v-new": play_as(client, 3, "v-new")}
    episodes = list(client.episodes(agent=agent.id))
    reward = make_agent("reward")
    with BigWorldClient(server.url, reward.token) as judge:
        for episode in episodes:
            detail = client.episode(episode["id"])
            votes = [
                {"step": s["step"], "vote": v, "score": 1, "model_version": "rm-1"}
                for s in detail["steps"]
                for v in (0, 1)
            ]
            judge.post_judgments(episode["id"], votes)

    out = tmp_path / "judgments.jsonl"
    assert export(server, out, "judgments", "--agent", str(agent.id)) == 0
    frame = pd.read_json(out, lines=True)
    assert len(frame) == 2 * sum(len(steps) for steps in played.values())
    assert set(frame["policy_version"]) == {"v-old", "v-new"}
    assert set(frame["agent_id"]) == {reward.id} and set(frame["episode_agent_id"]) == {agent.id}
    assert {"episode_id", "step", "vote", "score", "family", "task_id"} <= set(frame.columns)

    out = tmp_path / "judgments.parquet"
    argv = ("--agent", str(agent.id), "--policy-version", "v-new")
    assert export(server, out, "judgments", *argv) == 0
    frame = pd.read_parquet(out)
    assert len(frame) == 2 * len(played["v-new"])
    assert set(frame["policy_version"]) == {"v-new"}


def test_export_steps_of_one_policy_version(server, client, agent, tmp_path):
    import pandas as pd

    old, new = play_as(client, 2, "pv-a"), play_as(client, 2, "pv-b")
    out = tmp_path / "steps.parquet"
    assert export(server, out, "steps", "--agent", str(agent.id), "--policy-version", "pv-b") == 0
    frame = pd.read_parquet(out)
    assert list(frame["step"]) == new and set(frame["policy_version"]) == {"pv-b"}
    assert old  # the other version's episode exists and was left out


def test_export_forge_decisions_by_kind_and_tick(server, tmp_path):
    import pandas as pd

    from forge.models import ForgeDecisionRow
    from world.store import make_engine, session_factory

    # Decisions of a kind of this test's own, so that the forge's cycles do not interfere.
    engine = make_engine(f"sqlite:///{server.data_dir / 'world.db'}")
    try:
        with session_factory(engine)() as session:
            for tick in (100, 200, 300):
                session.add(
                    ForgeDecisionRow(
                        cycle=tick // 100,
                        tick=tick,
                        kind="test.export",
                        task_id=f"task-{tick}",
                        verdict="applied",
                        evidence={"why": {"tick": tick}},
                        created_at=0.0,
                    )
                )
            session.commit()
    finally:
        engine.dispose()

    out = tmp_path / "decisions.parquet"
    argv = ("--kind", "test.export", "--from-tick", "150", "--to-tick", "300")
    assert export(server, out, "decisions", *argv) == 0
    frame = pd.read_parquet(out)
    assert list(frame["tick"]) == [200, 300]
    assert list(frame["task_id"]) == ["task-200", "task-300"]
    assert json.loads(frame["evidence"][0]) == {"why": {"tick": 200}}

    out = tmp_path / "decisions.jsonl"
    assert export(server, out, "decisions", "--kind", "test.export", "--task", "task-100") == 0
    frame = pd.read_json(out, lines=True)
    assert list(frame["tick"]) == [100] and frame["evidence"][0] == {"why": {"tick": 100}}


def test_export_refuses_episode_filters_for_decisions(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    argv = ["history", "export", "--what", "decisions", "--family", "craft", "--out", str(out)]
    assert main(argv) == 2
    assert "takes no family filter" in capsys.readouterr().err
    assert not out.exists()


# -- --world: a fork's history ------------------------------------------------------------------


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_history_of_a_fork_is_the_forks_and_mains_is_unchanged(
    server, admin, agent, client, tmp_path, capsys
):
    from agents.client import BigWorldClient

    played_in_main = play(client, 1)
    tick = admin.world()["tick"]
    name = f"hist-{agent.id}"
    admin.fork_world("main", tick, name)
    mine = ("--agent", str(agent.id))
    assert export(server, tmp_path / "main-before.jsonl", "episodes", *mine) == 0
    assert export(server, tmp_path / "main-steps-before.jsonl", "steps", *mine) == 0
    try:
        with BigWorldClient(server.url, agent.token, world=name) as there:
            in_fork = {play(there, 2), play(there, 1)}

        out = tmp_path / "fork.jsonl"
        assert export(server, out, "episodes", *mine, "--world", name) == 0
        rows = lines(out)
        assert {str(r["id"]) for r in rows} == in_fork and len(rows) == 2
        assert all(r["begin_tick"] >= tick and r["status"] == "abandoned" for r in rows)
        steps = tmp_path / "fork-steps.jsonl"
        assert export(server, steps, "steps", *mine, "--world", name) == 0
        assert {str(r["episode_id"]) for r in lines(steps)} == in_fork
        assert sorted(r["step"] for r in lines(steps)) == [1, 1, 2]
        capsys.readouterr()
        argv = ["history", "episodes", "--server", server.url, "--token", server.admin_token]
        assert main([*argv, *mine, "--world", name, "--format", "jsonl"]) == 0
        listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert sorted(listed, key=lambda r: r["id"]) == sorted(rows, key=lambda r: r["id"])

        # Main's history is what it was before the fork was played.
        after = tmp_path / "main-after.jsonl"
        assert export(server, after, "episodes", *mine) == 0
        assert after.read_text() == (tmp_path / "main-before.jsonl").read_text()
        assert [str(r["id"]) for r in lines(after)] == [played_in_main]
        assert [r["begin_tick"] < tick for r in lines(after)] == [True]
        after = tmp_path / "main-steps-after.jsonl"
        assert export(server, after, "steps", *mine, "--world", "main") == 0
        assert after.read_text() == (tmp_path / "main-steps-before.jsonl").read_text()
    finally:
        admin.delete_world(name)


def test_an_unknown_world_is_one_line_and_writes_nothing(server, tmp_path, capsys):
    argv = ["history", "episodes", "--server", server.url, "--token", server.admin_token]
    assert main([*argv, "--world", "nosuch"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["bigworld: 404 unknown_world: no world 'nosuch'"]
    out = tmp_path / "x.jsonl"
    for what in ("episodes", "events", "steps"):
        assert export(server, out, what, "--world", "nosuch") == 1
        assert "no world 'nosuch'" in capsys.readouterr().err
        assert not out.exists()


def test_world_names_are_checked_and_decisions_are_mains(tmp_path, capsys):
    argv = ["history", "events", "--token", "t", "--world", "Exp_1"]
    assert main(argv) == 2
    assert "expected a world's name" in capsys.readouterr().err
    out = tmp_path / "d.jsonl"
    argv = ["history", "export", "--what", "decisions", "--out", str(out), "--token", "t"]
    assert main([*argv, "--world", "exp-1"]) == 2
    assert "made in the main world only" in capsys.readouterr().err
    assert not out.exists()
