"""Agents end to end on CPU: policy steps per second with a tiny model in both decoding modes
(and the share of wall time spent in the server versus in the model), then reward-model votes
per second on the steps they played.

Starts its own world server (SQLite in a temp folder) on a free port and tiny models, then runs
one policy runner per mode for a fixed number of steps. The random policy is the baseline
measured in the same run (server cost alone). The tiny reward model then judges the played
steps, m = 3 votes each, in generate mode: one model call per vote is the baseline, against one
call per step and one call per batch of steps (what a generate-mode reward agent does); then in
rank mode (the two verdicts scored in one forward pass per step, the m votes drawn from their
softmax; what ``agent run`` does by default). Not a test:

    .venv/bin/python bench/agents_bench.py [--steps 60] [--judged 48]
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
from agents.reward_agent import ModelJudge  # noqa: E402

VOTES = 3


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


def _judge(admin: BigWorldClient, model_dir: Path, limit: int) -> dict[str, float]:
    """Votes per second over the first ``limit`` played steps, by steps per model call, and
    in rank mode on the same steps."""
    model = TransformersModel(model_dir, device="cpu")
    judge = ModelJudge(model, Sampling(1.0, 24, 0), "generate")
    steps = [
        (detail, step)
        for row in admin.episodes()
        for detail in [admin.episode(row["id"])]
        for step in detail["steps"]
    ][:limit]
    judge.judge(steps[0][0], [steps[0][1]], 1)  # warm-up, not timed
    rates = {}
    start = time.perf_counter()
    for detail, step in steps:  # the baseline: m calls of one answer each
        for _ in range(VOTES):
            judge.judge(detail, [step], 1)
    rates["one call per vote"] = len(steps) * VOTES / (time.perf_counter() - start)
    for size in (1, 8):
        start = time.perf_counter()
        for i in range(0, len(steps), size):
            batch = steps[i : i + size]  # a batch may span episodes here; the agent's does not
            judge.judge(batch[0][0], [step for _, step in batch], VOTES)
        rates[f"{size} step(s) per call"] = len(steps) * VOTES / (time.perf_counter() - start)
    rank = ModelJudge(model, Sampling(1.0, 24, 0), "rank")
    rank.judge(steps[0][0], [steps[0][1]], 1)  # warm-up, not timed
    start = time.perf_counter()
    for i in range(0, len(steps), 8):  # batched as the agent does; each step is one pass
        batch = steps[i : i + 8]
        rank.judge(batch[0][0], [step for _, step in batch], VOTES)
    rates["rank, 1 pass per step"] = len(steps) * VOTES / (time.perf_counter() - start)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per mode")
    parser.add_argument("--judged", type=int, default=48, help="steps the reward model judges")
    args = parser.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    with tempfile.TemporaryDirectory() as tmp:
        token = secrets.token_urlsafe(32)  # the server wants 128+ bits
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
            votes = _judge(admin, init_model("reward", Path(tmp) / "reward"), args.judged)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    base = rows["random (server only)"]["steps/s"]
    print(f"{'policy':<24}{'steps/s':>10}{'vs random':>11}{'in model':>10}{'in server':>11}")
    for name, r in rows.items():
        print(
            f"{name:<24}{r['steps/s']:>10.1f}{r['steps/s'] / base:>10.2f}x{r['model']:>9.0%}{r['server']:>11.0%}"
        )
    base = votes["one call per vote"]
    print(f"\n{'reward model, m = 3':<24}{'votes/s':>10}{'vs per vote':>13}")
    for name, rate in votes.items():
        print(f"{name:<24}{rate:>10.1f}{rate / base:>12.2f}x")


if __name__ == "__main__":
    main()
