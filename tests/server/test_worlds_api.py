"""Forks over HTTP (/v1/worlds): a fork is its parent at the tick, hash included, and making,
listing, reading and deleting forks never changes the parent; bad requests change nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from harness import ADMIN_TOKEN, Api, AppServer, db_state
from sqlalchemy import text
from workload import Player

from world.store import make_engine


def _fork(admin: Api, **body: object) -> dict:
    made = admin.post("/v1/worlds", json=body)
    assert made.status_code == 201, made.text
    return made.json()


def test_a_fork_is_the_world_at_the_tick_and_leaves_it_alone(server: AppServer, admin: Api) -> None:
    players = [Player(admin.agent(name), seed) for seed, name in enumerate(("ann", "bob"))]
    for player in players:
        player.play(10)
    then = admin.get("/v1/world", params={"hash": "true"}).json()
    for player in players:
        player.play(10)
    before = db_state(server.database_url)
    now = admin.get("/v1/world", params={"hash": "true"}).json()

    made = _fork(admin, **{"from": "main", "at_tick": then["tick"], "name": "exp-1"})
    assert made["name"] == "exp-1" and made["parent"] == "main"
    assert made["at_tick"] == made["tick"] == then["tick"]
    assert made["state_hash"] == then["state_hash"]
    read = admin.get("/v1/worlds/exp-1/world", params={"hash": "true"}).json()
    assert read == then  # the whole world info: clock, season, counts and hash
    assert admin.get("/v1/worlds/main/world", params={"hash": "true"}).json() == now
    # Before its own tick a fork is its parent then.
    early = admin.get("/v1/worlds/exp-1/world", params={"at_tick": 3}).json()
    assert early == admin.get("/v1/world", params={"at_tick": 3}).json()

    generated = _fork(admin, **{"from": "exp-1", "at_tick": then["tick"]})  # a fork of a fork
    assert generated["name"].startswith("fork-") and generated["parent"] == "exp-1"
    assert generated["state_hash"] == then["state_hash"]
    # Without the hash a fork costs what it changes; its hash, asked later, is the same.
    quick = _fork(admin, **{"from": "main", "at_tick": then["tick"], "hash": False})
    assert quick["state_hash"] is None and quick["tick"] == then["tick"]
    assert admin.get(f"/v1/worlds/{quick['name']}/world", params={"hash": "true"}).json() == then
    assert admin.delete(f"/v1/worlds/{quick['name']}").status_code == 200

    listed = admin.get("/v1/worlds").json()
    names = [w["name"] for w in listed["items"]]
    assert names == ["main", *sorted(["exp-1", generated["name"]])]
    main = listed["items"][0]
    assert main["parent"] is None and main["tick"] == now["tick"] and main["size"]["rows"] > 0
    exp = next(w for w in listed["items"] if w["name"] == "exp-1")
    assert exp["tick"] == then["tick"] and exp["size"] == {"rows": 0, "events": 1}
    page = admin.get("/v1/worlds", params={"limit": 1}).json()
    assert [w["name"] for w in page["items"]] == ["main"] and page["next_cursor"] == "main"

    refused = admin.delete("/v1/worlds/exp-1")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "world_has_forks"
    assert admin.delete(f"/v1/worlds/{generated['name']}").status_code == 200
    gone = admin.delete("/v1/worlds/exp-1")
    assert gone.status_code == 200 and gone.json()["at_tick"] == then["tick"]
    assert [w["name"] for w in admin.get("/v1/worlds").json()["items"]] == ["main"]
    assert admin.get("/v1/worlds/exp-1/world").status_code == 404
    assert db_state(server.database_url) | {"worlds": 0} == before | {"worlds": 0}
    assert admin.get("/v1/world", params={"hash": "true"}).json() == now


def test_a_fork_survives_a_restart(server: AppServer, admin: Api) -> None:
    Player(admin.agent("ann"), 1).play(6)
    made = _fork(admin, **{"from": "main", "at_tick": 4, "name": "kept"})
    server.restart()
    read = Api(server, ADMIN_TOKEN).get("/v1/worlds/kept/world", params={"hash": "true"})
    assert read.status_code == 200 and read.json()["state_hash"] == made["state_hash"]


def test_bad_forks_are_refused_and_make_nothing(server: AppServer, admin: Api) -> None:
    ann = admin.agent("ann")
    Player(ann, 2).play(4)
    tick = admin.get("/v1/world").json()["tick"]
    _fork(admin, **{"from": "main", "at_tick": 2, "name": "late"})
    others = [admin.agent(f"an-{role}", role) for role in ("policy", "observer")]
    before = db_state(server.database_url)
    cases = [
        ({"from": "main", "at_tick": tick + 1}, 422, "tick_in_future"),
        ({"from": "main", "at_tick": -1}, 422, "validation_error"),
        ({"from": "nowhere", "at_tick": 0}, 404, "unknown_world"),
        ({"from": "main", "at_tick": 0, "name": "late"}, 409, "world_exists"),
        ({"from": "main", "at_tick": 0, "name": "main"}, 409, "world_exists"),
        ({"from": "late", "at_tick": 1}, 422, "tick_before_fork"),
    ]
    cases += [
        ({"from": "main", "at_tick": 0, "name": bad}, 422, "validation_error")
        for bad in ("Exp", "1st", "a_b", "x" * 33, "")
    ]
    for body, status, code in cases:
        reply = admin.post("/v1/worlds", json=body)
        assert reply.status_code == status, (body, reply.text)
        assert reply.json()["error"]["code"] == code, (body, reply.text)
    for other in others:
        assert other.post("/v1/worlds", json={"from": "main", "at_tick": 0}).status_code == 403
        assert other.delete("/v1/worlds/late").status_code == 403
    assert admin.delete("/v1/worlds/main").json()["error"]["code"] == "world_is_main"
    assert admin.delete("/v1/worlds/nowhere").status_code == 404
    after = db_state(server.database_url)
    assert after["hash"] == before["hash"] and after["worlds"] == before["worlds"] == 1
    assert [w["name"] for w in admin.get("/v1/worlds").json()["items"]] == ["main", "late"]


class InWorld(Api):
    """An agent's client whose paths are those of world ``name`` (``/v1/worlds/{name}/…``)."""

    def __init__(self, api: Api, name: str) -> None:
        self.server, self.http, self.id = api.server, api.http, api.__dict__.get("id")
        self.prefix = f"/v1/worlds/{name}/"

    def get(self, path: str, **kw: object) -> object:
        return self.http.get(self.prefix + path.removeprefix("/v1/"), **kw)

    def post(self, path: str, **kw: object) -> object:
        return self.http.post(self.prefix + path.removeprefix("/v1/"), **kw)


