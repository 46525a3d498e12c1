"""Deadlines for OpenEnv WebSockets, so that a socket cannot hold a session slot unused.

openenv-core gives every WebSocket a session slot (at most ``openenv_max_sessions``) from the
moment it connects, and its own idle reaper never starts under a mount. So the mount wraps
each WebSocket's ASGI ``receive`` and ``send``: a socket that has not begun an episode (a
successful ``reset``, which needs a valid token) within ``reset_s`` of connecting, or that
sends nothing for ``idle_s`` after that, is closed by the server, and the app is told that its
client left. openenv-core then frees the slot and the session abandons its open episode, as
when a client disconnects. The time a step takes is never counted: the clock runs only while
the server waits for the client's next message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.types import Message, Receive, Send

# openenv-core's answer to a reset or step that went through (pinned 0.3.0's wire format);
# its refusals start with {"type":"error"
OBSERVATION = '{"type":"observation"'
UNAUTHENTICATED = 1008  # WebSocket close code: policy violation (no episode begun in time)
IDLE = 1001  # going away: the client said nothing for too long


@dataclass
class Deadlines:
    """One WebSocket's guarded ``receive`` and ``send`` (see the module's docstring)."""

    receive_raw: Receive
    send_raw: Send
    reset_s: float  # seconds from connecting to the first observation sent back
    idle_s: float  # seconds the client may stay silent once it has begun an episode
    began: bool = False
    closed: bool = False

    def __post_init__(self) -> None:
        self._reset_by = asyncio.get_running_loop().time() + self.reset_s

    async def receive(self) -> Message:
        if self.began:
            wait = self.idle_s
        else:
            wait = max(0.0, self._reset_by - asyncio.get_running_loop().time())
        try:
            return await asyncio.wait_for(self.receive_raw(), wait)
        except TimeoutError:
            code = IDLE if self.began else UNAUTHENTICATED
            reason = "idle" if self.began else "no episode begun in time: reset(token=...) first"
            await self.send_raw({"type": "websocket.close", "code": code, "reason": reason})
            self.closed = True
            return {"type": "websocket.disconnect", "code": code}

    async def send(self, message: Message) -> None:
        if self.closed:  # the app's own close after the disconnect we reported
            return
        if (
            not self.began
            and message["type"] == "websocket.send"
            and str(message.get("text", "")).startswith(OBSERVATION)
        ):
            self.began = True
        await self.send_raw(message)
