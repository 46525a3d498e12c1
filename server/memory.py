"""Every ``bigworld`` process hands the heap memory it freed back to the system, on glibc.

glibc keeps what a thread frees in that thread's arena for reuse, and never returns most of it:
in the hour-long soak the server's resident memory climbed while the Python objects it held
stayed flat (its request threads free in many arenas), and the agents' (whose tensors come
from the same heap) climbed a little. ``malloc_trim(0)`` returns those free pages, so
``bigworld`` (``server.cli.main``) runs it every ``TRIM_EVERY_S`` in a daemon thread, whatever
the command. Other C libraries (musl, macOS) have no ``malloc_trim``; nothing runs there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable

TRIM_EVERY_S = 60.0


def malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


def keep_trimming(every_s: float = TRIM_EVERY_S) -> threading.Thread | None:
    """Trim every ``every_s`` seconds for the rest of the process (a daemon thread); None
    where there is nothing to call."""
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
