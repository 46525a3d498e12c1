"""The tiny models' tokenizer knows the agents' fixed words, and round-trips every text."""

from __future__ import annotations

from agents.models.tokenizer import train_tokenizer
from agents.prompts import Turn, policy_prompt, rank_completion
from world.vocabulary import corpus


def test_prompt_templates_are_words_of_the_tokenizer_and_texts_round_trip() -> None:
    tokenizer, world_only = train_tokenizer(), train_tokenizer(corpus())
    instruction = "Choose one action. End your answer with its number as \\boxed{k}."
    assert len(tokenizer(instruction).input_ids) <= 16 < len(world_only(instruction).input_ids)
    assert tokenizer.tokenize(rank_completion(12, "look"))[2:] == ["\\", "boxed", "{", "12", "}"]
    prompt = policy_prompt(
        "put a mug in the fridge 1.",
        [Turn("go to kitchen 1", "You arrive at the kitchen 1. The fridge 1 is closed.")],
        "On the counter 1 you see a mug 1 (ünïcode).",
        ["take mug 1 from counter 1", "open fridge 1"],
    )
    assert tokenizer.decode(tokenizer(prompt).input_ids) == prompt
