"""The OpenEnv WebSocket deadlines (server/openenv/deadlines.py), on fake ASGI channels: a
socket that begins no episode in time, or falls silent after it did, is closed by the server
and its app is told that the client left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from server.openenv.deadlines import IDLE, UNAUTHENTICATED, Deadlines

Message = dict[str, Any]
OBSERVATION = '{"type":"observation","data":{"observation":{}}}'
REFUSAL = '{"type":"error","data":{"message":"unauthorized: the bearer token is not valid"}}'


class Channel:
    """A client that sends ``messages`` after ``delays`` (seconds), and the server's sends."""

    def __init__(self, *timed: tuple[float, Message]) -> None:
        self.timed = list(timed)
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if not self.timed:  # a client that stays silent, then leaves by itself
            await asyncio.sleep(10)
            return {"type": "websocket.disconnect", "code": 1000}
        delay, message = self.timed.pop(0)
        await asyncio.sleep(delay)
        return message

    async def send(self, message: Message) -> None:
        self.sent.append(message)


def run(channel: Channel, reset_s: float, idle_s: float, app: Callable[..., Awaitable[Any]]) -> Any:
    async def go() -> Any:
        guarded = Deadlines(channel.receive, channel.send, reset_s, idle_s)
        return await app(guarded)

    return asyncio.run(go())


def text(message: str) -> Message:
    return {"type": "websocket.receive", "text": message}


def test_a_socket_that_begins_no_episode_is_closed_at_the_reset_deadline() -> None:
    channel = Channel((0.0, {"type": "websocket.connect"}), (0.05, text('{"type":"reset"}')))

    async def app(ws: Deadlines) -> list[Message]:
        got = [await ws.receive(), await ws.receive()]
        await ws.send({"type": "websocket.send", "text": REFUSAL})  # a refused reset
        got.append(await ws.receive())  # the client says nothing more
        await ws.send({"type": "websocket.close", "code": 1000})  # the app's own close
        return got

    start = time.monotonic()
    got = run(channel, reset_s=0.3, idle_s=60, app=app)
    assert [m["type"] for m in got] == [
        "websocket.connect",
        "websocket.receive",
        "websocket.disconnect",
    ]
    assert got[-1]["code"] == UNAUTHENTICATED
    closes = [m for m in channel.sent if m["type"] == "websocket.close"]
    assert [c["code"] for c in closes] == [UNAUTHENTICATED]  # the app's close was dropped
    assert time.monotonic() - start < 5  # closed at the deadline, not at the silent client's


def test_the_reset_deadline_counts_from_connecting_not_from_each_message() -> None:
    # Refused resets every 0.2 s do not keep an unauthenticated socket alive past 0.5 s.
    refused = [(0.2, text('{"type":"reset"}')) for _ in range(10)]
    channel = Channel((0.0, {"type": "websocket.connect"}), *refused)

    async def app(ws: Deadlines) -> int:
        received = 0
        while (await ws.receive())["type"] != "websocket.disconnect":
            received += 1
            await ws.send({"type": "websocket.send", "text": REFUSAL})
        return received

    assert run(channel, reset_s=0.5, idle_s=60, app=app) <= 3


def test_once_an_episode_began_only_silence_longer_than_the_idle_bound_closes() -> None:
    channel = Channel(
        (0.0, {"type": "websocket.connect"}),
        (0.0, text('{"type":"reset"}')),
        (0.3, text('{"type":"step"}')),  # past the reset deadline, within the idle bound
    )

    async def app(ws: Deadlines) -> list[Message]:
        got = [await ws.receive(), await ws.receive()]
        await ws.send({"type": "websocket.send", "text": OBSERVATION})  # the reset went through
        got.append(await ws.receive())
        await ws.send({"type": "websocket.send", "text": OBSERVATION})
        got.append(await ws.receive())  # then nothing for longer than idle_s
        return got

    got = run(channel, reset_s=0.1, idle_s=0.5, app=app)
    assert got[2] == text('{"type":"step"}')
    assert got[3] == {"type": "websocket.disconnect", "code": IDLE}
    assert channel.sent[-1]["type"] == "websocket.close" and channel.sent[-1]["code"] == IDLE
