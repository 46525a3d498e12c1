"""A small in-process Prometheus registry: request counts and durations, step latencies, the
group commit's batches, the world's tick.

Kept dependency-free on purpose: the text exposition format is a few lines, and the server
process stays small.
"""

from __future__ import annotations

import threading
from collections import defaultdict

STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)  # seconds


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        # seconds spent answering, by (method, route template); counts are in ``requests``
        self.request_seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.step_buckets = [0] * len(STEP_BUCKETS)
        self.step_count = 0
        self.step_sum = 0.0
        self.episodes_ended: dict[str, int] = defaultdict(int)
        self.world_commits = 0
        self.world_transactions = 0  # committed together in world_commits commits
        self.world_work_s = 0.0  # the writer running them
        self.world_commit_s = 0.0  # the writer committing them
        # PostgreSQL: seconds world transactions waited for locks held elsewhere (each
        # transaction of a batch counted for the batch's wait), and transactions carried to
        # the next batch because a lock they tried was taken
        self.world_lock_wait_s = 0.0
        self.world_carried = 0

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            self.request_seconds[(method, route)] += seconds

    def step(self, seconds: float) -> None:
        with self._lock:
            self.step_count += 1
            self.step_sum += seconds
            for i, bound in enumerate(STEP_BUCKETS):
                if seconds <= bound:
                    self.step_buckets[i] += 1

    def world_commit(self, transactions: int, work_s: float, commit_s: float) -> None:
        with self._lock:
            self.world_commits += 1
            self.world_transactions += transactions
            self.world_work_s += work_s
            self.world_commit_s += commit_s

    def world_wait(self, seconds: float, carried: int) -> None:
        with self._lock:
            self.world_lock_wait_s += seconds
            self.world_carried += carried

    def episode_ended(self, status: str) -> None:
        with self._lock:
            self.episodes_ended[status] += 1

    def render(self, gauges: dict[str, float]) -> str:
        """The exposition text; ``gauges`` are read from the database at scrape time."""
        lines = [
            "# HELP bigworld_requests_total HTTP requests by method, route and status.",
            "# TYPE bigworld_requests_total counter",
        ]
        with self._lock:
            for (method, route, status), n in sorted(self.requests.items()):
                lines.append(
                    f'bigworld_requests_total{{method="{method}",route="{_esc(route)}",status="{status}"}} {n}'
                )
            lines += [
                "# HELP bigworld_request_seconds Time from a request's arrival to its answer's "
                "end, by method and route.",
                "# TYPE bigworld_request_seconds summary",
            ]
            counts: dict[tuple[str, str], int] = defaultdict(int)
            for (method, route, _status), n in self.requests.items():
                counts[(method, route)] += n
            for (method, route), total in sorted(self.request_seconds.items()):
                labels = f'method="{method}",route="{_esc(route)}"'
                lines.append(f"bigworld_request_seconds_sum{{{labels}}} {total}")
                lines.append(
                    f"bigworld_request_seconds_count{{{labels}}} {counts[(method, route)]}"
                )
            lines += [
                "# HELP bigworld_step_seconds Time to apply and persist one step.",
                "# TYPE bigworld_step_seconds histogram",
            ]
            for bound, n in zip(STEP_BUCKETS, self.step_buckets, strict=True):
                lines.append(f'bigworld_step_seconds_bucket{{le="{bound}"}} {n}')
            lines.append(f'bigworld_step_seconds_bucket{{le="+Inf"}} {self.step_count}')
            lines.append(f"bigworld_step_seconds_sum {self.step_sum}")
            lines.append(f"bigworld_step_seconds_count {self.step_count}")
            lines += [
                "# HELP bigworld_episodes_ended_total Episodes ended by this process, by status.",
                "# TYPE bigworld_episodes_ended_total counter",
            ]
            for ended, n in sorted(self.episodes_ended.items()):
                lines.append(f'bigworld_episodes_ended_total{{status="{ended}"}} {n}')
            lines += [
                "# HELP bigworld_world_commits_total Commits of world transactions (group commit).",
                "# TYPE bigworld_world_commits_total counter",
                f"bigworld_world_commits_total {self.world_commits}",
                "# HELP bigworld_world_lock_wait_seconds_total Seconds world transactions spent"
                " waiting for locks held elsewhere (PostgreSQL).",
                "# TYPE bigworld_world_lock_wait_seconds_total counter",
                f"bigworld_world_lock_wait_seconds_total {self.world_lock_wait_s:.6f}",
                "# HELP bigworld_world_carried_total World transactions carried to the next"
                " batch: a lock they tried was taken (PostgreSQL).",
                "# TYPE bigworld_world_carried_total counter",
                f"bigworld_world_carried_total {self.world_carried}",
                "# HELP bigworld_world_transactions_total World transactions run in those commits.",
                "# TYPE bigworld_world_transactions_total counter",
                f"bigworld_world_transactions_total {self.world_transactions}",
                "# HELP bigworld_world_work_seconds_total Seconds the writer spent running"
                " those transactions (from each batch's BEGIN to its COMMIT).",
                "# TYPE bigworld_world_work_seconds_total counter",
                f"bigworld_world_work_seconds_total {self.world_work_s:.6f}",
                "# HELP bigworld_world_commit_seconds_total Seconds the writer spent in COMMIT"
                " (on SQLite FULL: writing and syncing the WAL, and checkpoints).",
                "# TYPE bigworld_world_commit_seconds_total counter",
                f"bigworld_world_commit_seconds_total {self.world_commit_s:.6f}",
            ]
        for name, value in sorted(gauges.items()):
            lines += [f"# TYPE bigworld_{name} gauge", f"bigworld_{name} {value}"]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
