"""Prompt building and parsing of awkward model answers."""

from __future__ import annotations

import pytest

from agents.prompts import (
    HISTORY_STEPS,
    Turn,
    parse_choice,
    parse_judgment,
    policy_prompt,
    rank_completion,
    reward_prompt,
)


def test_policy_prompt_numbers_actions_and_keeps_recent_history() -> None:
    history = [Turn(f"act {i}", f"obs {i}") for i in range(10)]
    prompt = policy_prompt(
        "put a mug 2 in cabinet 1", history, "You are in the kitchen 1.", ["look", "go to square 1"]
    )
    assert "Your task is to: put a mug 2 in cabinet 1" in prompt
    assert "1. look\n2. go to square 1\n" in prompt
    assert f"> act {10 - HISTORY_STEPS}" in prompt and f"> act {9 - HISTORY_STEPS}" not in prompt
    assert prompt.endswith("\\boxed{k}.\n")


def test_history_shows_each_past_step_in_brief_and_the_present_in_full() -> None:
    room = "You arrive at the kitchen 1. You are in the kitchen 1. On the stove 1, you see a pot 1."
    history = [Turn("go to kitchen 1", room), Turn("examine pot 1", "Nothing happens.")]
    prompt = policy_prompt("t", history, room, ["look"])
    assert "> go to kitchen 1: You arrive at the kitchen 1.\n" in prompt
    assert "> examine pot 1: Nothing happens.\n" in prompt
    assert prompt.count("On the stove 1") == 1  # only in the present observation
    outcome = policy_prompt("t", [Turn("look", "y" * 500)], "z", ["look"])
    assert "> look: " + "y" * 117 + "...\n" in outcome


def test_long_observations_are_clipped() -> None:
    prompt = policy_prompt("t", [], "x" * 5000, ["look"])
    assert "x" * 1197 + "..." in prompt and "x" * 1198 not in prompt


@pytest.mark.parametrize(
    ("answer", "n", "expected"),
    [
        ("I think \\boxed{2}", 3, 1),
        ("\\boxed{ 3 }", 3, 2),
        ("first \\boxed{1} then \\boxed{3}", 3, 2),  # two boxes: the last one counts
        ("\\boxed{+1}", 3, 0),
        ("\\boxed{007}", 9, 6),
        (rank_completion(2, "go to kitchen 1"), 2, 1),
    ],
)
def test_parse_choice_accepts(answer: str, n: int, expected: int) -> None:
    parsed = parse_choice(answer, n)
    assert parsed.ok and parsed.value == expected


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "2",  # no box
        "\\boxed{}",
        "\\boxed{two}",  # boxed text
        "\\boxed{go to kitchen 1}",
        "\\boxed{0}",  # 1-based
        "\\boxed{4}",  # out of range
        "\\boxed{99999999999999999999}",  # huge number
        "\\boxed{-1}",
        "\\boxed{３}",  # full-width digit
        "\\boxed{1.5}",
        "\\boxed{2",  # unclosed
        "boxed{2}",
    ],
)
def test_parse_choice_rejects(answer: str) -> None:
    parsed = parse_choice(answer, 3)
    assert not parsed.ok and parsed.reason


@pytest.mark.parametrize(
    ("answer", "score"),
    [("good \\boxed{1}", 1), ("\\boxed{-1}", -1), ("\\boxed{1} no, \\boxed{-1}", -1)],
)
def test_parse_judgment(answer: str, score: int) -> None:
    assert parse_judgment(answer).value == score


@pytest.mark.parametrize(
    "answer", ["\\boxed{0}", "\\boxed{2}", "yes", "\\boxed{good}", "\\boxed{-١}"]
)
def test_unparseable_judgments(answer: str) -> None:
    assert not parse_judgment(answer).ok


def test_reward_prompt_shows_prompt_answer_and_next_observation() -> None:
    text = reward_prompt("PROMPT\n", "\\boxed{1}", "look", "You are in the kitchen 1.")
    assert "PROMPT\nThe agent answered:\n\\boxed{1}\nSo it did: look\n" in text
    assert "You are in the kitchen 1." in text and text.endswith("bad one.\n")