def test_play_in_a_fork_leaves_the_parent_alone(server: AppServer, admin: Api) -> None:
    ann, bob = admin.agent("ann"), admin.agent("bob")
    Player(ann, 1).play(8)  # ann's episode stays open at the fork's tick
    tick = admin.get("/v1/world").json()["tick"]
    _fork(admin, **{"from": "main", "at_tick": tick, "name": "exp"})
    cy = admin.agent("cy")  # made after the fork: a newcomer there
    before = db_state(server.database_url)
    parent = admin.get("/v1/world", params={"hash": "true"}).json()

    for seed, api in enumerate((bob, cy, ann)):
        Player(InWorld(api, "exp"), seed + 5).play(17)
    in_fork = InWorld(admin, "exp")
    episodes = in_fork.get("/v1/episodes", params={"limit": 100}).json()["items"]
    assert {e["agent_id"] for e in episodes} == {ann.id, bob.id, cy.id}
    assert all(e["begin_tick"] >= tick for e in episodes)  # ann's open episode stayed behind
    fork = admin.get("/v1/worlds/exp/world", params={"hash": "true"}).json()
    assert fork["tick"] == tick + 51 and fork["avatars"] == parent["avatars"]
    assert in_fork.get("/v1/events", params={"from_tick": tick + 1}).json()["items"]
    assert in_fork.get(f"/v1/episodes/{episodes[0]['id']}").status_code == 200

    assert db_state(server.database_url) == before  # the parent: tables and hash
    assert admin.get("/v1/world", params={"hash": "true"}).json() == parent
    main_episodes = admin.get("/v1/episodes", params={"limit": 100}).json()["items"]
    assert {e["agent_id"] for e in main_episodes} == {ann.id}
    assert admin.get("/v1/worlds/nowhere/episodes").json()["error"]["code"] == "unknown_world"


def test_forks_are_made_and_deleted_while_main_is_stepped(server: AppServer, admin: Api) -> None:
    """Making and deleting a fork reads, then writes the registry: on SQLite a transaction that
    read cannot write once another committed meanwhile (503 before), as a stepped world does."""
    player = Player(admin.agent("ann"), 5)
    player.play(2)
    stop = threading.Event()

    def step() -> None:
        while not stop.is_set():
            player.play(1)

    stepping = threading.Thread(target=step)
    stepping.start()
    try:
        for i in range(8):
            tick = admin.get("/v1/world").json()["tick"]
            body = {"from": "main", "at_tick": tick, "name": f"busy-{i}", "hash": False}
            made = admin.post("/v1/worlds", json=body)
            assert made.status_code == 201, made.text
            gone = admin.delete(f"/v1/worlds/busy-{i}")
            assert gone.status_code == 200, gone.text
    finally:
        stop.set()
        stepping.join()


def test_one_name_asked_for_at_once_is_made_once(server: AppServer, admin: Api) -> None:
    """Eight requests make one name at the same moment: one is made (201) and whole (its hash
    is main's at the tick), the others get 409, and no store of theirs is left behind. Each
    built a store of its own: the registry keeps one, and a loser drops only its own (a loser
    used to build where the winner had, dropping the winner's store under its row)."""
    Player(admin.agent("ann"), 2).play(3)
    tick = admin.get("/v1/world").json()["tick"]
    then = admin.get("/v1/world", params={"at_tick": tick, "hash": "true"}).json()["state_hash"]
    together = threading.Barrier(8)
    replies: list[object] = []

    def make() -> None:
        together.wait()
        body = {"from": "main", "at_tick": tick, "name": "twin", "hash": False}
        replies.append(admin.post("/v1/worlds", json=body))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in replies) == [201] + [409] * 7  # type: ignore[attr-defined]
    made = admin.get("/v1/worlds/twin/world", params={"hash": "true"}).json()
    assert made["state_hash"] == then
    assert stores_named(server.database_url, "twin") == 1


def stores_named(database_url: str, name: str) -> int:
    """How many fork stores of ``name`` the main world's folder or database holds."""
    engine = make_engine(database_url)
    try:
        if engine.dialect.name == "sqlite":
            folder = Path(str(engine.url.database)).parent / "forks"
            return len(list(folder.glob(f"{name}.*.db")))
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM pg_namespace WHERE nspname LIKE :like"),
                {"like": f"fork\\_{name}\\_%"},
            )
            return int(found.scalar_one())
    finally:
        engine.dispose()
