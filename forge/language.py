"""The optional language model: a task rewriter and a failure summariser reached over an
OpenAI-compatible HTTP endpoint (vLLM's server, say), so no model ever loads in the server.

The rewriter must answer in the task schema, ``{"family": ..., "params": {...}}``; the answer
is validated with :meth:`world.tasks.Task.from_spec` and, like every proposal, must then pass
the oracle before it becomes a pending task (the caller checks that).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from forge.errors import LanguageModelError
from world.errors import TaskError
from world.tasks import Task

if TYPE_CHECKING:
    import httpx

EXAMPLES = 6  # valid variants shown to the model as examples of parameters in this world
MAX_TOKENS = 512

SYSTEM = (
    "You rewrite tasks for a text world so that a learning agent always has something worth "
    "learning. Answer with one JSON object and nothing else."
)


class LanguageModel:
    """A client of ``{url}/chat/completions`` (falling back to ``{url}/completions`` when the
    server has no chat route); temperature 0, so a deterministic server answers the same."""

    def __init__(
        self,
        url: str,
        model: str,
        timeout_s: float,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        # Imported here, not at the top: the server imports this module at start, and httpx
        # brings its command line's libraries with it; only a configured model needs it.
        import httpx

        self.url = url.rstrip("/")
        self.model = model
        self.http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self.http.close()

    def complete(self, system: str, user: str) -> str:
        """The model's answer text; raises LanguageModelError on any failure."""
        import httpx

        try:
            reply = self.http.post(
                f"{self.url}/chat/completions",
                json={
                    "model": self.model,
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    "temperature": 0,
                    "max_tokens": MAX_TOKENS,
                },
            )
            if reply.status_code == 404:
                reply = self.http.post(
                    f"{self.url}/completions",
                    json={
                        "model": self.model,
                        "prompt": f"{system}\n\n{user}\n",
                        "temperature": 0,
                        "max_tokens": MAX_TOKENS,
                    },
                )
                reply.raise_for_status()
                return str(reply.json()["choices"][0]["text"])
            reply.raise_for_status()
            return str(reply.json()["choices"][0]["message"]["content"])
        except (
            httpx.HTTPError,
            httpx.InvalidURL,
            ValueError,
            KeyError,
            IndexError,
            TypeError,
        ) as exc:
            raise LanguageModelError(
                f"expected an OpenAI-compatible answer from {self.url}, got {exc!r}"
            ) from exc


def rewrite(
    model: LanguageModel,
    task: Task,
    direction: str,
    feedback: dict[str, Any],
    examples: Sequence[Task],
) -> Task:
    """A harder or easier variant as the model writes it, validated against the task schema.
    Raises LanguageModelError when the answer is not a valid task spec."""
    shown = "\n".join(json.dumps(t.spec(), sort_keys=True) for t in examples[:EXAMPLES])
    user = (
        f"The agent's accuracy on this task is {feedback.get('accuracy')} over "
        f"{feedback.get('rollouts')} recent attempts.\n"
        f"Task: {json.dumps(task.spec(), sort_keys=True)}\n"
        f"In words: {task.text}\n"
        + (f"Where failed attempts stalled: {feedback['failures']}\n" if feedback.get("failures") else "")
        + f"Write a slightly {direction} variant of it. Valid tasks in this world look like:\n"
        f"{shown}\n"
        'Answer with exactly one JSON object {"family": ..., "params": {...}} that uses only '
        "families, parameter names and things that appear above."
    )  # fmt: skip
    answer = model.complete(SYSTEM, user)
    spec = first_json_object(answer)
    try:
        return Task.from_spec(spec)
    except TaskError as exc:
        raise LanguageModelError(f"expected a valid task spec, got {spec!r}: {exc}") from exc


def summarize(model: LanguageModel, task: Task, failures: Sequence[dict[str, Any]]) -> str:
    """One line on why rollouts of ``task`` failed, from the programmatic summaries."""
    user = (
        f"Task: {task.text}\nFailed attempts, summarised:\n"
        + "\n".join(f"- {f.get('text')}; last saw: {f.get('last_observations')}" for f in failures)
        + "\nIn one sentence, where does the agent get stuck?"
    )
    return model.complete("You analyse why an agent fails tasks in a text world.", user).strip()


def first_json_object(text: str) -> Any:
    """The first balanced ``{...}`` in ``text`` parsed as JSON (models wrap answers in prose
    or code fences); raises LanguageModelError when there is none."""
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for end in range(start, len(text)):
            ch = text[end]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start : end + 1])
                    except ValueError:
                        break
        start = text.find("{", start + 1)
    raise LanguageModelError(f"expected a JSON object in the answer, got {text[:200]!r}")
