"""Rung 1 of the learning bench's ladder learns: a change that breaks learning fails CI.

Runs ``bench/learning.py --rung go_to`` for a few minutes per arm (the arms at once, so that
they share the machine's load), a cold start: untrained tiny models, one-hop go_to tasks. The
bar is looser than the bench's 10-minute one: the trained arm's last 200 episodes win at
least 0.15 more often than the frozen arm, and more often than its own first 200.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MINUTES = 4


@pytest.mark.slow
@pytest.mark.timeout(MINUTES * 60 + 600)
def test_outcome_only_learns_one_hop_go_to_from_a_cold_start(tmp_path: Path) -> None:
    command = [
        sys.executable,
        str(ROOT / "bench" / "learning.py"),
        "--rung",
        "go_to",
        "--minutes",
        str(MINUTES),
        "--parallel",
        "--window",
        "200",
        "--margin",
        "0.15",
        "--gain",
        "1.0",
        "--out",
        str(tmp_path),
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=MINUTES * 60 + 540)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "learning.json").read_text())
    arms = {a["arm"]: a for a in report["arms"]}
    assert arms["frozen"]["updates"] == 0 and arms["outcome_only"]["updates"] > 0
    assert arms["outcome_only"]["episodes"] >= 400  # two windows that do not overlap
    assert report["verdict"] and all(line.endswith("PASS") for line in report["verdict"]), report[
        "verdict"
    ]
