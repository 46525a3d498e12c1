"""The learning bench's step figures: which steps the oracle calls good, split by whether the
goal's name was among the exits when the step was taken, and which moves went straight back."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.train.config import TrainConfig

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
from learning_figures import (  # noqa: E402
    credit_by_move,
    judge_accuracy,
    move_kinds,
    pool,
    summarise,
    toward_goal,
    turned_back,
)


def episode(start: int, after: list[int | None], success: bool = False) -> dict:
    steps = [
        {
            "step": i + 1,
            "distance": d,
            "success": success and i == len(after) - 1,
            "observation": "",
        }
        for i, d in enumerate(after)
    ]
    return {"distance": start, "steps": steps}


def test_steps_are_judged_near_and_far_from_the_distance_before_them() -> None:
    # 3 → 2 (good, far), 2 → 2 (bad, far), 2 → 1 (good, far), 1 → 2 (bad, near), 2 → 1 (good)
    counts = toward_goal(episode(3, [2, 2, 1, 2, 1]))
    assert counts == {
        "closer": 3,
        "judged": 5,
        "closer_near": 0,
        "judged_near": 1,
        "closer_far": 3,
        "judged_far": 4,
    }


def test_the_winning_step_is_good_and_unknown_distances_are_not_judged() -> None:
    # 1 → goal (good, near, its distance recorded 0); then an episode with no distances
    assert toward_goal(episode(1, [0], success=True))["closer_near"] == 1
    unknown = toward_goal(episode(None, [None, None]))  # type: ignore[arg-type]
    assert unknown["judged"] == 0 and unknown["closer"] == 0


def test_an_arms_share_of_good_steps_is_pooled_over_seeds_by_step() -> None:
    args = argparse.Namespace(minutes=1, window=2, families=["go_to"])

    def arm(*episodes: dict) -> dict:
        rows = [
            {"t": i, "success": False, "family": "go_to", **toward_goal(e), **turned_back(e)}
            for i, e in enumerate(episodes)
        ]
        figures = {
            "prompt_tokens": {},
            "candidates": {},
            "reward_accuracy": {},
            "reward_votes": {},
            "reward_by_step": {},
            "reward_votes_by_step": {},
        }
        return {
            "arm": "outcome_only",
            "episodes": rows,
            "updates": [],
            "versions": [],
            "flow": {},
            "grouping_signal": {},
            "credit_by_move": {},
            **figures,
        }

    one = summarise(arm(episode(2, [1, 0]), episode(2, [3, 2])), args)
    two = summarise(arm(episode(1, [2])), args)
    assert one["last_closer"]["n"] == 4 and one["last_closer"]["rate"] == 0.75
    assert one["last_closer_near"]["n"] == 1 and one["last_closer_near"]["rate"] == 1.0
    pooled = pool([one, two])
    assert pooled["last_closer"]["n"] == 5 and pooled["last_closer"]["rate"] == 0.6
    assert [s["last_closer"]["n"] for s in pooled["per_seed"]] == [4, 1]
    assert pooled["last_back"] is None  # no observations: no move after a move


def test_a_move_straight_back_where_the_last_move_came_from_is_counted() -> None:
    def walked(*observations: str) -> dict:
        steps = [{"step": i + 1, "observation": o} for i, o in enumerate(observations)]
        return {"observation": "You are in the square 1. It is a spring morning.", "steps": steps}

    there = "You arrive at the {}. You see a floor 1."
    # square -> road -> square (back) -> road (back) ; look ; -> tunnel (after no move)
    counts = turned_back(
        walked(
            there.format("south road"),
            there.format("square 1"),
            there.format("south road"),
            "You see a floor 1.",
            there.format("tunnel 3"),
            there.format("tunnel 4"),
        )
    )
    assert counts == {"back": 2, "after_move": 3}
    assert turned_back({"steps": []}) == {"back": 0, "after_move": 0}


THERE = "You arrive at the {}. You see a floor 1."


def walk(start: int, moves: list[tuple[str, int]], success: bool = False) -> dict:
    """An ended episode from the square 1, each move (the place, its distance after), the
    oracle's three votes on each step recorded as the judge would post them."""
    steps, judgments, before = [], [], start
    for i, (place, after) in enumerate(moves):
        won = success and i == len(moves) - 1
        steps.append(
            {
                "step": i + 1,
                "distance": after,
                "success": won,
                "observation": THERE.format(place),
                "prompt": "p",
                "completion": "c",
                "action": f"go to {place}",
                "policy_version": "v1",
            }
        )
        score = 1 if won or after < before else -1
        judgments += [
            {"step": i + 1, "vote": v, "score": score, "model_version": "oracle"} for v in range(3)
        ]
        before = after
    return {
        "id": len(moves) * 100 + start,
        "status": "succeeded" if success else "failed",
        "outcome": 1 if success else -1,
        "task": {"id": "t", "family": "trail"},
        "family": "trail",
        "distance": start,
        "observation": "You are in the square 1. It is a spring morning.",
        "steps": steps,
        "judgments": judgments,
    }


