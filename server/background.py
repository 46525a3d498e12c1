"""Work the server does on its own: ending idle episodes, the optional heartbeat and the
forge's cycles (every ``forge_interval_s`` unless the forge is disabled; a paused forge skips).

All run as asyncio tasks for the app's lifetime. Each does its database work in a thread of its
own, kept for the app's lifetime: the rounds of one job never overlap, and a shared pool would
add a thread whenever two jobs' rounds did, so the server's thread count would creep up to the
pool's cap over hours and look like a leak. A failing round is logged and retried at the next
interval; the server keeps serving. On shutdown a round in flight is finished first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from server import episodes, forge
from server.runtime import Runtime

log = logging.getLogger("bigworld.server")


async def _every(
    seconds: float, work: Callable[[], object], name: str, thread: ThreadPoolExecutor
) -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(seconds)
        try:
            await loop.run_in_executor(thread, work)
        except Exception:  # keep serving; the next round retries
            log.exception("%s failed", name)


@asynccontextmanager
async def background_work(runtime: Runtime) -> AsyncIterator[None]:
    settings = runtime.settings
    reap_every = max(0.5, min(30.0, settings.episode_idle_timeout_s / 2))
    rounds: list[tuple[float, Callable[[], object], str]] = [
        (reap_every, lambda: episodes.reap_idle(runtime), "idle reaper")
    ]
    if settings.heartbeat_s > 0:
        rounds.append((settings.heartbeat_s, lambda: episodes.heartbeat(runtime), "heartbeat"))
    if settings.forge_enabled:
        rounds.append(
            (
                settings.forge_interval_s,
                lambda: forge.run_cycle(runtime, manual=False),
                "forge cycle",
            )
        )
    threads = [
        ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bigworld-{name.replace(' ', '-')}")
        for _, _, name in rounds
    ]
    jobs = [
        asyncio.create_task(_every(seconds, work, name, thread))
        for (seconds, work, name), thread in zip(rounds, threads, strict=True)
    ]
    try:
        yield
    finally:
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        for thread in threads:  # a round in flight ends before the store closes
            await asyncio.to_thread(thread.shutdown)
