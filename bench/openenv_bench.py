"""OpenEnv benchmark (not a test): persisted steps through OpenEnv's own client at /openenv.

Prints, all measured in the same run, in alternating rounds so that load from elsewhere on the
machine hits every kind alike (medians over the rounds):

- steps/s through OpenEnv's ``GenericEnvClient`` against bigworld's ``/openenv``, with 1 and 16
  sessions, over the project's REST client (``AsyncBigWorldClient``) on the same server with 1
  and 16 clients (goal >= 0.9);
- the same over openenv-core's echo environment (the one ``openenv init`` writes) served by
  openenv-core's ``create_app`` with 1 and 16 sessions: an in-memory step, nothing persisted
  (goal >= 1: a persisted bigworld step at least as fast as an echo step).

Every client is asyncio in this one process (OpenEnv's client is async; its ``.sync()`` wrapper
only adds a thread hop). Needs the interop extra (``make interop``). Usage::

    .venv/bin/python bench/openenv_bench.py [--steps 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from openenv.core import GenericEnvClient

from agents.client import AsyncBigWorldClient

REPO = Path(__file__).resolve().parents[1]
ADMIN = secrets.token_urlsafe(32)  # the server refuses admin tokens under 128 bits
SESSIONS = 16
ECHO_APP = """
import uvicorn
from openenv.core.env_server.http_server import create_app
from server.echo_bench_environment import EchoBenchEnvironment
from models import EchoBenchAction, EchoBenchObservation

app = create_app(EchoBenchEnvironment, EchoBenchAction, EchoBenchObservation,
                 env_name="echo_bench", max_concurrent_envs={sessions})
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning")
"""

Step = Callable[[], Awaitable[None]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(cmd: list[str], ready_url: str, cwd: Path = REPO) -> Iterator[None]:
    """Run a server in its own process group until ``ready_url`` answers; stop it after."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "BIGWORLD_ADMIN_TOKEN": ADMIN}
    log = open(Path(tempfile.gettempdir()) / f"openenv-bench-{os.getpid()}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode} (log: {log.name})")
            try:
                # The first /openenv request loads openenv-core: wait for it here, not in a round.
                if httpx.get(ready_url, timeout=60).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


@contextmanager
def bigworld() -> Iterator[str]:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="openenv-bench-"))
    cmd = [
        *(sys.executable, "-m", "server.cli", "serve", "--port", str(port)),
        *("--data-dir", str(data), "--log-level", "warning"),
        *("--step-budget", "100000", "--rate-limit", "1000000"),
    ]
    with process(cmd, f"http://127.0.0.1:{port}/openenv/health"):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def echo() -> Iterator[str]:
    """openenv-core's echo environment, as ``openenv init`` writes it, served by its create_app."""
    root = Path(tempfile.mkdtemp(prefix="openenv-echo-"))
    subprocess.run(
        [str(Path(sys.executable).parent / "openenv"), "init", "echo_bench", "-o", str(root)],
        check=True,
        capture_output=True,
    )
    port = free_port()
    script = ECHO_APP.format(sessions=SESSIONS, port=port)
    with process(
        [sys.executable, "-c", script], f"http://127.0.0.1:{port}/health", root / "echo_bench"
    ):
        yield f"http://127.0.0.1:{port}"


# -- one stepper per client; each returns the coroutine function of one step -----------------
async def rest_stepper(url: str, token: str) -> Step:
    client = AsyncBigWorldClient(url, token)
    start = await client.begin_episode()
    state = {"episode": start.episode_id, "index": 0, "admissible": start.admissible_actions}

    async def step() -> None:
        state["index"] += 1
        admissible = state["admissible"]
        action = admissible[(state["index"] * 7) % len(admissible)]
        result = await client.step(state["episode"], state["index"], action)
        state["admissible"] = result.admissible_actions or ["look"]
        if result.done:
            begun = await client.begin_episode()
            state.update(episode=begun.episode_id, index=0, admissible=begun.admissible_actions)

    return step


async def openenv_stepper(url: str, token: str) -> Step:
    env = GenericEnvClient(base_url=f"{url}/openenv")
    first = await env.reset(token=token)
    state = {"turn": 0, "admissible": first.observation["admissible_actions"]}

    async def step() -> None:
        state["turn"] += 1
        admissible = state["admissible"]
        result = await env.step({"action": admissible[(state["turn"] * 7) % len(admissible)]})
        state["admissible"] = result.observation["admissible_actions"] or ["look"]
        if result.done:
            begun = await env.reset(token=token)
            state["admissible"] = begun.observation["admissible_actions"]

    return step


async def echo_stepper(url: str) -> Step:
    env = GenericEnvClient(base_url=url)
    await env.reset()

    async def step() -> None:
        await env.step({"message": "look"})

    return step


async def rate(steppers: list[Step], steps_each: int) -> float:
    """Steps per second with every stepper stepping ``steps_each`` times at once."""

    async def run(step: Step) -> None:
        for _ in range(steps_each):
            await step()

    for step in steppers:  # warm-up
        await step()
    started = time.perf_counter()
    await asyncio.gather(*(run(s) for s in steppers))
    return len(steppers) * steps_each / (time.perf_counter() - started)


async def measure(url: str, echo_url: str, steps: int, rounds: int) -> dict[str, float]:
    admin = AsyncBigWorldClient(url, ADMIN)
    tokens = [(await admin.create_agent(f"bench-{i}", "policy")).token for i in range(2 * SESSIONS)]
    rest = [await rest_stepper(url, t) for t in tokens[:SESSIONS]]
    openenv = [await openenv_stepper(url, t) for t in tokens[SESSIONS:]]
    echoes = [await echo_stepper(echo_url) for _ in range(SESSIONS)]
    kinds = {"rest": rest, "openenv": openenv, "echo": echoes}
    rates: dict[str, list[float]] = {f"{k}_{n}": [] for k in kinds for n in (1, SESSIONS)}
    for _ in range(rounds):
        for kind, steppers in kinds.items():
            rates[f"{kind}_1"].append(await rate(steppers[:1], steps // rounds))
            each = max(4, steps // rounds // 4)
            rates[f"{kind}_{SESSIONS}"].append(await rate(steppers, each))
    return {name: statistics.median(values) for name, values in rates.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps of one client per kind")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians)")
    args = parser.parse_args(argv)
    with bigworld() as url, echo() as echo_url:
        out = asyncio.run(measure(url, echo_url, args.steps, args.rounds))
    for n in (1, SESSIONS):
        print(
            f"{n:>2} session(s): openenv {out[f'openenv_{n}']:7.1f} steps/s, "
            f"rest {out[f'rest_{n}']:7.1f}, echo {out[f'echo_{n}']:7.1f}; "
            f"openenv/rest {out[f'openenv_{n}'] / out[f'rest_{n}']:.2f} (goal >= 0.9), "
            f"openenv/echo {out[f'openenv_{n}'] / out[f'echo_{n}']:.2f} (goal >= 1)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
