"""Policy agents end to end on CPU: steps per second with a tiny model in both decoding modes,
and the share of wall time spent in the server versus in the model.

Starts its own world server (SQLite in a temp folder) on a free port and a tiny policy model,
then runs one policy runner per mode for a fixed number of steps. The random policy is the
baseline measured in the same run (server cost alone). Not a test:

    .venv/bin/python bench/agents_bench.py [--steps 60]
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.backends import Sampling, TransformersModel  # noqa: E402
from agents.client import BigWorldClient  # noqa: E402
from agents.models.tiny import init_model  # noqa: E402
from agents.policy_agent import ModelPolicy, PolicyRunner, RandomPolicy, RunnerConfig  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(data: Path, token: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BIGWORLD_DATA_DIR": str(data),
        "BIGWORLD_PORT": str(port),
        "BIGWORLD_ADMIN_TOKEN": token,
        "BIGWORLD_STEP_BUDGET": "20",
        "BIGWORLD_LOG_LEVEL": "warning",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve"], env=env, cwd=ROOT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server did not become ready")


def _run(
    url: str, admin: BigWorldClient, name: str, policy: object, steps: int
) -> dict[str, float]:
    creds = admin.create_agent(name, "policy")
    runner = PolicyRunner(BigWorldClient(url, creds.token), policy, RunnerConfig(poll_s=3600))  # type: ignore[arg-type]
    start = time.perf_counter()
    while runner.stats.steps < steps:
        runner.play_episode()
    wall = time.perf_counter() - start
    s = runner.stats
    return {
        "steps/s": s.steps / wall,
        "model": s.model_s / wall,
        "server": s.server_s / wall,
        "steps": s.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per mode")
    args = parser.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    with tempfile.TemporaryDirectory() as tmp:
        token = secrets.token_urlsafe(16)
        proc, url = _serve(Path(tmp) / "data", token)
        try:
            model_dir = init_model("policy", Path(tmp) / "policy")
            admin = BigWorldClient(url, token)
            rows = {
                "random (server only)": _run(url, admin, "rnd", RandomPolicy(0), args.steps),
                "tiny model, rank": _run(
                    url,
                    admin,
                    "rank",
                    ModelPolicy(TransformersModel(model_dir, device="cpu"), "rank"),
                    args.steps,
                ),
                "tiny model, generate": _run(
                    url,
                    admin,
                    "gen",
                    ModelPolicy(
                        TransformersModel(model_dir, device="cpu"), "generate", Sampling(1.0, 32, 0)
                    ),
                    args.steps,
                ),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    base = rows["random (server only)"]["steps/s"]
    print(f"{'policy':<24}{'steps/s':>10}{'vs random':>11}{'in model':>10}{'in server':>11}")
    for name, r in rows.items():
        print(
            f"{name:<24}{r['steps/s']:>10.1f}{r['steps/s'] / base:>10.2f}x{r['model']:>9.0%}{r['server']:>11.0%}"
        )


if __name__ == "__main__":
    main()
