"""``bigworld report``: an empty world says so; a short real history gives PNG plots and a
summary holding the run's figures."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import test_learning_metrics
from harness import ADMIN_TOKEN, REPO, Api
from test_learning_metrics import judge, play, store

from forge.models import ForgeDecisionRow
from server.cli import main
from server.report import PLOTS, VersionRate, above_first, write_report
from world.stats import wilson

PNG = b"\x89PNG\r\n\x1a\n"
live = test_learning_metrics.live  # the same server fixture: distances on, no forge cycles


def report(database_url: str, out) -> str:
    assert main(["report", "--database-url", database_url, "--out", str(out)]) == 0
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    return (out / "report.md").read_text()


def test_report_without_a_world_says_so_and_creates_nothing(tmp_path, capsys):
    data = tmp_path / "nowhere"
    assert main(["report", "--data-dir", str(data), "--out", str(tmp_path / "r")]) == 0
    text = (tmp_path / "r" / "report.md").read_text()
    assert "Nothing to report" in text and "no database" in text
    assert not data.exists()
    assert "report written to" in capsys.readouterr().out
    assert main(["report", "--data-dir", str(data), "--window", "0"]) == 2


def test_report_is_documented_and_the_server_does_not_load_matplotlib(capsys):
    assert main(["report", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--data-dir", "--out", "--database-url"))
    assert main(["--help"]) == 0
    assert "report" in capsys.readouterr().out
    code = "import sys, server.app, server.cli; print('matplotlib' in sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "False"


def test_report_of_an_empty_world_then_of_a_short_history(live, database_url, tmp_path):
    text = report(database_url, tmp_path / "empty")
    assert "No episode has ended yet" in text and "| episodes | 0 (none) |" in text

    admin = Api(live, ADMIN_TOKEN)
    policy, reward = admin.agent("player"), admin.agent("judge", "reward")
    first = play(policy, admin, {"family": "pick_and_place"}, succeed=True, version="1")
    task = {"task_id": first["task"]["id"]}
    played = [
        first,
        play(policy, admin, task, succeed=False, version="1"),
        play(policy, admin, task, succeed=True, version="2"),
        play(policy, admin, task, succeed=True, version="10"),
    ]
    for episode in played:
        judge(reward, episode)
    storm_tick = admin.get("/v1/world").json()["tick"]
    store(
        database_url,
        lambda session: session.add(
            ForgeDecisionRow(
                cycle=1,
                tick=storm_tick,
                kind="world.storm",
                verdict="applied",
                evidence={},
                created_at=time.time(),
            )
        ),
    )
    world = admin.get("/v1/world").json()
    steps = sum(len(e["steps"]) for e in played)

    out = tmp_path / "report"
    text = report(database_url, out)
    assert f"at tick {world['tick']}" in text and f"| ticks | {world['tick']} |" in text
    assert "| episodes | 4 (abandoned 1, succeeded 3) |" in text
    assert f"| steps | {steps} |" in text and f"| judgments (votes) | {steps} |" in text
    assert "| policy versions on steps | 1, 2, 10 |" in text  # natural order
    # the pool's draw also fixes the probe set (task.probe decisions), forge cycles or not
    (decided,) = [line for line in text.splitlines() if line.startswith("| forge decisions |")]
    assert "world.storm 1)" in decided
    assert "Average success: **75.0%** over 4 ended episodes." in text
    assert "| pick_and_place | 4 | 75.0% |" in text
    assert "outcome accuracy 100.0% over 4 judged episodes" in text
    assert f"| {storm_tick} | world.storm |" in text
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["episodes"], metrics["average_success"]) == (4, 0.75)
    assert metrics["versions"]["10"]["episodes"] == 1
    by_version = json.loads((out / "success_by_version.json").read_text())
    assert list(by_version["all"]) == ["1", "2", "10"]  # natural order
    first_version = by_version["all"]["1"]
    assert (first_version["episodes"], first_version["successes"]) == (2, 1)
    assert (first_version["low"], first_version["high"]) == pytest.approx(wilson(1, 2))
    assert by_version["families"]["pick_and_place"]["10"]["successes"] == 1
    assert by_version["above_first"] == []
    assert "| policy version | episodes | success | 95% interval | pick_and_place |" in text
    assert (out / "success_by_family.png").read_bytes() != (
        tmp_path / "empty" / "success_by_family.png"
    ).read_bytes()

    assert write_report(database_url, out, bucket_ticks=1, window=1) == out / "report.md"
    assert json.loads((out / "metrics.json").read_text())["bucket_ticks"] == 1


def test_wilson_intervals_and_versions_above_the_first():
    assert wilson(0, 0) == (None, None)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson(30, 100)
    assert low < 0.3 < high and high - low < 0.2

    def rate(successes: int, episodes: int) -> VersionRate:
        low, high = wilson(successes, episodes)
        return VersionRate(episodes, successes, successes / episodes, low, high)

    rates = {"1": rate(5, 100), "2": rate(3, 10), "3": rate(20, 40), "4": rate(1, 2)}
    assert above_first(rates) == ["3"]  # 2's and 4's intervals reach below 1's upper end
    assert above_first({"1": rate(5, 100)}) == []
    # A first version with fewer than FIRST_MIN_EPISODES episodes is not the yardstick.
    assert above_first({"0": rate(0, 1), **rates}) == ["3"]
    assert above_first({"1": rate(0, 3), "2": rate(3, 3)}) == []


def test_report_of_a_fork_is_its_own_history_and_mains_is_unchanged(live, database_url, capsys):
    from test_worlds_api import InWorld

    admin = Api(live, ADMIN_TOKEN)
    policy = admin.agent("player")
    play(policy, admin, {"family": "pick_and_place"}, succeed=True, version="m1")
    tick = admin.get("/v1/world").json()["tick"]
    made = admin.post("/v1/worlds", json={"from": "main", "at_tick": tick, "name": "exp-1"})
    assert made.status_code == 201, made.text
    data = ["--database-url", database_url, "--data-dir", str(live.data_dir)]
    assert main(["report", *data]) == 0  # main's, before the fork is played
    before = {n: (live.data_dir / "report" / n).read_text() for n in ("report.md", "metrics.json")}

    there, judge = InWorld(policy, "exp-1"), InWorld(admin, "exp-1")
    first = play(there, judge, {"family": "pick_and_place"}, succeed=True, version="f1")
    second = play(there, judge, {"task_id": first["task"]["id"]}, succeed=False, version="f2")
    assert first["begin_tick"] >= tick and second["status"] == "abandoned"
    capsys.readouterr()

    assert main(["report", *data, "--world", "exp-1"]) == 0
    out = live.data_dir / "report-exp-1"  # the default folder of a fork's report
    assert str(out / "report.md") in capsys.readouterr().out
    for name in PLOTS:
        assert (out / name).read_bytes().startswith(PNG), name
    text = (out / "report.md").read_text()
    world = admin.get("/v1/worlds/exp-1/world").json()
    assert text.startswith("# bigworld report of world exp-1\n")
    assert f"fork of `main` at tick {tick}" in text and f"| ticks | {world['tick']} |" in text
    assert "| episodes | 2 (abandoned 1, succeeded 1) |" in text
    assert "| policy versions on steps | f1, f2 |" in text  # none of main's m1
    assert "Average success: **50.0%** over 2 ended episodes." in text
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["versions"]) == {"f1", "f2"}
    served = judge.get("/v1/metrics/learning").json()  # the server's own figures of the fork
    assert metrics == served
    by_version = json.loads((out / "success_by_version.json").read_text())
    assert list(by_version["all"]) == ["f1", "f2"]

    # Main's report is what it was: the fork's history is not main's.
    assert main(["report", *data, "--world", "main"]) == 0
    for name, was in before.items():
        assert (live.data_dir / "report" / name).read_text() == was, name
    assert "| policy versions on steps | m1 |" in before["report.md"]
    assert json.loads(before["metrics.json"]) == admin.get("/v1/metrics/learning").json()

    # An unknown world: one line, exit 1, nothing written (nor its default folder).
    capsys.readouterr()
    elsewhere = live.data_dir / "elsewhere"
    assert main(["report", *data, "--world", "nosuch"]) == 1
    assert main(["report", *data, "--world", "nosuch", "--out", str(elsewhere)]) == 1
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 2 and captured.out == ""
    assert lines[0] == lines[1] and lines[0].startswith(
        "bigworld: no world 'nosuch' (worlds in this database: main, exp-1;"
    )
    assert not (live.data_dir / "report-nosuch").exists() and not elsewhere.exists()


def test_report_of_a_world_without_a_database_is_an_error(tmp_path, capsys):
    data = tmp_path / "nowhere"
    assert main(["report", "--data-dir", str(data), "--world", "exp-1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bigworld: no world 'exp-1' (no database at ") and err.count("\n") == 1
    assert not data.exists()
