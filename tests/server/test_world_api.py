"""GET /v1/world: the state hash of the world now, and the world as it was at a past tick (at
its end: every transaction that ran at that tick, such as a begin after a step, is in it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness import Api, AppServer, db_state
from sqlalchemy import delete
from workload import Player

from world.state import World
from world.store import SqlBackend, make_engine, session_factory
from world.store.history import world_at
from world.store.models import EventRow
from world.store.past import past_backend


def test_the_world_at_each_past_tick_is_the_world_seen_then(server: AppServer, admin: Api) -> None:
    ann, bob = Player(admin.agent("ann"), 5), Player(admin.agent("bob"), 6)
    seen = [admin.get("/v1/world", params={"hash": "true"}).json()]  # tick 0, both begun
    for _ in range(4):
        seen += ann.play(6) + bob.play(6)
    now = admin.get("/v1/world", params={"hash": "true"}).json()
    assert now["state_hash"] == db_state(server.database_url)["hash"]  # the replay tests' hash
    assert admin.get("/v1/world").json() == {**now, "state_hash": None}  # not asked: not read
    assert len({w["state_hash"] for w in seen}) > len(seen) // 2  # the state moved
    for then in seen:
        past = admin.get("/v1/world", params={"at_tick": then["tick"]})
        assert past.status_code == 200, past.text
        assert past.json() == then, f"tick {then['tick']}"
    assert admin.get("/v1/world", params={"at_tick": now["tick"]}).json() == now


def test_a_tick_after_the_worlds_or_below_zero_is_refused(server: AppServer, admin: Api) -> None:
    tick = admin.get("/v1/world").json()["tick"]
    ahead = admin.get("/v1/world", params={"at_tick": tick + 1})
    assert ahead.status_code == 422
    assert ahead.json()["error"]["code"] == "tick_in_future"
    assert ahead.json()["error"]["details"] == {"tick": tick}
    for bad in ("-1", "soon", str(2**63)):
        assert admin.get("/v1/world", params={"at_tick": bad}).status_code == 422
    assert Api(server).get("/v1/world", params={"at_tick": 0}).status_code == 401


def test_the_stored_past_is_the_replayed_past(server: AppServer, admin: Api) -> None:
    """The world at each tick read from the tables and the images of what changed since
    (world.store.past) is the world the log's replay up to that tick rebuilds."""
    players = [Player(admin.agent(name), seed) for seed, name in enumerate(("ann", "bob", "cy"))]
    for _ in range(5):
        for player in players:
            player.play(5)
    engine = make_engine(server.database_url)
    try:
        with session_factory(engine)() as session:
            now = World(SqlBackend(session)).tick
            for tick in range(now + 1):
                stored = past_backend(session, tick)
                assert stored is not None
                replayed = world_at(session=session, tick=tick)
                assert _counts(stored) == _counts(replayed), f"tick {tick}"
                assert World(stored).state_hash() == World(replayed).state_hash(), f"tick {tick}"
    finally:
        engine.dispose()


def _counts(backend: Any) -> dict[str, int]:
    return dict(Counter(table for table, _row in backend.dump()))


def test_a_log_without_counters_events_is_replayed(server: AppServer, admin: Api) -> None:
    """A log written before ``counters`` events cannot say where the ids stood at a past tick:
    the past is then replayed, and answers the same."""
    player = Player(admin.agent("ann"), 3)
    seen = player.play(8)
    engine = make_engine(server.database_url)
    try:
        with session_factory(engine)() as session:
            session.execute(delete(EventRow).where(EventRow.kind == "counters"))
            session.commit()
            assert past_backend(session, seen[0]["tick"]) is None
    finally:
        engine.dispose()
    for then in seen:
        assert admin.get("/v1/world", params={"at_tick": then["tick"]}).json() == then
