"""Picking up new model versions without restarting: poll the registry, reload in place."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Protocol

from agents.client import BigWorldClient
from agents.errors import NotFoundError, UnreachableError

log = logging.getLogger("bigworld.versions")


class Reloadable(Protocol):
    @property
    def version(self) -> str: ...

    def reload(self, path: Path, version: str) -> None: ...


class VersionWatcher:
    """Looks up ``GET /v1/policies/latest?kind=…`` at most every ``poll_s`` seconds and
    reloads ``model`` when a different version is registered."""

    def __init__(self, client: BigWorldClient, kind: str, model: Reloadable, poll_s: float) -> None:
        self.client, self.kind, self.model, self.poll_s = client, kind, model, poll_s
        self.reloads = 0
        self._last = float("-inf")

    def check(self) -> bool:
        """True when it switched to a new version."""
        now = time.monotonic()
        if now - self._last < self.poll_s:
            return False
        self._last = now
        try:
            latest = self.client.latest_policy(self.kind)
        except (NotFoundError, UnreachableError):
            return False
        version = str(latest["version"])
        if version == self.model.version or not latest.get("path"):
            return False
        self.model.reload(Path(latest["path"]), version)
        self.reloads += 1
        log.info("switched to %s version %s", self.kind, version)
        return True
