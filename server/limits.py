"""Request limits: a body-size cap enforced while the body streams in, and per-token rate limits.

The size cap is plain ASGI middleware so that an oversized body is refused with 413 without
ever being read whole: a ``Content-Length`` over the cap is refused before reading anything,
and a body without one (chunked) is counted as it arrives and cut off at the cap.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import error_body

# A batch of steps (POST /v1/steps, in any world) may carry up to this many bodies' worth.
BATCH_PATH = re.compile(r"^/v1/(worlds/[^/]+/)?steps$")
BATCH_BODIES = 16


class BodySizeLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` (``BATCH_BODIES`` times that
    for a batch of steps) with a 413 error body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        batch = BATCH_PATH.match(scope.get("path", "")) is not None
        limit = self.max_bytes * BATCH_BODIES if batch else self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await self._refuse(send, declared, limit)
                    return
        seen = 0
        started = refused = False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # Answer now and tell the app the client left: it stops reading the body.
                    refused = True
                    if not started:
                        await self._refuse(send, seen, limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 has been sent; whatever the app answers is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise

    async def _refuse(self, send: Send, size: int, limit: int) -> None:
        body = json.dumps(
            error_body(
                413,
                f"expected a request body of at most {limit} bytes, got {size} or more",
                details={"max_bytes": limit},
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class RateLimiter:
    """Token buckets keyed by credential: ``rate`` requests per second, ``burst`` at once. The
    burst defaults to one second's worth of the rate (at least 1), so a low rate limits from
    the first second instead of after a fixed allowance."""

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.rate = rate
        self.burst = float(burst if burst is not None else max(1, math.ceil(rate)))
        self._buckets: dict[
            str, tuple[float, float]
        ] = {}  # key -> (tokens, last refill, monotonic s)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one request; returns 0 when allowed, else the seconds to wait."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


def retry_after(seconds: float) -> dict[str, Any]:
    return {"Retry-After": str(max(1, int(seconds + 0.999)))}
