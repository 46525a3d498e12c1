"""Client threads that play episodes with random admissible actions, surviving server crashes,
and the checks that compare what they were told with what the database holds."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from harness import Api, Server
from sqlalchemy import select

from world.replay import replay
from world.state import MemoryBackend, World
from world.store import SqlBackend, make_engine, read_world, session_factory
from world.store.models import AvatarRow, EventRow, StepRow, ThingRow

RETRYABLE = (httpx.TransportError,)


@dataclass(frozen=True)
class Ack:
    episode: int
    step: int
    action: str
    tick: int
    phase: int  # which server life answered it (0 before the crash, 1 after)


@dataclass(eq=False)
class Walker(threading.Thread):
    server: Server  # harness.AppServer or harness.ServerProcess
    token: str
    seed: int
    acks: list[Ack]
    stop: threading.Event
    phase: list[int]  # shared, phase[0] is the current server life
    problems: list[str] = field(default_factory=list)
    greedy: float = 0.0  # chance of picking a "take" action when there is one (to make races)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self.rng = random.Random(self.seed)
        self.http = self.server.client(self.token)

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """Send until the server answers (it may be down for a while): safe for steps, whose
        index makes a resend idempotent, and for begin, whose resend meets a 409 naming it."""
        deadline = time.monotonic() + 120
        while True:
            try:
                reply = self.http.request(method, path, **kw)
                if reply.status_code != 503:
                    return reply
            except RETRYABLE:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: server unreachable for 120 s")
            time.sleep(0.05)

    def _begin(self) -> tuple[int, int, list[str]]:
        reply = self._send("POST", "/v1/episodes", json={})
        if reply.status_code == 201:
            body = reply.json()
            return body["episode_id"], 0, body["admissible_actions"]
        assert reply.status_code == 409, reply.text
        episode = reply.json()["error"]["details"]["episode_id"]
        detail = self._send("GET", f"/v1/episodes/{episode}").json()
        last = detail["steps"][-1] if detail["steps"] else detail
        return episode, detail["last_step"], last["admissible_actions"]

    def run(self) -> None:
        try:
            self._play()
        except Exception as exc:  # reported by the test
            self.problems.append(repr(exc))

    def _play(self) -> None:
        episode = None
        while not self.stop.is_set():
            if episode is None:
                episode, last, admissible = self._begin()
            takes = [a for a in admissible if a.startswith("take ")]
            action = self.rng.choice(
                takes if takes and self.rng.random() < self.greedy else admissible
            )
            phase = self.phase[0]
            reply = self._send(
                "POST", f"/v1/episodes/{episode}/steps", json={"step": last + 1, "action": action}
            )
            if reply.status_code == 409 and reply.json()["error"]["code"] == "episode_ended":
                episode = None
                continue
            if reply.status_code != 200:
                self.problems.append(
                    f"step {last + 1} of {episode}: {reply.status_code} {reply.text[:200]}"
                )
                return
            body = reply.json()
            self.acks.append(
                Ack(episode, body["step"], action, body["tick"], max(phase, self.phase[0]))
            )
            last, admissible = body["step"], body["admissible_actions"]
            if body["done"]:
                episode = None


def check_history(database_url: str, acks: list[Ack]) -> str:
    """Assert the database agrees with every acknowledged step; returns the live state hash."""
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            steps = {(r.episode_id, r.step): r for r in session.scalars(select(StepRow))}
            told = {(a.episode, a.step): a for a in acks}
            assert len(told) == len(acks), "a step index was acknowledged twice"
            assert set(steps) == set(told), "acknowledged steps and stored steps differ"
            for key, ack in told.items():
                assert (steps[key].action, steps[key].tick) == (ack.action, ack.tick), key
            ticks = sorted(r.tick for r in steps.values())
            if engine.dialect.name == "sqlite":
                assert ticks == list(range(1, len(ticks) + 1)), "ticks are not one per step"
            else:  # a sequence: one per step still, with gaps where a drawn one was not kept
                assert len(set(ticks)) == len(ticks) and ticks[0] >= 1, "a tick taken twice"
            assert read_world(session).meta.tick == ticks[-1]
            avatars = {a.id for a in session.scalars(select(AvatarRow))}
            actions = session.execute(
                select(EventRow.actor, EventRow.tick).where(EventRow.kind == "action")
            ).all()
            assert len(actions) == len(steps) and {t for _, t in actions} == set(ticks)
            assert {a for a, _ in actions} <= avatars
            for thing in session.scalars(select(ThingRow)):
                assert (thing.place is None) != (thing.holder is None), (
                    f"thing {thing.id} is nowhere or twice"
                )
                if thing.holder is not None:
                    assert thing.holder in avatars and thing.container is None
            live = World(SqlBackend(session)).state_hash()
            events = [
                dict(r)
                for r in session.execute(
                    select(EventRow.__table__).order_by(EventRow.id)
                ).mappings()
            ]
            seed = read_world(session).meta.seed
    finally:
        engine.dispose()
    rebuilt = MemoryBackend(seed)
    replay(events, rebuilt)
    assert World(rebuilt).state_hash() == live, (
        "replaying the event log does not give the live state"
    )
    return live


class Player:
    """An agent stepping at random among the admissible actions, beginning anew as episodes end."""

    def __init__(self, api: Api, seed: int) -> None:
        self.api, self.rng = api, random.Random(seed)
        self._begin()

    def _begin(self) -> None:
        begun = self.api.post("/v1/episodes", json={}).json()
        self.episode, self.index, self.actions = begun["episode_id"], 0, begun["admissible_actions"]

    def play(self, steps: int) -> list[dict]:
        """``steps`` steps, and after each the world as GET /v1/world answered it."""
        seen = []
        for _ in range(steps):
            self.index += 1
            action = self.rng.choice(self.actions)
            reply = self.api.post(
                f"/v1/episodes/{self.episode}/steps", json={"step": self.index, "action": action}
            ).json()
            self.actions = reply["admissible_actions"]
            if reply["done"]:
                self._begin()
            seen.append(self.api.get("/v1/world", params={"hash": "true"}).json())
        return seen
