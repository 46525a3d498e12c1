"""Every arm of the learning bench can be drawn: an arm without a colour failed the run at its
very end, after the arms had played (integrated_oracle, the first time it ran)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
from learning_figures import COLOURS  # noqa: E402


def test_every_arm_has_a_colour() -> None:
    tree = ast.parse((BENCH / "learning.py").read_text())
    arms = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "ARMS" for t in node.targets)
    )
    assert set(arms) <= set(COLOURS), set(arms) - set(COLOURS)
