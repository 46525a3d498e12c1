"""Work the server does on its own: ending idle episodes, the optional heartbeat and the
forge's cycles (every ``forge_interval_s`` unless the forge is disabled; a paused forge skips).

All run as asyncio tasks for the app's lifetime and do their database work in a thread. A
failing round is logged and retried at the next interval; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from server import episodes, forge
from server.runtime import Runtime

log = logging.getLogger("bigworld.server")


async def _every(seconds: float, work: Callable[[], object], name: str) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            await asyncio.to_thread(work)
        except Exception:  # keep serving; the next round retries
            log.exception("%s failed", name)


@asynccontextmanager
async def background_work(runtime: Runtime) -> AsyncIterator[None]:
    settings = runtime.settings
    reap_every = max(0.5, min(30.0, settings.episode_idle_timeout_s / 2))
    jobs = [
        asyncio.create_task(_every(reap_every, lambda: episodes.reap_idle(runtime), "idle reaper"))
    ]
    if settings.heartbeat_s > 0:
        jobs.append(
            asyncio.create_task(
                _every(settings.heartbeat_s, lambda: episodes.heartbeat(runtime), "heartbeat")
            )
        )
    if settings.forge_enabled:
        jobs.append(
            asyncio.create_task(
                _every(
                    settings.forge_interval_s,
                    lambda: forge.run_cycle(runtime, manual=False),
                    "forge cycle",
                )
            )
        )
    try:
        yield
    finally:
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
