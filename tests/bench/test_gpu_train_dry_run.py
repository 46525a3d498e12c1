"""``bench/gpu_train.py --dry-run``: the GPU run's every part but vLLM and CUDA, on the CPU with
a tiny model, in the arm that uses them all (step votes from a reward model it also trains)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a server, agents, a judge and a trainer update: some 30 s


def test_the_integrated_rm_arm_trains_both_models_and_the_agents_reload(tmp_path: Path) -> None:
    out = tmp_path / "gpu_train.json"
    command = [sys.executable, "bench/gpu_train.py", "--dry-run", "--iterations", "1"]
    command += ["--arm", "integrated_rm", "--out", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, timeout=300, capture_output=True)
    figures = json.loads(out.read_text())
    assert figures["arm"] == "integrated_rm" and figures["finished"]
    assert figures["judged_episodes"] > 0
    (update,) = figures["updates"]
    assert update["samples"] > 0 and update["rm_samples"] > 0
    assert figures["agents_on_newest"]  # the new version was reloaded by every agent
