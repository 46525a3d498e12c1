"""``bigworld agent run`` and ``bigworld model init`` as processes: a policy agent plays until
SIGTERM, then abandons its episode and exits cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live import live_server

from agents.client import BigWorldClient

ROOT = Path(__file__).resolve().parents[2]


def _bigworld(*args: str) -> list[str]:
    return [sys.executable, "-m", "server.cli", *args]


def test_sigterm_abandons_the_open_episode_and_exits(tmp_path: Path) -> None:
    with live_server(tmp_path / "data", env={"BIGWORLD_STEP_BUDGET": "1000"}) as server:
        admin = BigWorldClient(server.url, server.admin_token)
        creds = admin.create_agent("ann", "policy")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = _bigworld(
            "agent",
            "run",
            "--role",
            "policy",
            "--backend",
            "random",
            "--server",
            server.url,
            "--token",
            creds.token,
        )
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            episodes = list(admin.episodes(agent=creds.id))
            if episodes and episodes[0]["last_step"] >= 5:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        stats = json.loads(out.strip().splitlines()[-1])
        episode = admin.episode(episodes[0]["id"])
        assert episode["status"] == "abandoned" and episode["outcome"] == -1
        assert episode["last_step"] == stats["steps"]  # every step it made is stored, once


def test_model_init_builds_a_loadable_model(tmp_path: Path) -> None:
    out = tmp_path / "policy"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        _bigworld(
            "model",
            "init",
            "--kind",
            "policy",
            "--out",
            str(out),
            "--hidden-size",
            "32",
            "--layers",
            "1",
        ),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout.strip().splitlines()[-1])
    assert manifest["kind"] == "policy" and 10_000 < manifest["parameters"] < 5_000_000
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    from agents.models.tiny import load_model

    model, tokenizer = load_model(out)
    ids = tokenizer("You are in the kitchen 1.", return_tensors="pt").input_ids
    assert model(input_ids=ids).logits.shape[-1] == len(tokenizer)
    assert tokenizer.decode(ids[0]) == "You are in the kitchen 1."


# Builds the runner of ``agent run`` in a process of its own, then says how many threads torch
# runs on and the model's version.
BUILD_RUNNER = """
import argparse, sys
from agents import commands
parser = argparse.ArgumentParser()
commands.register_agent(parser.add_subparsers())
runner = commands.build_runner(parser.parse_args(sys.argv[1:]))
import torch
print(torch.get_num_threads(), runner.policy.version)
"""


@pytest.mark.slow
def test_threads_caps_torch_before_the_model_loads(tiny_models: dict[str, Path]) -> None:
    def threads(*extra: str) -> int:
        argv = ["agent", "run", "--role", "policy", "--backend", "transformers", "--token", "t"]
        argv += ["--model", str(tiny_models["policy"]), "--device", "cpu", *extra]
        env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
        done = subprocess.run(
            [sys.executable, "-c", BUILD_RUNNER, *argv],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        count, version = done.stdout.split()
        assert version  # the model did load
        return int(count)

    assert threads() == 1  # the default: processes that share the cores take one each
    assert threads("--threads", "3") == 3
