"""OpenEnv at /openenv (design §6), driven by openenv-core's own clients against a real server.

Needs the ``interop`` extra (``make interop``): without it these tests skip, except under
``CI=true`` where they fail (``make test`` installs it).
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
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from harness import REPO, Api, ServerProcess, db_state

if importlib.util.find_spec("openenv") is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but openenv-core is not installed (make interop)", pytrace=False)
    pytest.skip("needs the interop extra (make interop)", allow_module_level=True)

from openenv.core import GenericEnvClient  # noqa: E402
from websockets.asyncio.client import connect as ws_connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from agents.openenv_client import (  # noqa: E402
    BigWorldAction,
    BigWorldObservation,
    BigWorldOpenEnv,
    BigWorldState,
)

MAX_SESSIONS = 3
RESET_S = 5  # BIGWORLD_OPENENV_RESET_TIMEOUT_S: a socket's time to begin an episode
# The first request to /openenv loads openenv-core (seconds on a busy machine).
LOAD_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("openenv")
    proc = ServerProcess(
        f"sqlite:///{data / 'world.db'}",
        data / "data",
        BIGWORLD_OPENENV_MAX_SESSIONS=str(MAX_SESSIONS),
        BIGWORLD_OPENENV_RESET_TIMEOUT_S=str(RESET_S),
    ).start()
    try:
        loaded = httpx.get(f"{proc.url}/openenv/health", timeout=LOAD_TIMEOUT)
        assert loaded.json() == {"status": "healthy"}, loaded.text
        yield proc
    finally:
        proc.stop()


_names = iter(range(1_000_000))


def policy(admin: Api) -> tuple[Api, str]:
    """A fresh policy agent: its REST helper and its token."""
    agent = admin.agent(f"openenv-{next(_names)}")
    return agent, agent.http.headers["Authorization"].removeprefix("Bearer ")


def session(server: ServerProcess) -> Any:
    return GenericEnvClient(base_url=f"{server.url}/openenv").sync()


def refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    """The error message a refused OpenEnv call raises."""
    with pytest.raises(RuntimeError) as refused:
        call(*args, **kwargs)
    return str(refused.value)


def test_generic_client_plays_an_ordinary_episode(server: ServerProcess, admin: Api) -> None:
    agent, token = policy(admin)
    with session(server) as env:
        result = env.reset(token=token, family="go_to")
        start = result.observation
        assert set(start) == {"text", "admissible_actions", "episode_id", "step", "tick"}
        assert (start["step"], result.reward, result.done) == (0, None, False)
        assert "Your task is to: " in start["text"] and "look" in start["admissible_actions"]
        episode = start["episode_id"]
        state = env.state()
        assert state["episode_id"] == episode and state["world"] == "main"
        assert state["place"] and state["place_name"] in start["text"]
        assert state["tick"] == start["tick"] and state["status"] == "open"
        answers = []
        while not result.done:  # the oracle's next action, as a trainer may ask for it
            hint = admin.get(f"/v1/episodes/{episode}/expert").json()
            result = env.step({"action": hint["action"], "policy_version": "v-openenv"})
            answers.append(result)
        assert (result.reward, result.done) == (1.0, True)
        assert [a.reward for a in answers[:-1]] == [0.0] * (len(answers) - 1)
        assert env.state()["status"] == "succeeded"

    # The same episode over REST: its rows, its steps as answered, its events.
    detail = agent.get(f"/v1/episodes/{episode}").json()
    assert (detail["status"], detail["outcome"], detail["family"]) == ("succeeded", 1, "go_to")
    assert detail["observation"] == start["text"]
    assert [s["observation"] for s in detail["steps"]] == [a.observation["text"] for a in answers]
    assert [s["tick"] for s in detail["steps"]] == [a.observation["tick"] for a in answers]
    assert {s["policy_version"] for s in detail["steps"]} == {"v-openenv"}
    events = admin.get("/v1/events", params={"limit": 1000}).json()["items"]
    kinds = {e["kind"] for e in events if f"avatar:{detail['avatar_id']}" in e["entities"]}
    assert {"episode_begun", "goal_check", "episode_ended"} <= kinds
    listed = agent.get("/v1/episodes", params={"agent": detail["agent_id"]}).json()["items"]
    assert [e["id"] for e in listed] == [episode]


def test_async_client_and_the_typed_client(server: ServerProcess, admin: Api) -> None:
    _, token = policy(admin)

    async def play() -> tuple[dict[str, Any], dict[str, Any]]:
        async with GenericEnvClient(base_url=f"{server.url}/openenv") as env:
            start = await env.reset(token=token)
            step = await env.step({"action": "look"})
            return start.observation, step.observation

    start, step = asyncio.run(play())
    assert (step["episode_id"], step["step"]) == (start["episode_id"], 1)
    assert step["tick"] > start["tick"]

    with BigWorldOpenEnv(base_url=f"{server.url}/openenv").sync() as env:
        typed = env.reset(token=token)
        assert isinstance(typed.observation, BigWorldObservation)
        assert typed.observation.episode_id > start["episode_id"]
        moved = env.step(BigWorldAction(action="inventory"))
        again = env.step("look")
        assert (moved.observation.step, again.observation.step) == (1, 2)
        state = env.state()
        assert (state.episode_id, state.step_count) == (typed.observation.episode_id, 2)
        assert state.tick == again.observation.tick and state.world == "main"
        assert state.model_dump().keys() == BigWorldState.model_fields.keys()  # no extras


def test_the_typed_client_agrees_with_the_published_schema(server: ServerProcess) -> None:
    schema = httpx.get(f"{server.url}/openenv/schema", timeout=30).json()
    assert schema["action"] == BigWorldAction.model_json_schema()
    assert schema["observation"] == BigWorldObservation.model_json_schema()


def test_reset_begins_where_the_avatar_stands_and_never_resets_the_world(
    server: ServerProcess, admin: Api
) -> None:
    agent, token = policy(admin)
    with session(server) as env:
        first = env.reset(token=token).observation
        exit_to = next(a for a in first["admissible_actions"] if a.startswith("go to "))
        env.step({"action": exit_to})
        place = env.state()["place"]
        tick = agent.get("/v1/world").json()["tick"]
        second = env.reset(token=token).observation
        assert second["episode_id"] != first["episode_id"]
        assert second["tick"] >= tick > first["tick"]
        assert env.state()["place"] == place  # where the last episode left the avatar
    left = agent.get(f"/v1/episodes/{first['episode_id']}").json()
    assert (left["status"], left["outcome"], left["last_step"]) == ("abandoned", -1, 1)
    # Closing the session abandons its open episode too, so the avatar is free.
    deadline = time.monotonic() + 10
    while agent.get(f"/v1/episodes/{second['episode_id']}").json()["status"] == "open":
        assert time.monotonic() < deadline, "the closed session's episode is still open"
        time.sleep(0.1)


def test_refusals_carry_the_rest_code_and_change_nothing(server: ServerProcess, admin: Api) -> None:
    agent, token = policy(admin)
    revoked, revoked_token = policy(admin)
    assert admin.delete(f"/v1/agents/{revoked.id}").status_code == 200  # type: ignore[attr-defined]
    reward = admin.agent(f"judge-{next(_names)}", role="reward")
    reward_token = reward.http.headers["Authorization"].removeprefix("Bearer ")
    url = server.database_url
    with session(server) as env:
        before = db_state(url)
        assert "unauthorized: expected reset(token=...) before" in refusal(
            env.step, {"action": "look"}
        )
        assert "unauthorized: expected reset(token=" in refusal(env.reset)
        assert "unauthorized: the bearer token is not valid" in refusal(env.reset, token="bw_no")
        assert "unauthorized: the bearer token" in refusal(env.reset, token=revoked_token)
        assert "forbidden: expected role policy, got reward" in refusal(
            env.reset, token=reward_token
        )
        assert "not_found: expected world 'main'" in refusal(env.reset, token=token, world="fork")
        assert "unknown_family" in refusal(env.reset, token=token, family="juggling")
        assert "not_found: no task 'nope'" in refusal(env.reset, token=token, task="nope")
        assert "validation_error: expected reset arguments" in refusal(
            env.reset, token=token, tokn=token
        )
        assert env.state() == {"episode_id": None, "step_count": 0, "agent": None,
                               "status": None, "task_id": None, "family": None, "place": None,
                               "place_name": None, "tick": None, "world": "main"}  # fmt: skip
        assert db_state(url) == before

        env.reset(token=token)
        before = db_state(url)
        too_long = refusal(env.step, {"action": "x" * 513})
        assert "validation_error: action: String should have at most 512" in too_long
        assert "validation_error" in refusal(env.step, {"action": ""})
        assert "validation_error" in refusal(env.step, {"action": "look\x00"})
        assert "VALIDATION_ERROR" in refusal(env.step, {"action": 7})  # OpenEnv's own check
        assert "VALIDATION_ERROR" in refusal(env.step, {"action": "look", "force": True})
        assert "step_out_of_order: expected step 1, got 5" in refusal(
            env.step, {"action": "look", "step": 5}
        )
        assert db_state(url) == before
        assert env.step({"action": "look"}).observation["step"] == 1  # the session goes on
    assert agent.get("/v1/episodes").status_code == 200


def test_sessions_are_concurrent_up_to_the_limit(server: ServerProcess, admin: Api) -> None:
    tokens = [policy(admin)[1] for _ in range(MAX_SESSIONS)]

    async def open_sessions() -> list[Any]:
        envs = []
        for token in tokens:
            env = GenericEnvClient(base_url=f"{server.url}/openenv")
            for _ in range(50):  # a slot of an earlier test's session may be freeing still
                try:
                    await env.reset(token=token)
                    break
                except (RuntimeError, ConnectionClosed) as exc:
                    assert isinstance(exc, ConnectionClosed) or "rate_limited" in str(exc), exc
                    await env.disconnect()
                    await asyncio.sleep(0.1)
            envs.append(env)
        return envs

    async def play() -> tuple[list[Any], dict[str, Any]]:
        envs = await open_sessions()
        try:
            steps = await asyncio.gather(*(env.step({"action": "look"}) for env in envs))
            # One more is refused as soon as it connects (OpenEnv's client may see the socket
            # closed before it reads why, so this reads the refusal off the socket itself).
            async with ws_connect(f"ws://127.0.0.1:{server.port}/openenv/ws") as one_more:
                refused = json.loads(await asyncio.wait_for(one_more.recv(), 30))
            return steps, refused
        finally:
            await asyncio.gather(*(env.close() for env in envs))

    steps, refused = asyncio.run(play())
    assert len({s.observation["episode_id"] for s in steps}) == MAX_SESSIONS
    assert {s.observation["step"] for s in steps} == {1}
    assert (refused["type"], refused["data"]["code"]) == ("error", "CAPACITY_REACHED")
    expected = f"rate_limited: expected at most {MAX_SESSIONS} OpenEnv sessions at once"
    assert refused["data"]["message"].startswith(expected)
    avatars = {
        admin.get(f"/v1/episodes/{s.observation['episode_id']}").json()["avatar_id"] for s in steps
    }
    assert len(avatars) == MAX_SESSIONS


def test_sockets_that_begin_no_episode_lose_their_slots(server: ServerProcess, admin: Api) -> None:
    """Sockets that connect and never reset hold every slot only until the reset deadline."""
    url = f"ws://127.0.0.1:{server.port}/openenv/ws"
    _, token = policy(admin)

    async def quiet() -> Any:  # a socket that got a slot: the server says nothing to it
        for _ in range(100):  # a slot of an earlier test's session may be freeing still
            ws = await ws_connect(url)
            try:
                await asyncio.wait_for(ws.recv(), 0.5)  # a refusal: no slot yet
            except TimeoutError:
                return ws
            await ws.close()
            await asyncio.sleep(0.1)
        raise AssertionError("no OpenEnv session slot came free")

    async def play() -> tuple[list[int | None], float, Any]:
        held = [await quiet() for _ in range(MAX_SESSIONS)]
        began = time.monotonic()
        async with ws_connect(url) as one_more:  # every slot is held
            assert "CAPACITY_REACHED" in await asyncio.wait_for(one_more.recv(), 30)
        codes = []
        for ws in held:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), RESET_S + 30)
            codes.append(closed.value.rcvd.code if closed.value.rcvd else None)
        waited = time.monotonic() - began
        env = GenericEnvClient(base_url=f"{server.url}/openenv")
        try:
            return codes, waited, await env.reset(token=token)
        finally:
            await env.close()

    codes, waited, result = asyncio.run(play())
    assert codes == [1008] * MAX_SESSIONS  # policy violation: no episode begun in time
    assert waited < RESET_S + 15
    assert result.observation["step"] == 0  # the freed slot serves a new session


@pytest.mark.slow
def test_readme_openenv_snippet_runs(server: ServerProcess, admin: Api) -> None:
    readme = (REPO / "README.md").read_text()
    start = readme.index("## Train with TRL, verifiers or OpenEnv")
    section = readme[start : readme.index("\n## ", start + 1)]
    openenv = section[section.index("### OpenEnv") :].split("\n### ")[0]
    snippets = re.findall(r"```python\n(.*?)```", openenv, flags=re.DOTALL)
    assert snippets
    for snippet in snippets:
        _, token = policy(admin)
        env = {**os.environ, "BIGWORLD_SERVER": server.url, "BIGWORLD_TOKEN": token}
        ran = subprocess.run(
            [sys.executable, "-c", snippet],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "episode" in ran.stdout


def test_a_session_continues_its_episode_after_a_server_crash(
    server: ServerProcess, admin: Api
) -> None:
    """Last in this module: it kills the module's server and starts it again."""
    agent, token = policy(admin)
    lost = session(server)
    lost.connect()
    start = lost.reset(token=token).observation
    first = lost.step({"action": "look", "step": 1}).observation
    server.kill()
    with contextlib.suppress(Exception):
        lost.close()  # its socket died with the server
    server.start()
    httpx.get(f"{server.url}/openenv/health", timeout=LOAD_TIMEOUT)
    episode = start["episode_id"]
    with session(server) as env:
        held = refusal(env.reset, token=token)
        assert f"episode_open: this avatar already has an open episode ({episode})" in held
        assert f"episode_id={episode}) continues it" in held
        resumed = env.reset(token=token, episode_id=episode).observation
        assert {k: resumed[k] for k in ("text", "step", "tick")} == {
            k: first[k] for k in ("text", "step", "tick")
        }
        replay = env.step({"action": "look", "step": 1}).observation  # acknowledged before
        assert replay == first
        assert env.step({"action": "inventory"}).observation["step"] == 2
    steps = agent.get(f"/v1/episodes/{episode}").json()["steps"]
    assert [s["action"] for s in steps] == ["look", "inventory"]
