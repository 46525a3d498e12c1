"""bigworld as a verifiers environment, run by verifiers' own ``vf-eval`` (design §7).

The model is the go_to oracle behind a local OpenAI-compatible endpoint (127.0.0.1 only): it
reads the policy prompt and answers the number of the ``go to`` action the task names. Needs
the ``interop`` extra: without it these tests skip, except under ``CI=true`` where they fail
(``make test`` installs it). verifiers runs the model's turns through its ``null`` harness, a
chat program that ``uv`` (in the extra) prepares once from PyPI.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live import LiveServer, free_port, readme_snippets

from agents.client import AgentCredentials, BigWorldClient
from agents.prompts import TASK_LINE

if importlib.util.find_spec("verifiers") is None or importlib.util.find_spec("openenv") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but verifiers is not installed (make interop)", pytrace=False)
    pytest.skip("needs the interop extra (make interop)", allow_module_level=True)

import uvicorn  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import StreamingResponse  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # vf-eval and uv, installed with the extra
# a local run: nothing pushed to a platform, the endpoint's key from OPENAI_API_KEY, no dashboard
LOCAL = ("--no-push", "--no-rich", "--client.api-key-var", "OPENAI_API_KEY")
ACTION = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)


def oracle_answer(prompt: str) -> str:
    """The go_to oracle: the number of the ``go to`` action whose place the task names."""
    task = next((line for line in prompt.splitlines() if line.startswith(TASK_LINE)), "")
    for k, action in ACTION.findall(prompt):
        if action.startswith("go to ") and action.removeprefix("go to ") in task:
            return f"The task names it. \\boxed{{{k}}}"
    return "\\boxed{1}"


def endpoint_app(seen: list[dict[str, Any]]) -> FastAPI:
    """A minimal OpenAI-compatible chat endpoint (streamed, as verifiers' harness asks)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        body = await request.json()
        seen.append(body)
        prompt = str(body["messages"][-1]["content"])
        answer = oracle_answer(prompt)
        base = {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model", "oracle")

        def chunks() -> Iterator[str]:
            first = {"index": 0, "delta": {"role": "assistant", "content": answer}}
            yield f"data: {json.dumps({**base, 'choices': [first]})}\n\n"
            last = {"index": 0, "delta": {}, "finish_reason": "stop"}
            usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": 4}
            usage["total_tokens"] = usage["prompt_tokens"] + 4
            yield f"data: {json.dumps({**base, 'choices': [last], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return app


@pytest.fixture(scope="module")
def oracle_endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    port = free_port()
    config = uvicorn.Config(endpoint_app(seen), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def vf_eval(
    server: LiveServer, token: str, endpoint: str, out: Path, *taskset: str
) -> subprocess.CompletedProcess[str]:
    """``vf-eval bigworld-verifiers`` on the world at ``server`` with the model at ``endpoint``."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OPENAI_API_KEY": "local"}
    world = ("--env.taskset.url", server.url, "--env.taskset.token", token, *taskset)
    model = ("-m", "oracle", "--client.base-url", endpoint)
    return subprocess.run(
        [str(BIN / "vf-eval"), "bigworld-verifiers", *world, *model, *LOCAL, "-o", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def traces(out: Path) -> list[dict[str, Any]]:
    lines = [line for f in out.rglob("traces.jsonl") for line in f.read_text().splitlines()]
    return [trace for line in lines for trace in json.loads(line)["traces"]]


def test_vf_eval_plays_bigworld_episodes_one_step_per_model_turn(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCredentials],
    oracle_endpoint: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    url, seen = oracle_endpoint
    player = make_agent()
    ran = vf_eval(
        server,
        player.token,
        url,
        tmp_path,
        "--env.taskset.family",
        "go_to",
        "--env.taskset.episodes",
        "2",
    )
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    played = traces(tmp_path)
    assert len(played) == 2
    for trace in played:
        detail = admin.episode(trace["info"]["episode_id"])
        assert (detail["status"], detail["family"]) == ("succeeded", "go_to")
        assert trace["rewards"]["outcome"]["score"] == 1.0
        assert "votes" not in trace["rewards"]  # nobody judged, and it did not wait
        assert len(detail["steps"]) == trace["info"]["steps"] >= 1  # one step per model turn
        assert {s["policy_version"] for s in detail["steps"]} == {"verifiers"}
        assert all(s["completion"].endswith("}") for s in detail["steps"])
    assert len(seen) == sum(t["info"]["steps"] for t in played)
    assert TASK_LINE in str(seen[0]["messages"][-1]["content"])


def test_reward_agents_votes_are_a_second_rubric_function(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCredentials],
    oracle_endpoint: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    """A reward agent judges each ended episode's steps while vf-eval waits for its votes."""
    url, _ = oracle_endpoint
    player, judge = make_agent(), make_agent("reward")
    stop = threading.Event()

    def judging() -> None:  # every step of the player's ended episodes gets one -1 vote
        with BigWorldClient(server.url, judge.token) as client:
            judged: set[int] = set()
            while not stop.is_set():
                for row in admin.episodes(agent=player.id):
                    if row["status"] != "open" and row["id"] not in judged:
                        detail = admin.episode(row["id"])
                        votes = [
                            {
                                "step": s["step"],
                                "vote": 1,
                                "score": -1,
                                "rationale": "no",
                                "model_version": "j",
                            }
                            for s in detail["steps"]
                        ]
                        with contextlib.suppress(Exception):
                            client.post_judgments(row["id"], votes)
                            judged.add(row["id"])
                stop.wait(0.2)

    thread = threading.Thread(target=judging, daemon=True)
    thread.start()
    try:
        ran = vf_eval(
            server,
            player.token,
            url,
            tmp_path,
            "--env.taskset.episodes",
            "1",
            "--env.taskset.votes-wait-s",
            "60",
            "--env.taskset.lam",
            "0.5",
        )
    finally:
        stop.set()
        thread.join(timeout=10)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    (trace,) = traces(tmp_path)
    assert trace["rewards"]["outcome"]["score"] == 1.0
    assert trace["rewards"]["votes"] == {"score": -1.0, "weight": 0.5}


def test_readme_verifiers_snippets_run(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCredentials],
    oracle_endpoint: tuple[str, list[dict[str, Any]]],
) -> None:
    (command,) = readme_snippets("verifiers", "sh")
    (snippet,) = readme_snippets("verifiers", "python")
    player = make_agent()
    env = {
        **os.environ,
        "BIGWORLD_SERVER": server.url,
        "BIGWORLD_TOKEN": player.token,
        "MODEL": "oracle",
        "OPENAI_BASE_URL": oracle_endpoint[0],
        "OPENAI_API_KEY": "local",
    }
    for argv in (["bash", "-c", command], [sys.executable, "-c", snippet]):
        ran = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    assert "bigworld-go_to#3" in ran.stdout and "episode tasks" in ran.stdout
    ended = [admin.episode(row["id"]) for row in admin.episodes(agent=player.id)]
    assert [(e["status"], e["family"]) for e in ended] == [("succeeded", "go_to")] * 4
