"""The memory trim of every bigworld process hands back what a thread freed (glibc keeps it)."""

from __future__ import annotations

import threading

import pytest

from server.memory import malloc_trim


def _resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def test_trimming_returns_what_a_thread_freed() -> None:
    trim = malloc_trim()
    if trim is None:
        pytest.skip("this C library has no malloc_trim")
    kept: list[bytes] = []

    def request_like() -> None:  # 100 MiB in blocks past pymalloc's 512 bytes, 1 in 200 kept
        blocks = [bytes(1024) + bytes([i % 256]) for i in range(100_000)]
        kept.extend(blocks[::200])

    worker = threading.Thread(target=request_like)
    before = _resident_mib()
    worker.start()
    worker.join()
    freed = _resident_mib()
    assert freed - before > 50, "the freed blocks stay resident until trimmed"
    trim()
    assert _resident_mib() - before < (freed - before) / 2
    assert len(kept) == 500
