"""The world's own language: the corpus holds what an avatar reads and writes at a stall."""

from __future__ import annotations

from world import actions
from world.vocabulary import corpus, market_texts


def test_market_texts_show_stall_prices_trades_and_their_outcomes() -> None:
    texts = list(market_texts(seed=3))
    assert texts == list(market_texts(seed=3))  # deterministic
    trades = texts[1].split("\n")
    assert trades and all(actions.parse(t) is not None for t in trades)
    assert {actions.parse(t).verb for t in trades} == {"trade"}  # type: ignore[union-attr]
    assert any("sells bread for 4 coins" in t for t in texts)
    made = [t for t in texts if t.startswith("You trade ")]
    assert len(made) == len(trades)  # every admitted trade, each on its own copy, is accepted


def test_the_corpus_ends_with_the_market_texts_and_the_rule_words() -> None:
    texts = list(corpus(seed=1, avatars=1, steps=2))
    assert texts[-1].startswith("apple ")  # the rule words, sorted
    assert texts[-1 - len(list(market_texts(seed=1))) : -1] == list(market_texts(seed=1))
