"""Every ``bigworld`` process keeps its heap from creeping, on glibc.

glibc gives threads that allocate at the same time arenas of their own (up to eight per core),
keeps what a thread frees in its arena for reuse, and returns little of it. In the hour-long
soak the server's resident memory climbed while the Python objects it held stayed flat: its
request threads freed in many arenas, and the free memory kept in them grew with every
minute (and the agents', whose tensors come from the same heap, climbed a little). Two
settings, applied by ``bigworld`` (``server.cli.main``) before any thread starts, whatever the
command:

- at most ``ARENAS`` arenas (``mallopt(M_ARENA_MAX)``, as ``MALLOC_ARENA_MAX`` would): freed
  memory is found again by the next request instead of waiting in an arena no thread uses;
  in a 15-minute A/B of the soak it kept the free memory at 4-5 MiB where it had grown from 1
  to 16 MiB;
- ``malloc_trim(0)`` every ``TRIM_EVERY_S`` in a daemon thread, which returns free pages.

Other C libraries (musl, macOS) have neither call; nothing runs there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable

ARENAS = 2
TRIM_EVERY_S = 60.0
_M_ARENA_MAX = -8  # glibc's malloc.h


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas from now on; False where the C library cannot."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))


def configure(every_s: float = TRIM_EVERY_S) -> threading.Thread | None:
    """Limit the arenas, then trim every ``every_s`` seconds for the rest of the process (a
    daemon thread, returned; None where there is nothing to call)."""
    limit_arenas()
    trim = malloc_trim()
    if trim is None:
        return None

    def loop() -> None:
        while True:
            time.sleep(every_s)
            trim()

    thread = threading.Thread(target=loop, name="bigworld-malloc-trim", daemon=True)
    thread.start()
    return thread
