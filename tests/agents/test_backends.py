"""Batched generation: one call answers many prompts, n answers each, in prompt order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agents.backends import Generated, Sampling, TransformersModel
from agents.reward_agent import ModelJudge

PROMPTS = [
    "You arrive at the kitchen 1.",
    "Task: put a mug in the fridge.\nYou see a counter 1, a fridge 1 and a table 2.\nActions:",
    "go",
]


@pytest.fixture(scope="module")
def model(tiny_models: dict[str, Path]) -> TransformersModel:
    return TransformersModel(tiny_models["reward"], device="cpu")


def test_a_batch_of_prompts_of_different_lengths_decodes_as_each_prompt_alone(
    model: TransformersModel,
) -> None:
    greedy = Sampling(temperature=0.0, max_new_tokens=10)
    alone = [model.generate([p], greedy)[0] for p in PROMPTS]
    assert model.generate(PROMPTS, greedy) == alone  # left padding changes no answer
    assert model.generate(PROMPTS, Sampling(0.0, 10, n=2)) == [a for a in alone for _ in "ab"]


def test_n_sampled_answers_per_prompt_come_prompt_by_prompt_and_repeat_with_the_seed(
    model: TransformersModel,
) -> None:
    sampling = Sampling(temperature=1.0, max_new_tokens=12, seed=3, n=4)
    answers = model.generate(PROMPTS, sampling)
    assert len(answers) == len(PROMPTS) * 4
    assert model.generate(PROMPTS, sampling) == answers
    assert len(set(answers[:4])) > 1  # the n answers to one prompt are drawn, not copied


class Echo:
    """A model that names the prompt and the draw it answers, and votes by the prompt."""

    version = "echo"

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[Generated]:
        self.sampling = sampling
        actions = [p.split("So it did: ")[1].split("\n")[0].split() for p in prompts]
        return [
            Generated(f"step {step} draw {k} \\boxed{{{1 if what == 'good' else -1}}}", (k,))
            for step, what in actions
            for k in range(sampling.n)
        ]

    def score(self, prompt: str, completions: Sequence[str]) -> list[float]:
        raise AssertionError("a judge only generates")

    def reload(self, path: Path, version: str) -> None:
        raise AssertionError("not reloaded here")


def test_a_model_judge_asks_once_for_m_votes_on_each_step_and_gives_them_back_in_order() -> None:
    echo = Echo()
    steps = [
        {"step": s, "prompt": "p", "completion": "c", "action": f"{s} {what}", "observation": "o"}
        for s, what in [(4, "good"), (5, "bad"), (6, "good")]
    ]
    votes = ModelJudge(echo, Sampling(1.0, 8, seed=10)).judge({"id": 1}, steps, 3)
    assert echo.sampling == Sampling(1.0, 8, seed=14, n=3)  # one call; the seed follows the step
    assert [[v.rationale.split(" \\")[0] for v in step] for step in votes] == [
        [f"step {s} draw {k}" for k in range(3)] for s in (4, 5, 6)
    ]
    assert [[v.score for v in step] for step in votes] == [[1] * 3, [-1] * 3, [1] * 3]
    assert {(v.mode, v.temperature) for step in votes for v in step} == {("generate", 1.0)}
    assert [v.completion_ids for v in votes[0]] == [(0,), (1,), (2,)]  # the ids go along


def test_a_generated_answer_is_trained_on_the_ids_it_sampled_not_its_text_re_encoded(
    model: TransformersModel,
) -> None:
    from agents.train.loss import encode

    tok = model.tokenizer
    sampling = Sampling(temperature=1.0, max_new_tokens=6, seed=1, n=8)
    answers = model.generate(PROMPTS[:1], sampling)
    re_encoded = 0
    for answer in answers:  # the untrained model runs to 6 tokens: cut, so no end token
        assert answer.token_ids is not None and len(answer.token_ids) == 6
        assert tok.eos_token_id not in answer.token_ids
        assert answer.text == tok.decode(answer.token_ids, skip_special_tokens=True)
        sample = encode(
            tok, PROMPTS[0], answer.text, add_end=False, completion_ids=answer.token_ids
        )
        assert tuple(sample.ids[sample.start :]) == answer.token_ids  # exactly as sampled
        text = encode(tok, PROMPTS[0], answer.text, add_end=False)
        re_encoded += tuple(text.ids[text.start :]) != answer.token_ids
    # why the ids are recorded: some sampled ids do not survive decode and encode
    assert re_encoded > 0


def test_ids_from_another_vocabulary_fall_back_to_the_text(model: TransformersModel) -> None:
    from agents.train.loss import encode

    tok = model.tokenizer
    foreign = encode(tok, "p", "look", add_end=False, completion_ids=(len(tok) + 5,))
    assert foreign == encode(tok, "p", "look", add_end=False)