def test_moves_are_told_apart_by_where_they_went_and_what_the_last_move_was() -> None:
    # square (2) -> road (3, wrong) -> square (back after wrong) -> tunnel (1, toward)
    # -> square (back after right) -> tunnel (back after wrong) -> hall (winning)
    moves = [("road", 3), ("square 1", 2), ("tunnel", 1), ("square 1", 2), ("tunnel", 1)]
    kinds = move_kinds(walk(2, [*moves, ("hall", 0)], success=True))
    assert kinds == {
        1: "away",
        2: "back_after_wrong",
        3: "toward",
        4: "back_after_right",
        5: "back_after_wrong",
        6: "winning",
    }


def test_ranked_failed_groups_credit_the_moves_the_votes_call_good() -> None:
    # two failed walks from 2 moves away, one group: wrong then back, right then back
    wrong_first = walk(2, [("road", 3), ("square 1", 2)])
    right_first = walk(2, [("tunnel", 1), ("square 1", 2)])
    unjudged = walk(2, [("road", 3)]) | {"id": 8, "judgments": []}  # the arm ended first
    details = [wrong_first, right_first | {"id": 7}, unjudged]
    voted = TrainConfig(mode="integrated_frozen_rm", rank_uniform_groups=True, group_by="distance")
    credit = credit_by_move(details, voted)
    assert {k: c["mean"] for k, c in credit.items() if not k.endswith("_uniform")} == {
        "away": -1.0,
        "back_after_wrong": 1.0,
        "toward": 1.0,
        "back_after_right": -1.0,
    }
    assert credit["back_after_wrong_uniform"]["n"] == 1
    # outcome only, a group that all failed gives no sample; unranked, neither does it
    assert credit_by_move(details, TrainConfig(mode="outcome_only")) == {}
    assert credit_by_move(details, TrainConfig(mode="integrated_frozen_rm")) == {}


def test_the_judge_is_measured_on_good_and_bad_steps_the_good_steps_of_failures_and_moves() -> None:
    # a failed episode: 3 → 2 (good) → 3 (bad, a move) → 3 (bad, not a move); a won one
    failed, won = episode(3, [2, 3, 3]), episode(1, [0], success=True)
    failed["steps"][1]["observation"] = "You arrive at the road 1. On it, you see nothing."

    def judged(detail: dict, version: str, scores: list[int]) -> dict:
        votes = [
            {"step": i + 1, "score": s, "model_version": version} for i, s in enumerate(scores)
        ]
        return {**detail, "judgments": votes}

    # version 1 calls every step bad; version 2 calls every move good, like a judge that reads
    # the action's words and not where it leads
    figures = judge_accuracy(
        [
            judged(failed, "1", [-1, -1, -1]),
            judged(won, "1", [-1]),
            judged(failed, "2", [1, 1, -1]),
        ]
    )
    assert figures["reward_accuracy"] == {"1": 0.5, "2": round(2 / 3, 3)}
    assert figures["reward_votes"] == {"1": 4, "2": 3}
    assert figures["reward_votes_by_step"]["2"] == {
        "all": 3,
        "good": 1,
        "good_in_failures": 1,
        "bad": 2,
        "bad_move": 1,
        "bad_other": 1,
    }
    assert figures["reward_by_step"]["1"] == {
        "good": 0.0,
        "bad": 1.0,
        "good_in_failures": 0.0,
        "bad_move": 1.0,
        "bad_other": 1.0,
    }
    assert figures["reward_by_step"]["2"] == {
        "good": 1.0,
        "bad": 0.5,
        "good_in_failures": 1.0,
        "bad_move": 0.0,
        "bad_other": 1.0,
    }
