"""Action text: malformed input is a typed error before anything changes; every verb parses."""

from __future__ import annotations

import pytest

from world import actions
from world.actions import MAX_ACTION_CHARS, Action
from world.errors import ActionError

MALFORMED = [
    "",
    "   ",
    "\t\n ",
    "look\x00",
    "take mug 1\nfrom sink 1",
    "go to\tkitchen 1",
    "look\x1b[2J",
    "open fridge 1\x7f",
    "look\u200b",  # zero-width space: a format character
    "x" * (MAX_ACTION_CHARS + 1),
]


@pytest.mark.parametrize("text", MALFORMED, ids=repr)
def test_validate_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ActionError):
        actions.validate(text)


def test_validate_rejects_non_strings() -> None:
    with pytest.raises(ActionError, match="string"):
        actions.validate(None)
    with pytest.raises(ActionError, match="string"):
        actions.validate(b"look")


def test_validate_limit_is_exactly_max_chars() -> None:
    assert actions.validate("l" * MAX_ACTION_CHARS) == "l" * MAX_ACTION_CHARS
    with pytest.raises(ActionError, match=str(MAX_ACTION_CHARS)):
        actions.validate("l" * (MAX_ACTION_CHARS + 1))


def test_validate_normalises_case_and_spaces() -> None:
    assert actions.validate("  Take   MUG 1  from Sink 1 ") == "take mug 1 from sink 1"


@pytest.mark.parametrize("text", MALFORMED, ids=repr)
def test_malformed_text_changes_nothing(sim, text: str) -> None:
    before, tick, events = sim.hash(), sim.tick, len(sim.backend.events)
    with pytest.raises(ActionError):
        sim.step("a", text)
    assert sim.hash() == before
    assert sim.tick == tick
    assert len(sim.backend.events) == events


PARSES = [
    ("look", Action("look")),
    ("inventory", Action("inventory")),
    ("inv", Action("inventory")),
    ("i", Action("inventory")),
    ("wait", Action("wait")),
    ("go to kitchen 1", Action("go", "kitchen 1")),
    ("go to north road", Action("go", "north road")),
    ("open fridge 1", Action("open", "fridge 1")),
    ("close fridge 1", Action("close", "fridge 1")),
    ("take mug 1 from sink 1", Action("take", "mug 1", "sink 1")),
    ("take fishing rod 2 from ice box 1", Action("take", "fishing rod 2", "ice box 1")),
    ("put mug 1 in cabinet 2", Action("put", "mug 1", "in cabinet 2")),
    ("put mug 1 on countertop 1", Action("put", "mug 1", "on countertop 1")),
    ("put mug 1 in/on countertop 1", Action("put", "mug 1", "in/on countertop 1")),
    ("clean mug 1 with sink 1", Action("clean", "mug 1", "sink 1")),
    ("heat apple 2 with microwave 1", Action("heat", "apple 2", "microwave 1")),
    ("cool apple 2 with fridge 1", Action("cool", "apple 2", "fridge 1")),
    ("use desk lamp 1", Action("use", "desk lamp 1")),
    ("examine iron ore 3", Action("examine", "iron ore 3")),
    ("look at mug 1", Action("examine", "mug 1")),
    ("gather berry bush 1 with basket 2", Action("gather", "berry bush 1", "basket 2")),
    ("craft iron ingot", Action("craft", "iron ingot")),
    ("give mug 1 to bob", Action("give", "mug 1", "bob")),
    (
        "trade book 1 for fishing rod at stall 2",
        Action("trade", "book 1", "stall 2", "fishing rod"),
    ),
    ("trade fork 1 for bread at stall 1", Action("trade", "fork 1", "stall 1", "bread")),
    ("eat apple 1", Action("eat", "apple 1")),
]


@pytest.mark.parametrize(("text", "expected"), PARSES, ids=[t for t, _ in PARSES])
def test_parse_every_verb(text: str, expected: Action) -> None:
    assert actions.parse(actions.validate(text)) == expected


def test_every_verb_has_a_parse_case() -> None:
    assert {a.verb for _, a in PARSES} == set(actions.VERBS)


@pytest.mark.parametrize(
    "action",
    [a for _, a in PARSES if a.verb != "put"] + [Action("put", "mug 1", "in cabinet 2")],
    ids=lambda a: a.verb,
)
def test_canonical_text_parses_back(action: Action) -> None:
    assert actions.parse(action.text) == action


@pytest.mark.parametrize(
    "text",
    ["dance", "go kitchen 1", "take mug 1", "put mug 1", "clean mug 1", "give mug 1",
     "go to", "look around", "craft", "eat", "gather tree 1", "heat apple 1 in stove 1",
     "trade book 1 for bread", "trade book 1 at stall 1", "trade for bread at stall 1"],
)  # fmt: skip
def test_outside_the_grammar_parses_to_none(text: str) -> None:
    assert actions.parse(actions.validate(text)) is None


def test_non_grammar_text_is_a_rejected_step_not_an_error(sim) -> None:
    result = sim.step("a", "dance wildly")
    assert not result.accepted and result.observation == "Nothing happens."
    rejected = [e for e in sim.backend.events if e.kind == "rejected"]
    assert rejected and rejected[-1].payload["text"] == "dance wildly"
