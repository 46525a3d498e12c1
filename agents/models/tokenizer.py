"""A byte-level BPE tokenizer trained on the world's corpus.

Byte-level BPE never needs an unknown token and decodes exactly, so prompts and completions
round-trip through the tokenizer the trainer uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from agents import prompts
from world.vocabulary import corpus

# "<|endoftext|>" is the end token Qwen2 tokenizer classes expect: with it in the vocabulary,
# loading our tokenizer as a Qwen2 one (AutoTokenizer, vLLM) adds no token the model lacks.
SPECIAL_TOKENS = {"bos_token": "<|bos|>", "eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}
DEFAULT_VOCAB_SIZE = 1024


def default_texts() -> Iterator[str]:
    """The world's corpus, and the agents' prompt and answer templates as often as its texts:
    every step shows the policy one observation and one prompt's fixed words."""
    texts = list(corpus())
    yield from texts
    templates = list(prompts.template_texts())
    for _ in range(len(texts) // len(templates) + 1):
        yield from templates


def train_tokenizer(
    texts: Iterable[str] | None = None, vocab_size: int = DEFAULT_VOCAB_SIZE
) -> PreTrainedTokenizerFast:
    """Train on ``texts`` (default: :func:`default_texts`) and wrap for transformers."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts if texts is not None else default_texts(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL_TOKENS)
