"""bigworld as a verifiers environment, run by verifiers' own ``vf-eval`` (design §7), and
in process with a scripted model.

Under ``vf-eval`` the model is the world's oracle behind a local OpenAI-compatible endpoint
(127.0.0.1 only): it asks the server's expert route for the playing agent's open episode that
the prompt shows and answers the number of that action in the prompt (a drawn go_to may lie
more than one hop away: the forge's harder variants join the pool that the session's other
tests feed). In process, a scripted model answers ``look`` and the tests count the
``POST /v1/steps`` requests. Needs the ``interop`` extra: without it these tests skip, except
under ``CI=true`` where they fail (``make test`` installs it). verifiers runs the model's turns
through its ``null`` harness, a chat program that ``uv`` (in the extra) prepares once from
PyPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from live import LiveServer, free_port, readme_snippets

from agents.client import BigWorldClient
from agents.prompts import TASK_LINE, Turn, policy_prompt
from world.schemas import AgentCreated

if importlib.util.find_spec("verifiers") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but verifiers is not installed (make interop)", pytrace=False)
    pytest.skip("needs the interop extra (make interop)", allow_module_level=True)

import uvicorn  # noqa: E402
from fastapi import Body, FastAPI  # noqa: E402
from fastapi.responses import StreamingResponse  # noqa: E402

from agents.client import AsyncBigWorldClient, Reply, Request  # noqa: E402
from agents.verifiers_env import BigWorldEnv, load_environment  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # vf-eval and uv, installed with the extra
# a local run: nothing pushed to a platform, the endpoint's key from OPENAI_API_KEY, no dashboard
LOCAL = ("--no-push", "--no-rich", "--client.api-key-var", "OPENAI_API_KEY")
ACTION = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def server(own_server: LiveServer) -> LiveServer:
    """This module's own server: the go_to episodes it plays by the dozen would change other
    modules' draws."""
    return own_server


@dataclass
class Oracle:
    """The endpoint's address, the requests it answered, and whose episode it advises on."""

    url: str
    seen: list[dict[str, Any]] = field(default_factory=list)
    player: int | None = None  # the agent id whose open episode the answers are for


def oracle_answer(oracle: Oracle, expert: BigWorldClient, prompt: str) -> str:
    """The number in ``prompt`` of the oracle's next action for the player's open episode
    whose prompt it is (episodes showing the same prompt stand alike: any of them will do)."""
    for row in expert.episodes(agent=oracle.player, status="open"):
        detail = expert.episode(row["id"])
        steps = detail["steps"]
        latest = steps[-1] if steps else detail
        history = [Turn(s["action"], s["observation"]) for s in steps]
        shown = policy_prompt(
            detail["task"]["text"], history, latest["observation"], latest["admissible_actions"]
        )
        if shown.strip() == prompt.strip():
            action = expert.expert(row["id"])["action"]
            for k, offered in ACTION.findall(prompt):
                if offered == action:
                    return f"The oracle says {action}. \\boxed{{{k}}}"
            raise AssertionError(f"the oracle's action {action!r} is not among the prompt's")
    raise AssertionError("no open episode of the player shows this prompt")


