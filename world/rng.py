"""Counter-based randomness keyed by (world seed, tick, entity, purpose).

Every random draw in the world comes from a generator built here, so a draw depends only on
its key: never on global state, call order or the wall clock. Philox is a counter-based
bit generator; the key is a 128-bit BLAKE2b digest of the four parts.
"""

from __future__ import annotations

import hashlib

import numpy as np


def key(seed: int, tick: int, entity: str, purpose: str) -> int:
    text = f"{seed}\x1f{tick}\x1f{entity}\x1f{purpose}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=16).digest(), "little")


def rng(seed: int, tick: int, entity: str, purpose: str) -> np.random.Generator:
    """A generator whose stream is a pure function of its key."""
    return np.random.Generator(np.random.Philox(key=key(seed, tick, entity, purpose)))


def uniform(seed: int, tick: int, entity: str, purpose: str) -> float:
    """One draw in [0, 1) without building a generator (cheap enough for hot paths)."""
    return (key(seed, tick, entity, purpose) >> 75) / float(1 << 53)
