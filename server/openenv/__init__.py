"""OpenEnv's protocol at ``/openenv`` (design §6), served by openenv-core's own server code.

This module only mounts it and never imports openenv-core itself: the library is an extra
(``pip install -e '.[interop]'``) and takes seconds to import, so the server still starts in
well under two seconds and runs without it. The first request to ``/openenv`` loads it (in a
thread; requests arriving meanwhile wait for it) and builds the OpenEnv app of
:mod:`server.openenv.environment`, which every later request reaches directly. Each WebSocket
gets the deadlines of :mod:`server.openenv.deadlines`, so that no socket holds a session slot
without playing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
import time

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from server.openenv import peer
from server.openenv.deadlines import Deadlines
from server.runtime import Runtime

log = logging.getLogger("bigworld.server")
PREFIX = "/openenv"


def mount(app: FastAPI, runtime: Runtime) -> None:
    """Serve OpenEnv at ``/openenv`` when openenv-core is installed (else say how to get it)."""
    if importlib.util.find_spec("openenv") is None:
        log.info("no OpenEnv endpoint: openenv-core is not installed (pip install -e '.[interop]')")
        return
    app.mount(PREFIX, LazyOpenEnv(runtime))


class LazyOpenEnv:
    """ASGI app that builds the OpenEnv app on its first request and hands every request to it."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            app = await asyncio.to_thread(self._build)
        client = scope.get("client")
        peer.address.set(client[0] if client else "unknown")
        if scope["type"] == "websocket":
            settings = self.runtime.settings
            guarded = Deadlines(
                receive, send, settings.openenv_reset_timeout_s, settings.episode_idle_timeout_s
            )
            receive, send = guarded.receive, guarded.send
        try:
            await app(scope, receive, send)
        except WebSocketDisconnect:
            # openenv-core 0.3.0 closes a socket its client has already closed and expects a
            # RuntimeError; Starlette raises this instead. The session is over either way.
            pass

    def _build(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                from server.openenv.environment import build_app

                started = time.perf_counter()
                self._app = build_app(self.runtime)
                log.info("OpenEnv endpoint ready in %.1fs", time.perf_counter() - started)
            app: ASGIApp = self._app
            return app