def endpoint_app(oracle: Oracle, expert: BigWorldClient) -> FastAPI:
    """A minimal OpenAI-compatible chat endpoint (streamed, as verifiers' harness asks)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, Any] = Body()) -> Any:  # noqa: B008  (a plain JSON body)
        oracle.seen.append(body)
        prompt = str(body["messages"][-1]["content"])
        answer = oracle_answer(oracle, expert, prompt)
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
def oracle_endpoint(server: LiveServer) -> Iterator[Oracle]:
    port = free_port()
    oracle = Oracle(f"http://127.0.0.1:{port}/v1")
    with BigWorldClient(server.url, server.admin_token) as expert:
        config = uvicorn.Config(
            endpoint_app(oracle, expert), host="127.0.0.1", port=port, log_level="warning"
        )
        endpoint = uvicorn.Server(config)
        thread = threading.Thread(target=endpoint.run, daemon=True)
        thread.start()
        while not endpoint.started:
            time.sleep(0.05)
        try:
            yield oracle
        finally:
            endpoint.should_exit = True
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


@pytest.mark.slow  # verifiers' own programs play whole episodes
def test_vf_eval_plays_bigworld_episodes_one_step_per_model_turn(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    oracle_endpoint: Oracle,
    tmp_path: Path,
) -> None:
    player = make_agent()
    oracle_endpoint.player = player.id
    seen_before = len(oracle_endpoint.seen)
    ran = vf_eval(
        server,
        player.token,
        oracle_endpoint.url,
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
    seen = oracle_endpoint.seen[seen_before:]
    assert len(seen) == sum(t["info"]["steps"] for t in played)
    assert TASK_LINE in str(seen[0]["messages"][-1]["content"])


@pytest.mark.slow  # verifiers' own programs play whole episodes
def test_reward_agents_votes_are_a_second_rubric_function(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    oracle_endpoint: Oracle,
    tmp_path: Path,
) -> None:
    """A reward agent judges each ended episode's steps while vf-eval waits for its votes."""
    player, judge = make_agent(), make_agent("reward")
    oracle_endpoint.player = player.id
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
            oracle_endpoint.url,
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


@pytest.mark.slow  # verifiers' own programs play whole episodes
def test_readme_verifiers_snippets_run(
    server: LiveServer,
    admin: BigWorldClient,
    make_agent: Callable[..., AgentCreated],
    oracle_endpoint: Oracle,
) -> None:
    (command,) = readme_snippets("verifiers", "sh")
    (snippet,) = readme_snippets("verifiers", "python")
    player = make_agent()
    oracle_endpoint.player = player.id
    env = {
        **os.environ,
        "BIGWORLD_SERVER": server.url,
        "BIGWORLD_TOKEN": player.token,
        "MODEL": "oracle",
        "OPENAI_BASE_URL": oracle_endpoint.url,
        "OPENAI_API_KEY": "local",
    }
    for argv in (["bash", "-c", command], [sys.executable, "-c", snippet]):
        ran = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    assert "bigworld-go_to#3" in ran.stdout and "episode tasks" in ran.stdout
    ended = [admin.episode(row["id"]) for row in admin.episodes(agent=player.id)]
    assert [(e["status"], e["family"]) for e in ended] == [("succeeded", "go_to")] * 4


@pytest.mark.slow  # verifiers' own programs play whole episodes
def test_vf_eval_plays_as_many_episodes_at_once_as_the_agent_may(
    server: LiveServer, admin: BigWorldClient, oracle_endpoint: Oracle, tmp_path: Path
) -> None:
    player = admin.create_agent(f"pair-{uuid.uuid4().hex[:8]}", "policy", max_open_episodes=2)
    oracle_endpoint.player = player.id
    ran = vf_eval(
        server,
        player.token,
        oracle_endpoint.url,
        tmp_path,
        "--env.taskset.family",
        "go_to",
        "--env.taskset.episodes",
        "4",
    )
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    episodes = [admin.episode(t["info"]["episode_id"]) for t in traces(tmp_path)]
    assert [e["status"] for e in episodes] == ["succeeded"] * 4
    assert most_open_at_once(episodes) == 2


# --- in process, with a scripted model -------------------------------------------------------


@dataclass
class ScriptedTrace:
    """What ``BigWorldEnv.run`` records on a verifiers trace."""

    info: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, tuple[float, float]] = field(default_factory=dict)

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = (value, weight)


@dataclass
class ScriptedInteraction:
    """One rollout's exchange: the model answers ``look`` for ``turns`` turns, then the
    interaction ends (as an agent's caps end it)."""

    turns: int
    prompts: list[str] = field(default_factory=list)
    trace: ScriptedTrace = field(default_factory=ScriptedTrace)

    async def turn(self, prompt: str) -> SimpleNamespace:
        self.prompts.append(prompt)
        if len(self.prompts) > self.turns:
            return SimpleNamespace(terminated=True, last_reply="")
        (k,) = [k for k, action in ACTION.findall(prompt) if action == "look"]
        return SimpleNamespace(terminated=False, last_reply=f"I look. \\boxed{{{k}}}")


