"""Work the server does on its own: ending idle episodes, the optional heartbeat, the
forge's cycles (every ``forge_interval_s`` unless the forge is disabled; a paused forge skips)
and, on glibc, handing freed heap memory back to the system every ``TRIM_EVERY_S``.

All run as asyncio tasks for the app's lifetime and do their database work in a thread. A
failing round is logged and retried at the next interval; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from server import episodes, forge
from server.runtime import Runtime

log = logging.getLogger("bigworld.server")

TRIM_EVERY_S = 60.0


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none (musl, macOS).

    glibc keeps what a thread frees in that thread's arena for reuse, and a server's request
    threads free in many arenas: its resident memory climbed for an hour of the soak while
    what it held stayed flat (freed memory, not a leak). Trimming returns the free pages."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


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
    trim = malloc_trim()
    if trim is not None:
        jobs.append(asyncio.create_task(_every(TRIM_EVERY_S, trim, "memory trim")))
    try:
        yield
    finally:
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
