"""Critic feedback: accuracy over the window and per policy version, the reward model's
unanimous −1 votes, and where failed rollouts stalled."""

from __future__ import annotations

from forgekit import rollouts

from forge.config import ForgeConfig
from forge.critic import Rollout, StepTrace, failure_summary, feedback


def test_accuracy_over_the_newest_window_and_per_version() -> None:
    config = ForgeConfig(window=8, min_rollouts=4)
    old = rollouts("t", 0.0, 8, start=1, version="v1")  # older, all failed
    new = rollouts("t", 0.75, 4, start=100, version="v2")
    fb = feedback("t", new + old, config)  # newest first
    assert fb.rollouts == 8 and fb.successes == 3 and fb.accuracy == 3 / 8
    assert fb.by_version == {
        "v1": {"rollouts": 4, "accuracy": 0.0},
        "v2": {"rollouts": 4, "accuracy": 0.75},
    }
    assert fb.measured and fb.last_avatar == "ann"
    assert not feedback("t", new[:3], config).measured
    assert feedback("t", [], config).accuracy is None


def test_votes_count_steps_where_every_vote_was_negative() -> None:
    made = [
        Rollout(1, "t", "ann", False, None, 10, 5, judged_steps=10, negative_steps=4),
        Rollout(2, "t", "ann", True, None, 6, 9, judged_steps=6, negative_steps=0),
    ]
    evidence = feedback("t", made, ForgeConfig()).evidence()
    assert evidence["negative_steps"] == 4 and evidence["judged_steps"] == 16
    assert evidence["negative_share"] == 4 / 16
    assert evidence["by_version"] == {"unknown": {"rollouts": 2, "accuracy": 0.5}}


def test_failure_summary_finds_the_stall() -> None:
    trace = [
        StepTrace(1, "go to kitchen 1", "You arrive at kitchen 1.", 5),
        StepTrace(2, "open fridge 1", "You open fridge 1.", 4),
        *(StepTrace(i, "take apple 1 from shelf 1", "Nothing happens.", 4) for i in range(3, 9)),
        StepTrace(9, "look", "You are in kitchen 1.", 4),
    ]
    summary = failure_summary(trace, budget=9)
    assert summary["last_progress_step"] == 2  # the plan length stopped falling there
    assert summary["most_repeated"] == {"action": "take apple 1 from shelf 1", "times": 6}
    assert summary["longest_run"]["times"] == 6 and summary["nothing_happened"] == 6
    assert summary["last_observations"] == ["Nothing happens.", "You are in kitchen 1."]
    assert summary["text"].startswith("stalled after step 2 of 9")
    # Without recorded distances, progress is the last new observation.
    plain = [StepTrace(s.step, s.action, s.observation) for s in trace]
    assert failure_summary(plain)["last_progress_step"] == 9
    assert failure_summary([])["steps"] == 0
