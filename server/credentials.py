"""What one process remembers about credentials between requests: callers it has checked, for
a few seconds, and the failed authentications of each client address over the last minute.

Both are per process. The cache's lifetime is the bound on how long a revoked or rotated token
keeps working anywhere (design §6, "Auth"): after ``ttl_s`` a process asks the database again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

FAILURE_WINDOW_S = 60.0  # failures are counted over the last minute
MAX_ENTRIES = 10_000  # callers or addresses remembered at once (memory stays bounded)


@dataclass(frozen=True)
class Caller:
    """The authenticated agent behind a request."""

    id: int
    name: str
    role: str
    avatar_id: str | None
    max_open_episodes: int = 1  # episodes it may hold open at once (policy agents)


class CallerCache:
    """Callers by token hash, each trusted for ``ttl_s`` seconds after the database said so
    (0: never cached, every request reads the database)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[Caller, float]] = {}  # hash -> (caller, expiry, monotonic s)
        self._lock = threading.Lock()

    def get(self, digest: str) -> Caller | None:
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            if entry[1] <= time.monotonic():
                del self._entries[digest]
                return None
            return entry[0]

    def put(self, digest: str, caller: Caller) -> None:
        if self.ttl_s <= 0:
            return
        now = time.monotonic()
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries = {k: v for k, v in self._entries.items() if v[1] > now}
            self._entries[digest] = (caller, now + self.ttl_s)

    def forget_agent(self, agent_id: int) -> None:
        """Drop the agent's entries now (this process revoked it; others wait out ``ttl_s``)."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if v[0].id != agent_id}


class FailureThrottle:
    """Failed authentications per client address: at ``per_minute`` failures within the last
    minute the address must wait until the oldest of them is a minute old (0: no limit)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._failures: dict[str, deque[float]] = {}  # address -> monotonic s of each failure
        self._lock = threading.Lock()

    def wait(self, address: str) -> float:
        """Seconds ``address`` must wait before it may authenticate again (0: it may now)."""
        if self.per_minute <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return 0.0
            while failures and failures[0] <= now - FAILURE_WINDOW_S:
                failures.popleft()
            if not failures:
                del self._failures[address]
                return 0.0
            if len(failures) < self.per_minute:
                return 0.0
            return failures[0] + FAILURE_WINDOW_S - now

    def fail(self, address: str) -> None:
        if self.per_minute <= 0:
            return
        with self._lock:
            failures = self._failures.pop(address, None) or deque(maxlen=self.per_minute)
            if len(self._failures) >= MAX_ENTRIES:
                del self._failures[next(iter(self._failures))]  # the longest unheard address
            failures.append(time.monotonic())
            self._failures[address] = failures  # re-inserted: dict order is last failure
