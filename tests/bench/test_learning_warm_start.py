"""A warm start's judge lists every episode of its world: a judge lists only the last
``backlog`` episode ids before the newest it has seen, and a warm start with ``--demos 480``
(1,440 episodes) left its first 440 unjudged and failed on them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # bench/ is no package
from learning import VOTES, _every_episode  # noqa: E402

from agents.reward_agent import RewardConfig  # noqa: E402


def episodes(n: int) -> list[dict[str, Any]]:
    """The rows of ``n`` episodes as the API lists them (ids as strings)."""
    return [{"id": str(i)} for i in range(1, n + 1)]


def test_the_backlog_reaches_the_first_episode_of_a_large_warm_start() -> None:
    config = _every_episode(episodes(1440))
    assert config.backlog >= 1440 > RewardConfig.backlog
    assert config.votes == VOTES


def test_a_small_warm_start_keeps_the_default_backlog() -> None:
    assert _every_episode(episodes(0)).backlog == RewardConfig.backlog
    assert _every_episode(episodes(360)).backlog == RewardConfig.backlog
