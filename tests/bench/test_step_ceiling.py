"""The step-ceiling bench's decisions: each as the policy agent sees it, its right answer the
signposted move, its kind and its first listed exit read correctly, in each order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agents.prompts import rank_completion

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
from step_ceiling import KINDS, ORDERS, record  # noqa: E402

SIGNPOST = "A signpost here reads: for the "


def _listed(prompt: str) -> list[str]:
    """The numbered actions of a policy prompt, in the order shown."""
    block = prompt.partition("Admissible actions:\n")[2].partition("\nChoose one action")[0]
    return [line.partition(". ")[2] for line in block.splitlines()]


@pytest.mark.parametrize("order", ORDERS)
def test_a_recorded_decision_is_the_prompt_and_candidates_the_agent_sees(order: str) -> None:
    decisions = record(seed=3, n=60, follow=0.4, order=order)
    assert len(decisions) == 60 and {d.kind for d in decisions} == set(KINDS)
    for d in decisions:
        shown = _listed(d.prompt)
        assert d.candidates == tuple(rank_completion(k + 1, a) for k, a in enumerate(shown))
        signposted = d.prompt.rpartition(SIGNPOST)[2].partition(", ")[2].partition(".\n")[0]
        assert shown[d.right] == signposted and signposted.startswith("go to ")
        assert d.first_move == min(k for k, a in enumerate(shown) if a.startswith("go to "))
        if d.kind == "winning":  # the signpost names the target itself
            target = d.prompt.rpartition(SIGNPOST)[2].partition(",")[0]
            assert signposted == f"go to {target}"
    if order == "signposted-first":
        assert all(d.right == 0 for d in decisions)
    if order == "world":  # the engine's order: what the first-exit rule is measured against
        assert 0 < sum(d.first_move == d.right for d in decisions) < len(decisions)