@dataclass
class Scripted:
    """The agents verifiers hands ``BigWorldEnv.run``: a player and its interactions."""

    turns: int = 1_000
    interactions: list[ScriptedInteraction] = field(default_factory=list)

    @property
    def player(self) -> Scripted:
        return self

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any) -> AsyncIterator[ScriptedInteraction]:
        self.interactions.append(ScriptedInteraction(self.turns))
        yield self.interactions[-1]


def rollouts(env: BigWorldEnv, agents: Scripted) -> None:
    """Every task of ``env`` played at once, as verifiers runs them."""

    async def run() -> None:
        try:
            await asyncio.gather(*(env.run(task, agents) for task in env.taskset))
        finally:
            await env.stop()

    asyncio.run(run())


def most_open_at_once(episodes: list[dict[str, Any]]) -> int:
    """The most of these episodes that were open at one tick."""
    spans = [(e["begin_tick"], e["end_tick"]) for e in episodes]
    return max(sum(b <= begin < end for b, end in spans) for begin, _ in spans)


def test_a_token_plays_as_many_rollouts_at_once_as_its_agent_may_their_steps_batched(
    server: LiveServer, admin: BigWorldClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = admin.create_agent(f"fleet-{uuid.uuid4().hex[:8]}", "policy", max_open_episodes=4)
    batches: list[list[dict[str, Any]]] = []  # the steps of each POST /v1/steps
    send = AsyncBigWorldClient.send

    async def counting(client: AsyncBigWorldClient, request: Request) -> Reply:
        assert not (request.path.startswith("/v1/episodes/") and request.path.endswith("/steps"))
        if request.path == "/v1/steps":
            batches.append(request.json)
        return await send(client, request)

    monkeypatch.setattr(AsyncBigWorldClient, "send", counting)
    agents = Scripted()
    rollouts(load_environment(server.url, fleet.token, "go_to", 8), agents)

    traces = [interaction.trace for interaction in agents.interactions]
    episodes = [admin.episode(t.info["episode_id"]) for t in traces]
    assert len({e["id"] for e in episodes}) == 8
    assert most_open_at_once(episodes) == 4  # as many as the agent may, never more
    steps = [s for batch in batches for s in batch]
    assert len(steps) == sum(t.info["steps"] for t in traces) > len(batches)
    assert max(len(b) for b in batches) == 4
    for interaction, episode in zip(agents.interactions, episodes, strict=True):
        trace = interaction.trace
        assert episode["status"] == "failed" and trace.info["done"]  # looked to its budget
        assert trace.rewards == {"outcome": (-1.0, 1.0)}
        assert len(episode["steps"]) == trace.info["steps"] == len(interaction.prompts)
        assert [s["prompt"] for s in episode["steps"]] == interaction.prompts
        for step in episode["steps"]:
            assert (step["action"], step["policy_version"], step["mode"]) == (
                "look",
                "verifiers",
                "generate",
            )
            assert step["completion"].startswith("I look.") and not step["parse_failed"]


def test_an_interaction_that_ends_first_abandons_its_episode(
    server: LiveServer, make_agent: Callable[..., AgentCreated], admin: BigWorldClient
) -> None:
    player = make_agent()  # may hold one episode open: its rollouts play one after another
    agents = Scripted(turns=1)
    rollouts(load_environment(server.url, player.token, "go_to", 2), agents)

    episodes = [admin.episode(i.trace.info["episode_id"]) for i in agents.interactions]
    assert [e["status"] for e in episodes] == ["abandoned"] * 2
    assert [len(e["steps"]) for e in episodes] == [1, 1]
    assert most_open_at_once(episodes) == 1
    for interaction in agents.interactions:
        assert interaction.trace.info["done"] is False
        assert interaction.trace.rewards == {"outcome": (-1.0, 1.0)}
