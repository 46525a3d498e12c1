"""The WebSocket's peer address, for the failed-authentication throttle (``server.auth``).

OpenEnv hands its environments no connection, so the mount (``server.openenv``) sets the
address here for each request and the environment (``server.openenv.environment``) reads it
in reset and step. It lives in a module of its own so that the environment, which the mount
imports when first asked, does not import the mount back.
"""

from __future__ import annotations

from contextvars import ContextVar

address: ContextVar[str] = ContextVar("openenv_peer", default="unknown")
