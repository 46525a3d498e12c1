"""Make the example report in docs/ from a real short run: a live server (forge on, oracle
distances recorded), scripted policy agents and a heuristic reward agent over HTTP, then
``bigworld report`` on its database.

The policy is scripted, not learnt: version k follows the oracle's hint with probability
``SKILL[k]`` and otherwise acts at random, and the version in use moves from 1 to 3 over the
run, as a stand-in for a trainer's releases. The reward agent is ``HeuristicJudge`` (plan
distance) with 15% of its votes flipped.

    .venv/bin/python docs/report_example.py --minutes 5 --policies 3 --out /tmp/report-example
    cp /tmp/report-example/report/success_by_version.png docs/report_success_by_version.png

docs/report_success_by_version.png came from such a run (5 minutes, 3 policy agents, on a
2-core machine shared with other work: tick 1696, 137 episodes, 42 forge decisions), its report
rewritten with ``write_report(..., window=3)``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from live import live_server  # noqa: E402

from agents.client import BigWorldClient  # noqa: E402
from agents.policy_agent import (  # noqa: E402
    Decision,
    ExpertPolicy,
    PolicyRunner,
    RandomPolicy,
    RunnerConfig,
)
from agents.reward_agent import HeuristicJudge, RewardConfig, RewardRunner  # noqa: E402
from server.report import write_report  # noqa: E402

SKILL = {"1": 0.3, "2": 0.6, "3": 0.9}  # chance that version k takes the oracle's action


class ScriptedLearner:
    """Follows the oracle with the current version's skill, else acts at random."""

    has_weights = False

    def __init__(self, expert: ExpertPolicy, seed: int) -> None:
        self.expert, self.random = expert, RandomPolicy(seed)
        self.rng = random.Random(seed)
        self.version = "1"

    def decide(self, episode_id: int | str, prompt: str, admissible: Sequence[str]) -> Decision:
        if self.rng.random() < SKILL[self.version]:
            return self.expert.decide(episode_id, prompt, admissible)
        return self.random.decide(episode_id, prompt, admissible)

    def reload(self, path: Path, version: str) -> None:
        """Scripted: the run sets ``version`` itself."""


def run(minutes: float, out: Path, policies: int, window: int) -> Path:
    if out.exists():
        shutil.rmtree(out)
    env = {
        "BIGWORLD_RECORD_DISTANCE": "true",
        "BIGWORLD_STEP_BUDGET": "20",
        "BIGWORLD_FORGE_INTERVAL_S": "3",
    }
    with live_server(out / "data", env=env) as server:
        with BigWorldClient(server.url, server.admin_token) as admin:
            names = [f"learner{i}" for i in range(policies)]
            tokens = [admin.create_agent(n, "policy").token for n in names]
            judge_token = admin.create_agent("judge", "reward").token
            expert_token = admin.create_agent("expert", "trainer").token
        learners, runners, threads = [], [], []
        for i, token in enumerate(tokens):
            expert = ExpertPolicy(BigWorldClient(server.url, expert_token))
            learner = ScriptedLearner(expert, seed=i)
            runner = PolicyRunner(BigWorldClient(server.url, token), learner, RunnerConfig())
            learners.append(learner)
            runners.append(runner)
        reward = RewardRunner(
            BigWorldClient(server.url, judge_token), HeuristicJudge(noise=0.15), RewardConfig()
        )
        for job in (*runners, reward):
            threads.append(threading.Thread(target=job.run, daemon=True))
            threads[-1].start()
        started = time.monotonic()
        for version in SKILL:
            for learner in learners:
                learner.version = version
            print(f"version {version}", flush=True)
            time.sleep(minutes * 60 / len(SKILL))
        for runner in runners:
            runner.stop.set()
        time.sleep(5)  # let the reward agent judge the last episodes
        reward.stop.set()
        for thread in threads:
            thread.join(timeout=60)
        print(f"ran {time.monotonic() - started:.0f}s", flush=True)
    database = f"sqlite:///{(out / 'data' / 'world.db').resolve()}"
    return write_report(database, out / "report", window=window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--policies", type=int, default=2)
    parser.add_argument("--window", type=int, default=3, help="episodes per metrics window")
    parser.add_argument("--out", type=Path, default=Path("/tmp/report-example"))
    args = parser.parse_args()
    print(run(args.minutes, args.out, args.policies, args.window).read_text())


if __name__ == "__main__":
    main()
