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


def test_each_arm_is_compared_with_the_one_below_it() -> None:
    """Outcome-only against the same weights frozen, a voted arm against outcome-only (or the
    frozen arm where outcome-only did not run), the forge's arm against the same loop without
    it, an exact-group arm against its arm; the difference with its 95% interval and its
    reading."""
    from learning import compare

    def arm(name: str, wins: int) -> dict:
        return {"arm": name, "last_window": {"rate": wins / 200, "n": 200}}

    rows = compare([arm("frozen", 6), arm("outcome_only", 30), arm("integrated_oracle", 32)])
    assert [(r["arm"], r["base"], r["says"]) for r in rows] == [
        ("outcome_only", "frozen", "better"),
        ("integrated_oracle", "outcome_only", "no difference shown"),
    ]
    assert rows[0]["difference"] == 0.12 and rows[0]["low"] > 0
    exact = compare([arm("outcome_only", 30), arm("outcome_only@exact", 10)])
    assert [(r["arm"], r["base"], r["says"]) for r in exact] == [
        ("outcome_only@exact", "outcome_only", "worse")
    ]
    assert compare([arm("frozen", 6)]) == []
    alone = compare([arm("frozen", 6), arm("integrated_oracle", 32)])  # no outcome-only arm
    assert [(r["arm"], r["base"], r["says"]) for r in alone] == [
        ("integrated_oracle", "frozen", "better")
    ]
    # the forge against the same loop on a fixed pool, else against outcome-only
    forged = compare(
        [arm("outcome_only", 30), arm("integrated_rm", 30), arm("integrated_rm_forge", 50)]
    )
    assert [(r["arm"], r["base"], r["says"]) for r in forged] == [
        ("integrated_rm", "outcome_only", "no difference shown"),
        ("integrated_rm_forge", "integrated_rm", "better"),
    ]
    (lone,) = compare([arm("outcome_only", 30), arm("integrated_rm_forge", 30)])
    assert lone["base"] == "outcome_only"


def test_the_comparison_reads_the_difference_standardised_to_both_arms_mix_of_starts() -> None:
    """Arms that finish as often from each start distance, one of them drawing more near starts
    over its seeds: the plain difference favours it, the standardised one does not."""
    from learning import compare

    def arm(name: str, seeds: list[dict[str, str]]) -> dict:
        wins = sum(int(c.split("/")[0]) for seed in seeds for c in seed.values())
        n = sum(int(c.split("/")[1]) for seed in seeds for c in seed.values())
        per_seed = [
            {
                "last_window": {"rate": 0.1, "n": 100},
                "per_distance": {k: {"last_window": c} for k, c in seed.items()},
            }
            for seed in seeds
        ]
        return {"arm": name, "last_window": {"rate": wins / n, "n": n}, "per_seed": per_seed}

    near = [{"1": "40/100", "4": "0/100"}, {"1": "20/50", "4": "0/150"}]
    far = [{"1": "8/20", "4": "0/180"}, {"1": "8/20", "4": "0/180"}]
    (row,) = compare([arm("outcome_only", far), arm("integrated_oracle", near)])
    assert row["low"] > 0  # plainly better: 60 of 400 against 16 of 400
    estimate, low, high = row["standardised_difference"]
    assert estimate == 0.0 and low < 0 < high


def test_the_comparison_reads_the_difference_on_the_farthest_starts() -> None:
    """The hardest starts (three moves or more) read on their own: an arm that finishes more of
    them than the other, and as many of the near ones."""
    from learning import compare

    def arm(name: str, counts: dict[str, str]) -> dict:
        wins = sum(int(c.split("/")[0]) for c in counts.values())
        n = sum(int(c.split("/")[1]) for c in counts.values())
        per_distance = {k: {"last_window": c} for k, c in counts.items()}
        return {
            "arm": name,
            "last_window": {"rate": wins / n, "n": n},
            "per_distance": per_distance,
        }

    (row,) = compare(
        [
            arm("integrated_rm", {"1": "50/100", "3": "0/100", "4": "0/100", "5": "0/10"}),
            arm("integrated_rm_forge", {"1": "50/100", "3": "15/100", "4": "5/100", "5": "0/10"}),
        ]
    )
    estimate, low, _ = row["far_difference"]
    assert estimate == round(20 / 210, 4) and low > 0
