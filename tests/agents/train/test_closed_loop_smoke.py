"""The closed loop's step credit reaches the policy: a change that breaks it fails CI.

Runs ``bench/learning.py --rung waymark_4 --arms integrated_oracle`` from a cold start for a
budget of updates, not of minutes, so that a slow machine makes the run longer rather than its
verdict luck: the oracle judges every step, the trainer turns its votes into step rewards, and
the policy's episodes after the updates finish more often than its first ones, played by the
untrained weights. Alone on the 2-core machine (seed 70), 14 updates took it from 0.05 of its
first 100 episodes to 0.23 of its last 100, and 20 updates from 0.03 to 0.69, in about two
minutes: 20 leaves the verdict a wide margin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))  # bench/ is no package
from learning_figures import rate_difference  # noqa: E402

UPDATES = 20
WINDOW = 100


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_oracles_step_votes_teach_a_cold_policy_waymark_4(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "bench" / "learning.py"),
        "--rung",
        "waymark_4",
        "--arms",
        "integrated_oracle",
        "--updates",
        str(UPDATES),
        "--minutes",
        "20",
        "--rank-uniform",
        "--window",
        str(WINDOW),
        "--seed",
        "70",
        "--out",
        str(tmp_path),
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=1440)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (arm,) = json.loads((tmp_path / "learning.json").read_text())["arms"]
    assert arm["updates"] >= UPDATES, arm["updates"]
    assert arm["episodes"] >= 2 * WINDOW  # two windows that do not overlap
    assert arm["flow"]["judged_episodes"] > 0
    first, last = arm["first_window"], arm["last_window"]
    low = rate_difference(last, first).low
    assert low > 0, f"first {WINDOW} {first}, last {WINDOW} {last}: difference's low end {low:.3f}"
