"""The action grammar: validation of raw text and parsing into :class:`Action` values.

Malformed text (empty, control characters, too long) raises :class:`ActionError` before
anything changes. Text that is well formed but outside the grammar parses to ``None`` and
the engine answers ``Nothing happens.``, as ALFWorld does.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from world.errors import ActionError

MAX_ACTION_CHARS = 512

VERBS = (
    "look", "inventory", "wait", "go", "open", "close", "use", "examine", "craft", "eat",
    "take", "put", "clean", "heat", "cool", "gather", "give", "trade",
)  # fmt: skip


@dataclass(frozen=True)
class Action:
    """A parsed action. ``obj`` and ``target`` are labels as written (``"mug 2"``); ``item`` is
    the object type a trade asks for (``trade O for ITEM at R``)."""

    verb: str
    obj: str | None = None
    target: str | None = None
    item: str | None = None

    @property
    def text(self) -> str:
        """The canonical text of this action, as listed among admissible actions."""
        match self.verb:
            case "look" | "inventory" | "wait":
                return self.verb
            case "go":
                return f"go to {self.obj}"
            case "take":
                return f"take {self.obj} from {self.target}"
            case "put":
                return f"put {self.obj} {self.target}"  # target carries "in X" / "on X"
            case "clean" | "heat" | "cool" | "gather":
                return f"{self.verb} {self.obj} with {self.target}"
            case "give":
                return f"give {self.obj} to {self.target}"
            case "trade":
                return f"trade {self.obj} for {self.item} at {self.target}"
            case _:
                return f"{self.verb} {self.obj}"


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (verb, re.compile(pattern))
    for verb, pattern in (
        ("look", r"look"),
        ("inventory", r"(?:inventory|inv|i)"),
        ("wait", r"wait"),
        ("go", r"go to (?P<obj>.+)"),
        ("take", r"take (?P<obj>.+?) from (?P<target>.+)"),
        ("put", r"put (?P<obj>.+?) (?P<prep>in/on|in|on) (?P<target>.+)"),
        ("clean", r"clean (?P<obj>.+?) with (?P<target>.+)"),
        ("heat", r"heat (?P<obj>.+?) with (?P<target>.+)"),
        ("cool", r"cool (?P<obj>.+?) with (?P<target>.+)"),
        ("gather", r"gather (?P<obj>.+?) with (?P<target>.+)"),
        ("give", r"give (?P<obj>.+?) to (?P<target>.+)"),
        ("trade", r"trade (?P<obj>.+?) for (?P<item>.+?) at (?P<target>.+)"),
        ("open", r"open (?P<obj>.+)"),
        ("close", r"close (?P<obj>.+)"),
        ("use", r"use (?P<obj>.+)"),
        ("examine", r"(?:examine|look at) (?P<obj>.+)"),
        ("craft", r"craft (?P<obj>.+)"),
        ("eat", r"eat (?P<obj>.+)"),
    )
)


def validate(text: object) -> str:
    """Check raw action text and return it normalised (lower case, single spaces)."""
    if not isinstance(text, str):
        raise ActionError(f"expected action text as a string, got {type(text).__name__}")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionError(f"expected at most {MAX_ACTION_CHARS} characters, got {len(text)}")
    bad = [
        c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") and c != " "
    ]
    if bad:
        raise ActionError(f"expected printable text, got control character {bad[0]!r}")
    normal = " ".join(text.split()).lower()
    if not normal:
        raise ActionError("expected an action, got empty text")
    return normal


def parse(text: str) -> Action | None:
    """Parse validated text; ``None`` when it is outside the grammar."""
    for verb, pattern in _PATTERNS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        groups = match.groupdict()
        target = groups.get("target")
        if verb == "put" and target is not None:
            target = f"{groups['prep']} {target}"
        return Action(verb, groups.get("obj"), target, groups.get("item"))
    return None
