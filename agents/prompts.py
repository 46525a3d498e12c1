"""Prompts for the policy and the reward model, and parsing of their ``\\boxed{…}`` answers.

One prompt format per role, shared by every backend, so that the trainer scores exactly the
text a rollout saw. Parsing is strict: the last ``\\boxed{…}`` of an answer counts, its content
must be an ASCII integer, and anything else is a parse failure that the caller flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

BOX = re.compile(r"\\boxed\{([^{}]*)\}")
INTEGER = re.compile(r"[+-]?[0-9]{1,9}")
HISTORY_STEPS = 6  # past steps shown to the policy: each action and what it led to, in brief
MAX_OBSERVATION_CHARS = 1200  # one observation in a prompt is cut to this length
MAX_OUTCOME_CHARS = 120  # a past step's outcome: the first sentence of its observation
TASK_LINE = "Your task is to: "


@dataclass(frozen=True)
class Turn:
    """One past step as the policy saw it."""

    action: str
    observation: str


@dataclass(frozen=True)
class Parsed:
    """A parsed answer: ``value`` is None when the answer could not be used."""

    value: int | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


def _clip(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _outcome(observation: str) -> str:
    """A past step in brief: the first sentence of what followed it ("You arrive at the
    kitchen 1.", "Nothing happens."). The present observation is shown in full, so the
    history repeats no room descriptions, which keeps prompts short for small models."""
    first = observation.strip().split(". ", 1)[0]
    return _clip(first if first.endswith(".") else first + ".", MAX_OUTCOME_CHARS)


def policy_prompt(
    task: str, history: Sequence[Turn], observation: str, admissible: Sequence[str]
) -> str:
    """The policy's prompt: task, recent steps (action and outcome), the present observation
    in full and the numbered admissible actions."""
    lines = [
        "You are an agent in a persistent text world. Nothing you do is undone.",
        f"{TASK_LINE}{task}",
    ]
    recent = list(history)[-HISTORY_STEPS:]
    if recent:
        lines.append("Recent steps:")
        for turn in recent:
            lines.append(f"> {turn.action}: {_outcome(turn.observation)}")
    lines.append("Now:")
    lines.append(_clip(observation))
    lines.append("Admissible actions:")
    lines.extend(f"{k}. {action}" for k, action in enumerate(admissible, start=1))
    lines.append("Choose one action. End your answer with its number as \\boxed{k}.")
    return "\n".join(lines) + "\n"


def first_observation_task(observation: str) -> str:
    """The task of an episode's first observation, which ends ``"\n\nYour task is to: …"``
    (as ALFWorld shows it, and as an OpenEnv reset answers it)."""
    return observation.rpartition("\n\n" + TASK_LINE)[2]


def prompt_task_and_actions(prompt: str) -> tuple[str, list[str]]:
    """The task and the recent actions a :func:`policy_prompt` shows, oldest first."""
    task, actions = "", []
    for line in prompt.splitlines():
        if line.startswith(TASK_LINE):
            task = line[len(TASK_LINE) :]
        elif line.startswith("> "):
            actions.append(line[2:].split(": ", 1)[0])
        elif line == "Now:":
            break
    return task, actions


VERDICTS = (1, -1)  # the reward model's two answers, in the order a rank-mode judge scores them


def verdict_completion(score: int) -> str:
    """The completion a ``rank``-mode judge is scored on for the verdict ``score`` (±1)."""
    return f"\\boxed{{{score}}}"


def rank_completion(k: int, action: str) -> str:
    """The completion a ``rank``-mode policy is scored on for action number ``k``."""
    return f"{action}\n\\boxed{{{k}}}"


def reward_prompt(
    policy_prompt_text: str, completion: str, action: str, next_observation: str
) -> str:
    """The reward model's prompt: what the policy saw, what it answered, what followed."""
    return (
        "\n".join(
            [
                "You judge one step of an agent in a persistent text world.",
                "The agent saw:",
                policy_prompt_text.rstrip("\n"),
                "The agent answered:",
                completion,
                f"So it did: {action}",
                "Then it observed:",
                _clip(next_observation),
                "Did this step make progress toward the task? Reason briefly, then answer "
                "\\boxed{1} for a good step or \\boxed{-1} for a bad one.",
            ]
        )
        + "\n"
    )


def parse_box(answer: str) -> Parsed:
    """The integer in the last ``\\boxed{…}`` of ``answer``."""
    boxes = BOX.findall(answer)
    if not boxes:
        return Parsed(None, "no \\boxed{} in the answer")
    content = boxes[-1].strip()
    if not INTEGER.fullmatch(content):
        return Parsed(None, f"boxed content is not an integer: {content[:40]!r}")
    return Parsed(int(content))


def parse_choice(answer: str, n_actions: int) -> Parsed:
    """A policy answer as a 0-based action index (``\\boxed{k}`` is 1-based)."""
    parsed = parse_box(answer)
    if parsed.value is None:
        return parsed
    if not 1 <= parsed.value <= n_actions:
        return Parsed(None, f"action number {parsed.value} outside 1..{n_actions}")
    return Parsed(parsed.value - 1)


def parse_judgment(answer: str) -> Parsed:
    """A reward answer as +1 or -1; anything else is unparseable (it counts 0)."""
    parsed = parse_box(answer)
    if parsed.value is None:
        return parsed
    if parsed.value not in (1, -1):
        return Parsed(None, f"judgment must be 1 or -1, got {parsed.value}")
    return parsed


def template_texts() -> Iterator[str]:
    """The fixed words of the agents' prompts and answers, once each: a tokenizer trained on
    the world's texts alone spells them out (``\\boxed{3}`` took 8 tokens)."""
    actions = [f"go to place {k}" for k in range(1, 41)]
    prompt = policy_prompt("a task", [Turn("look", "Nothing happens.")], "Now.", actions)
    yield prompt
    yield reward_prompt(prompt, rank_completion(1, actions[0]), actions[0], "Nothing happens.")
    yield from (rank_completion(k, "look") for k in range(1, len(actions) + 1))
    yield from ("good. \\boxed{1}", "bad. \\boxed{-1}")
