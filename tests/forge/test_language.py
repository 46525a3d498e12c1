"""The language-model rewriter and summariser against a real local OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI
from forgekit import sample

from forge import language
from forge.errors import LanguageModelError
from world.state import World


def test_rewrite_answers_in_the_task_schema(world: World) -> None:
    task = sample(world, "pick_and_place")
    variant = sample(world, "clean_and_place")
    answer = f"Sure! Here it is:\n```json\n{json.dumps(variant.spec())}\n```"
    with FakeOpenAI(lambda body: answer) as fake:
        model = language.LanguageModel(fake.url, "tiny", 5.0)
        made = language.rewrite(model, task, "harder", {"accuracy": 0.9, "rollouts": 10}, [variant])
        model.close()
    assert made == variant
    path, body = fake.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "tiny"
    assert body["temperature"] == 0
    prompt = body["messages"][-1]["content"]
    assert json.dumps(task.spec(), sort_keys=True) in prompt and "harder" in prompt


def test_completions_route_is_the_fallback(world: World) -> None:
    task = sample(world, "pick_and_place")
    with FakeOpenAI(lambda body: "They keep taking the wrong mug.", chat=False) as fake:
        model = language.LanguageModel(fake.url, "tiny", 5.0)
        text = language.summarize(model, task, [{"text": "stalled", "last_observations": []}])
        model.close()
    assert text == "They keep taking the wrong mug."
    assert [path for path, _ in fake.requests] == ["/v1/chat/completions", "/v1/completions"]


@pytest.mark.parametrize(
    "answer",
    [
        "I cannot help with that.",
        '{"family": "fly_to_moon", "params": {}}',
        '{"family": "pick_and_place", "params": {"object": "mug"}}',
        '{"family": "pick_and_place"',
    ],
)
def test_answers_out_of_schema_are_errors(world: World, answer: str) -> None:
    task = sample(world, "pick_and_place")
    with FakeOpenAI(lambda body: answer) as fake:
        model = language.LanguageModel(fake.url, "tiny", 5.0)
        with pytest.raises(LanguageModelError):
            language.rewrite(model, task, "easier", {}, [])
        model.close()


def test_an_unreachable_model_is_an_error() -> None:
    with FakeOpenAI(lambda body: "") as fake:
        url = fake.url
    model = language.LanguageModel(url, "tiny", 1.0)
    with pytest.raises(LanguageModelError):
        model.complete("system", "user")
    model.close()


def test_first_json_object_skips_prose_and_braces_in_strings() -> None:
    text = 'Note {not json}. {"a": "x}y\\"z", "b": {"c": 1}} trailing {"d": 2}'
    assert language.first_json_object(text) == {"a": 'x}y"z', "b": {"c": 1}}
