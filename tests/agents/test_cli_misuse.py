"""Every misuse of every ``bigworld`` command ends non-zero with one line on stderr that says
what is wrong and what to do (issue #15 item 8: ``agent run --backend expert`` without
``--expert-token`` used to exit 2 in silence).

The commands run in-process through ``server.cli.main``, the ``bigworld`` entry point, which
forwards the agents' commands to ``agents.cli.main``; one runs as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents import policy_agent, reward_agent
from server import cli

ROOT = Path(__file__).resolve().parents[2]
MODEL_FREE = ("--backend", "random", "--token", "t")
# argv, a fragment of the last stderr line, the exit status. "{tmp}" is a fresh folder.
MISUSES = [
    ((), "expected a command; see bigworld --help", 2),
    (("nosuch",), "invalid choice: 'nosuch' (choose from 'serve', 'db'", 2),
    (("serve", "--port", "x"), "argument --port: invalid int value: 'x'", 2),
    (
        ("serve", "--step-budget", "0", "--data-dir", "{tmp}"),
        "expected step_budget (its flag, or BIGWORLD_STEP_BUDGET) to be greater than or equal to 1",
        2,
    ),
    (("db",), "the following arguments are required: ACTION", 2),
    (("agent",), "the following arguments are required: ACTION", 2),
    (("agent", "create", "--role", "policy"), "the following arguments are required: --name", 2),
    (("report", "--window", "0", "--data-dir", "{tmp}"), "expected --window >= 1, got 0", 2),
    (("history",), "the following arguments are required: VERB", 2),
    (("history", "episodes"), "expected a token: give --token or set BIGWORLD_TOKEN", 2),
    (("history", "events", "--limit", "-1", "--token", "t"), "expected an integer >= 0", 2),
    (
        ("history", "episodes", "--server", "127.0.0.1:8000", "--token", "t"),
        "argument --server: expected an http:// or https:// URL, got '127.0.0.1:8000'",
        2,
    ),
    (
        ("history", "episodes", "--server", "http://127.0.0.1:1", "--token", "t", "--retry-s", "0"),
        "start the server, or point --server (env BIGWORLD_SERVER) at it",
        1,
    ),
    (
        ("history", "export", "--what", "episodes", "--kind", "take", "--out", "{tmp}/x.jsonl"),
        "--what episodes takes no kind filter",
        2,
    ),
    (
        ("history", "export", "--what", "steps", "--out", "{tmp}/no/x.jsonl", "--token", "t"),
        "expected --out in an existing folder",
        2,
    ),
    (("model", "init", "--kind", "policy"), "the following arguments are required: --out", 2),
    (("model", "init", "--kind", "policy", "--out", "{tmp}", "--layers", "0"), ">= 1", 2),
    (("agent", "run", "--role", "policy"), "the following arguments are required: --backend", 2),
    (
        ("agent", "run", "--role", "policy", "--backend", "random"),
        "expected a token: give --token or set BIGWORLD_TOKEN",
        2,
    ),
    (
        ("agent", "run", "--role", "policy", "--backend", "expert", "--token", "t"),
        "backend expert needs --expert-token: give a trainer's or admin's token, or set "
        "BIGWORLD_EXPERT_TOKEN",
        2,
    ),
    (
        ("agent", "run", "--role", "policy", "--backend", "transformers", "--token", "t"),
        "backend transformers needs --model: give a model directory (bigworld model init --out)",
        2,
    ),
    (
        (
            "agent",
            "run",
            "--role",
            "reward",
            "--backend",
            "vllm",
            "--model",
            "{tmp}",
            "--token",
            "t",
        ),
        "expected a model directory with config.json at --model",
        2,
    ),
    (
        ("agent", "run", "--role", "policy", "--backend", "vllm-server", "--token", "t"),
        "backend vllm-server needs --vllm-url",
        2,
    ),
    (
        ("agent", "run", "--role", "policy", "--backend", "heuristic", "--token", "t"),
        "backend heuristic judges steps, it cannot play: give --role reward",
        2,
    ),
    (
        ("agent", "run", "--role", "reward", "--backend", "expert", "--token", "t"),
        "backend expert plays, it cannot judge: give --role policy",
        2,
    ),
    (("agent", "run", "--role", "policy", *MODEL_FREE, "--threads", "-1"), ">= 0, got '-1'", 2),
    (("agent", "run", "--role", "reward", *MODEL_FREE, "--votes", "0"), ">= 1, got '0'", 2),
    (("train",), "the following arguments are required: --policy", 2),
    (
        ("train", "--policy", "{tmp}", "--token", "t"),
        "--mode integrated_rm trains the reward model: give --reward, or another --mode",
        2,
    ),
    (
        ("train", "--policy", "{tmp}", "--mode", "outcome_only", "--token", "t"),
        "expected a model directory with config.json at --policy",
        2,
    ),
    (
        ("train", "--policy", "{tmp}", "--mode", "outcome_only", "--warm-start-play", "3")
        + ("--token", "t"),
        "--warm-start-play plays as a policy agent: give --player-token",
        2,
    ),
    (
        ("train", "--policy", "{tmp}", "--mode", "outcome_only", "--token", "t")
        + ("--accuracy-window", "0.9", "0.1"),
        "the training configuration's flags do not fit together: expected accuracy_window "
        "(low, high) with 0 <= low <= high <= 1, got (0.9, 0.1)",
        2,
    ),
    (("train", "--policy", "{tmp}", "--threads", "x", "--token", "t"), "expected an integer", 2),
    (("demo", "--minutes", "0"), "argument --minutes: expected a number > 0, got '0'", 2),
    (("demo", "--policies", "0"), "argument --policies: expected an integer >= 1, got '0'", 2),
]


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misuse that slipped through fails here instead of serving or playing forever."""
    import uvicorn

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the misuse was not caught: it started running")

    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(policy_agent.PolicyRunner, "run", started)
    monkeypatch.setattr(reward_agent.RewardRunner, "run", started)
    for name in [n for n in os.environ if n.startswith("BIGWORLD_")]:
        monkeypatch.delenv(name)


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    return lines[-1] if lines else ""


@pytest.mark.parametrize(("argv", "says", "status"), MISUSES, ids=[" ".join(m[0]) for m in MISUSES])
def test_misuse_says_what_is_wrong_and_what_to_do(
    argv: tuple[str, ...],
    says: str,
    status: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nothing_starts: None,
) -> None:
    code = cli.main([arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    err = capsys.readouterr().err
    line = last_line(err)
    assert code == status, err
    assert line.startswith("bigworld") and says in line, err


def test_a_refused_token_stops_agent_run_at_once(
    server, capsys: pytest.CaptureFixture[str], nothing_starts: None
) -> None:
    """A runner would retry a 401 forever; ``agent run`` asks once and says so."""
    argv = ["agent", "run", "--role", "policy", *MODEL_FREE[:2], "--server", server.url]
    code = cli.main([*argv, "--token", "nope"])
    assert code == 1
    line = last_line(capsys.readouterr().err)
    assert line.startswith("bigworld: 401") and "give a token the server knows with --token" in line


def test_the_issue_case_prints_its_line_as_a_process() -> None:
    """The command of issue #15 item 8, as a user types it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BIGWORLD_")}
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "agent", "run", "--role", "policy"]
        + ["--backend", "expert", "--server", "http://127.0.0.1:1", "--token", "t"],
        cwd=ROOT,
        env={**clean, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert last_line(done.stderr) == (
        "bigworld agent run: error: backend expert needs --expert-token: give a trainer's or "
        "admin's token, or set BIGWORLD_EXPERT_TOKEN"
    )
