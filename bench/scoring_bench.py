"""Rank-mode scoring on CPU: how fast a tiny policy scores a step's admissible actions.

Every rank-mode decision of a policy agent (``TransformersModel.score``) and every step of
rank cloning (``rank_scores``) computes the summed log-prob of each numbered action after the
policy's prompt. Three ways, timed on the same prompts in the same run, forward alone and
forward plus backward:

- ``packed`` (what the agents and the trainer use, ``candidate_logprobs``): the candidates
  packed after the prompt in one sequence, a 4-D attention mask keeping them apart;
- ``cache``: the prompt run once and its key/value cache copied for every candidate (the
  baseline: what both used before);
- ``full``: every candidate with its own copy of the prompt, padded into one batch.

The prompts are a random walk's in an in-memory world (so their admissible lists are the
world's own), with six steps of history, as the agents build them. Not a test::

    .venv/bin/python bench/scoring_bench.py [--prompts 64] [--hidden-size 128 --layers 2]
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.models.tiny import ModelSpec, candidate_logprobs, init_model, load_model  # noqa: E402
from agents.prompts import HISTORY_STEPS, Turn, policy_prompt, rank_completion  # noqa: E402
from world import engine  # noqa: E402
from world.state import ORIGIN, MemoryBackend, World  # noqa: E402

Rows = list[list[int]]


def prompts(n: int, seed: int) -> list[tuple[str, list[str]]]:
    """``n`` (prompt, rank completions) pairs from a random walk of one avatar."""
    backend, rng = MemoryBackend(seed), random.Random(seed)
    world = World(backend)
    world.add_avatar("a", "Alice", ORIGIN)
    world.commit()
    seen = engine.observe(World(backend), "a")
    observation, admissible = seen.text, seen.admissible
    history: list[Turn] = []
    out = []
    for _ in range(n):
        text = policy_prompt(
            "put a mug in cabinet 1", history[-HISTORY_STEPS:], observation, admissible
        )
        out.append((text, [rank_completion(k + 1, a) for k, a in enumerate(admissible)]))
        action = rng.choice([a for a in admissible if a not in ("look", "inventory", "wait")])
        world = World(backend)
        result = engine.step(world, "a", action)
        world.commit()
        history.append(Turn(action, result.observation))
        observation, admissible = result.observation, result.admissible
    return out


def cache_scores(model: torch.nn.Module, prompt: list[int], rows: Rows, pad: int) -> torch.Tensor:
    """The prompt's key/value cache repeated for every candidate."""
    n, width = len(rows), max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]
    head = model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
    cache = head.cache if "cache" in head else head.past_key_values
    cache.batch_repeat_interleave(n)
    attention = torch.cat([torch.ones(n, len(prompt), dtype=torch.long), mask.long()], dim=1)
    # transformers renamed ``past_key_values`` to ``cache`` in its 5.x series
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    tail = model(input_ids=ids, attention_mask=attention, **{name: cache}).logits
    first = torch.log_softmax(head.logits[0, -1].float(), dim=-1)[ids[:, 0]]
    rest = torch.log_softmax(tail[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None])
    return first + (rest.squeeze(-1) * mask[:, 1:]).sum(dim=1)


def full_scores(model: torch.nn.Module, prompt: list[int], rows: Rows, pad: int) -> torch.Tensor:
    """Every candidate after its own copy of the prompt, right-padded into one batch."""
    seqs = [prompt + r for r in rows]
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    mask = torch.arange(width)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]
    logits = model(input_ids=ids, attention_mask=mask.long()).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None])
    take = mask[:, 1:] & (torch.arange(1, width)[None, :] >= len(prompt))
    return (logp.squeeze(-1) * take).sum(dim=1)


def timed(
    way: Callable[[list[int], Rows], torch.Tensor], case: tuple[list[int], Rows], backward: bool
) -> float:
    started = time.perf_counter()
    scores = way(*case)
    if backward:
        (-torch.log_softmax(scores, dim=0)[0]).backward()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64, help="decisions timed per way")
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(
            hidden_size=args.hidden_size,
            intermediate_size=3 * args.hidden_size,
            num_hidden_layers=args.layers,
        )
        model, tok = load_model(init_model("policy", Path(tmp) / "policy", spec))
    cases = []
    for text, completions in prompts(args.prompts, args.seed):
        rows = [tok(c).input_ids + [tok.eos_token_id] for c in completions]
        cases.append((tok(text).input_ids, rows))
    pad = tok.pad_token_id
    ways: dict[str, Callable[[list[int], Rows], torch.Tensor]] = {
        "packed": lambda p, r: candidate_logprobs(model, p, r),
        "cache": lambda p, r: cache_scores(model, p, r, pad),
        "full": lambda p, r: full_scores(model, p, r, pad),
    }
    with torch.no_grad():  # the three agree before anything is timed
        for prompt, rows in cases[:3]:
            base = ways["cache"](prompt, rows)
            for way in ways.values():
                assert torch.allclose(way(prompt, rows), base, atol=1e-3)
    tokens = statistics.mean(len(p) for p, _ in cases)
    candidates = statistics.mean(len(r) for _, r in cases)
    print(
        f"{len(cases)} prompts: {tokens:.0f} prompt tokens, {candidates:.1f} candidates on average"
    )
    print(f"{'way':<8}{'forward ms':>12}{'vs cache':>10}{'fwd+bwd ms':>12}{'vs cache':>10}")
    medians: dict[str, tuple[float, float]] = {}
    for name in ("cache", "packed", "full"):
        way = ways[name]
        model.eval()
        with torch.no_grad():
            forward = [timed(way, case, False) for case in cases]
        model.train()
        both = [timed(way, case, True) for case in cases]
        model.zero_grad(set_to_none=True)
        medians[name] = (statistics.median(forward) * 1e3, statistics.median(both) * 1e3)
        f, b = medians[name]
        base_f, base_b = medians["cache"]
        print(f"{name:<8}{f:>12.1f}{base_f / f:>9.2f}x{b:>12.1f}{base_b / b:>9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
