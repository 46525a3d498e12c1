"""A fork's store (world.store.fork): a database of its own holding only what the fork changed,
read over its parent as it was at the fork's tick. On both databases: the fork's state at its
creation is the parent's at that tick; the parent moving on changes nothing the fork reads;
random steps in the fork change nothing in the parent, and replaying the fork's own log over
the parent at the tick gives the fork's state; a fork of the fork starts where the fork stood."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dbfixtures import fresh_database
from harness import Api, AppServer, db_state
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session
from workload import Player

from migrations import upgrade_to_head
from server.worlds import new_store
from world import engine
from world.replay import replay
from world.state import Backend, World
from world.store import SqlBackend, ensure_world, lock_world, make_engine, session_factory
from world.store.fork import ForkBackend, Written, create_fork
from world.store.history import world_at
from world.store.models import EventRow, ForkRow
from world.store.past import Kept, KeptPast, Since, past_backend
from world.store.worlds import location_for, make_store, open_store


@contextmanager
def sessions(url: str) -> Iterator[Session]:
    engine_ = make_engine(url)
    try:
        with session_factory(engine_)() as session:
            yield session
    finally:
        engine_.dispose()


def migrated(url: str) -> str:
    engine_ = make_engine(url)
    try:
        upgrade_to_head(engine_)
    finally:
        engine_.dispose()
    return url


def fork_of(parent_session: Session, fork_session: Session, tick: int) -> ForkBackend:
    past = past_backend(parent_session, tick)
    assert past is not None
    return ForkBackend(fork_session, past)


def walk(
    fork: Callable[[], ForkBackend], session: Session, avatars: list[str], steps: int, seed: int
) -> None:
    """``steps`` random admissible actions of ``avatars`` in turn, a transaction (and a
    backend, as the server opens them) each."""
    rng = random.Random(seed)
    session.rollback()  # lock_world opens the transaction
    for i in range(steps):
        lock_world(session)
        world = World(fork())
        avatar = avatars[i % len(avatars)]
        action = rng.choice(engine.observe(world, avatar).admissible)
        engine.step(world, avatar, action)
        world.commit()
        session.commit()


def hash_of(backend: Backend) -> str:
    return World(backend).state_hash()


def test_a_fork_is_its_parent_at_the_tick_and_goes_its_own_way(
    server: AppServer, admin: Api, database_url: str, tmp_path: Path
) -> None:
    kind = "sqlite" if database_url.startswith("sqlite") else "postgres"
    players = [Player(admin.agent(name), seed) for seed, name in enumerate(("ann", "bob"))]
    for player in players:
        player.play(12)
    then = admin.get("/v1/world", params={"hash": "true"}).json()
    for player in players:  # the parent moves on after the fork's tick
        player.play(12)
    parent_now = db_state(server.database_url)

    with (
        fresh_database(kind, _folder(tmp_path / "fork")) as fork_url,
        sessions(server.database_url) as parent,
    ):
        with sessions(migrated(fork_url)) as own:
            past = past_backend(parent, then["tick"])
            assert past is not None
            create_fork(own, past, then["tick"])
            own.commit()
            fork = fork_of(parent, own, then["tick"])
            assert hash_of(fork) == then["state_hash"]  # the parent at the tick, not now
            assert World(fork).tick == then["tick"]

            walk(lambda: fork_of(parent, own, then["tick"]), own, ["ann", "bob"], 50, seed=11)
            fork = fork_of(parent, own, then["tick"])
            after = World(fork)
            assert after.tick == then["tick"] + 50 and hash_of(fork) != then["state_hash"]
            _check_places(fork)
            _check_contents(fork)
            _check_contents(past)  # the parent at the tick, moved on since

            # The fork's own log replayed over the parent at the tick rebuilds the fork.
            rebuilt = world_at(session=parent, tick=then["tick"])
            logged = own.execute(select(EventRow.__table__).order_by(EventRow.id)).mappings()
            replay([dict(e) for e in logged], rebuilt)
            assert hash_of(rebuilt) == hash_of(fork)

            # A fork of the fork, at the fork's tick, starts where the fork stands.
            with fresh_database(kind, _folder(tmp_path / "fork2")) as url2:
                with sessions(migrated(url2)) as own2:
                    fork_past = past_backend(own, after.tick, now=fork)
                    assert fork_past is not None
                    create_fork(own2, fork_past, after.tick)
                    own2.commit()

                    def fork2() -> ForkBackend:
                        now = fork_of(parent, own, then["tick"])
                        past = past_backend(own, after.tick, now=now)
                        assert past is not None
                        return ForkBackend(own2, past)

                    assert hash_of(fork2()) == hash_of(fork)
                    walk(fork2, own2, ["bob"], 10, seed=12)
                    assert World(fork2()).tick == after.tick + 10
                    assert hash_of(fork_of(parent, own, then["tick"])) == hash_of(fork)

    assert db_state(server.database_url) == parent_now  # nothing in the parent changed


def _check_places(backend: Backend) -> None:
    """Every thing lies in one place or is held by one avatar that exists."""
    rows = list(backend.dump())
    avatars = {r["id"] for t, r in rows if t == "avatar"}
    places = {r["id"] for t, r in rows if t == "place"}
    for table, row in rows:
        if table == "thing":
            assert (row["place"] is None) != (row["holder"] is None), row
            assert row["place"] in places or row["holder"] in avatars, row


def _check_contents(backend: Backend, places: list[str] | None = None) -> None:
    """Each receptacle's things, read alone (a goal check's read), are those its place's
    things have in it, in ``places`` (by default every place ``backend`` dumps)."""
    if places is None:
        places = sorted(r["id"] for t, r in backend.dump() if t == "place")
    for place in places:
        lying = sorted(backend.load_things_in([place]), key=lambda t: t.id)
        receptacles = {t.id for t in lying if t.kind == "receptacle"}
        for receptacle in sorted(receptacles | {t.container for t in lying if t.container}):
            inside = sorted(backend.load_contents(place, receptacle), key=lambda t: t.id)
            assert inside == [t for t in lying if t.container == receptacle], (place, receptacle)


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def test_a_thing_the_fork_wrote_then_removed_stays_removed(
    database_url: str, tmp_path: Path
) -> None:
    """A thing inherited from the parent, changed in the fork (its row then the fork's) and
    later removed there (an apple moved, then eaten) does not show through from the parent."""
    kind = "sqlite" if database_url.startswith("sqlite") else "postgres"
    with sessions(migrated(database_url)) as parent:
        ensure_world(parent, 0)
        parent.commit()
        world = World(SqlBackend(parent, lock_world(parent)))
        world.region(0, 0)
        world.commit()
        parent.commit()
        with (
            fresh_database(kind, _folder(tmp_path / "fork")) as fork_url,
            sessions(migrated(fork_url)) as own,
        ):
            create_fork(own, past_backend(parent, 0), 0)  # type: ignore[arg-type]
            own.commit()
            thing = next(r["id"] for t, r in fork_of(parent, own, 0).dump() if t == "thing")
            for change in ("write", "remove"):  # two transactions, as the server runs them
                world = World(fork_of(parent, own, 0))
                found = world.thing(thing)
                if change == "write":
                    found.attrs["moved"] = True
                    world.touch(found)
                else:
                    world.remove(found)
                world.commit()
                own.commit()
            fork = fork_of(parent, own, 0)
            assert fork.load_thing(thing) is None
            assert thing not in {r["id"] for t, r in fork.dump() if t == "thing"}


def test_what_changed_since_the_tick_is_kept_up_as_the_parent_moves_on(
    server: AppServer, admin: Api
) -> None:
    """One ``Since`` kept across reads (as a fork keeps its parent's) answers what a fresh read
    of the whole log does, round after round of the parent moving on; its hash stays the
    parent's at the tick."""
    players = [Player(admin.agent(name), seed) for seed, name in enumerate(("cy", "di"))]
    players[0].play(6)
    then = admin.get("/v1/world", params={"hash": "true"}).json()
    kept = Since(then["tick"])
    for _ in range(4):
        for player in players:
            player.play(3)
        with sessions(server.database_url) as parent:
            cached, fresh = (
                past_backend(parent, then["tick"], since=kept),
                past_backend(parent, then["tick"]),
            )
            assert cached is not None and fresh is not None
            assert list(cached.dump()) == list(fresh.dump())
            assert hash_of(cached) == then["state_hash"]
    assert kept.things or kept.avatars  # the parent did change things the cache holds


def test_what_a_fork_read_of_its_parent_is_kept_and_is_the_parent_at_the_tick(
    server: AppServer, admin: Api
) -> None:
    """``KeptPast`` over one ``Kept`` (as a fork's transactions read their parent) answers
    every read as the parent at the tick does while the parent moves on, opens the parent's
    database only for what it has not read before, and hands out copies: a transaction that
    changes what it loaded changes nothing a later one reads. With a limit it drops what it
    keeps and answers the same."""
    players = [Player(admin.agent(name), seed) for seed, name in enumerate(("gil", "hal"))]
    players[0].play(6)
    tick = admin.get("/v1/world").json()["tick"]
    for limit in (50_000, 40):
        kept, opened = Kept(limit), []  # a fork's, and the transactions that opened the parent
        for _round in range(3):
            for player in players:
                player.play(3)
            with sessions(server.database_url) as parent:
                truth = past_backend(parent, tick)
                assert truth is not None

                def open_past(parent: Session = parent, opened: list[int] = opened) -> Backend:
                    opened.append(1)
                    past = past_backend(parent, tick)
                    assert past is not None
                    return past

                rows = list(truth.dump())
                regions = sorted({(r["rx"], r["ry"]) for t, r in rows if t == "region"})
                places = sorted(r["id"] for t, r in rows if t == "place")
                avatars = sorted(r["id"] for t, r in rows if t == "avatar")
                things = sorted(r["id"] for t, r in rows if t == "thing")[:60]
                for _ in range(2):
                    read = KeptPast(kept, open_past)
                    assert read.load_meta() == truth.load_meta()
                    for rx, ry in [*regions, (900, 900)]:
                        assert read.load_region(rx, ry) == truth.load_region(rx, ry)
                        assert read.load_places_in(rx, ry) == truth.load_places_in(rx, ry)
                    assert read.load_things_in(places) == truth.load_things_in(places)
                    _check_contents(read, places)
                    assert read.load_avatars_in(places) == truth.load_avatars_in(places)
                    for avatar in [*avatars, "nobody"]:
                        assert read.load_avatar(avatar) == truth.load_avatar(avatar)
                        assert read.load_inventory(avatar) == truth.load_inventory(avatar)
                    for thing in [*things, 10**9]:
                        assert read.load_thing(thing) == truth.load_thing(thing)
                    for loaded in read.load_things_in(places):
                        loaded.place, loaded.attrs["scribbled"] = "nowhere", True
                    for avatar in avatars:
                        moved = read.load_avatar(avatar)
                        assert moved is not None
                        moved.place = "nowhere"
        if limit > len(rows):
            assert len(opened) == 1  # the first transaction read it all; the rest, nothing
        else:
            assert len(opened) == 6  # dropped and read again in every transaction


def test_a_forks_world_lock_is_its_own(server: AppServer, admin: Api, database_url: str) -> None:
    """On PostgreSQL a fork's store is a schema of the main world's database, whose advisory
    locks all schemas share: a fork's world lock must not wait on its parent's."""
    if database_url.startswith("sqlite"):
        pytest.skip("a SQLite fork is a database file of its own: no lock is shared")
    Player(admin.agent("eve"), 3).play(3)
    tick = admin.get("/v1/world").json()["tick"]
    made = admin.post("/v1/worlds", json={"from": "main", "at_tick": tick, "name": "locks"})
    assert made.status_code == 201, made.text
    main_engine = make_engine(server.database_url)
    with session_factory(main_engine)() as registry:
        location = registry.scalars(select(ForkRow.location).where(ForkRow.name == "locks")).one()
    fork_engine = open_store(main_engine, location)
    try:
        with session_factory(main_engine)() as main, session_factory(fork_engine)() as fork:
            lock_world(main)  # held until main's transaction ends
            fork.connection().exec_driver_sql("SET lock_timeout = '3s'")
            assert lock_world(fork).meta.tick == tick  # before: LockNotAvailable after 3 s
            fork.rollback()
            main.rollback()
    finally:
        fork_engine.dispose()
        main_engine.dispose()


def test_reads_a_fork_skips_are_the_reads_it_would_make(
    server: AppServer, admin: Api, database_url: str, tmp_path: Path
) -> None:
    """A fork kept its own ``Written`` across a random walk (as its runtime does) reads every
    region, place's things and crowd, and inventory as one that queries its own tables for all
    of them does."""
    kind = "sqlite" if database_url.startswith("sqlite") else "postgres"
    Player(admin.agent("fay"), 4).play(8)
    then = admin.get("/v1/world").json()
    with (
        fresh_database(kind, _folder(tmp_path / "fork")) as fork_url,
        sessions(server.database_url) as parent,
        sessions(migrated(fork_url)) as own,
    ):
        past = past_backend(parent, then["tick"])
        assert past is not None
        create_fork(own, past, then["tick"])
        own.commit()
        kept = Written()

        def fork() -> ForkBackend:
            return ForkBackend(own, past_backend(parent, then["tick"]), written=kept)  # type: ignore[arg-type]

        walk(fork, own, ["fay"], 40, seed=13)
        rows = list(fork().dump())
        everything = Written()
        everything.things = frozenset(r["id"] for t, r in rows if t == "thing")
        everything.avatars = frozenset(r["id"] for t, r in rows if t == "avatar")
        everything.regions = frozenset(f"{r['rx']},{r['ry']}" for t, r in rows if t == "region")
        places = sorted(r["id"] for t, r in rows if t == "place")
        everything.spots = frozenset(places) | everything.avatars
        everything.crowds = frozenset(places)
        asked = ForkBackend(own, past_backend(parent, then["tick"]), written=everything)  # type: ignore[arg-type]
        skipping = fork()
        assert kept.things and kept.spots  # the walk wrote things the reads must find
        for key in sorted(everything.regions):
            rx, ry = (int(v) for v in key.split(","))
            assert skipping.load_region(rx, ry) == asked.load_region(rx, ry)
            assert skipping.load_places_in(rx, ry) == asked.load_places_in(rx, ry)
        assert skipping.load_things_in(places) == asked.load_things_in(places)
        _check_contents(skipping, places)
        _check_contents(asked, places)
        assert skipping.load_avatars_in(places) == asked.load_avatars_in(places)
        for avatar in sorted(everything.avatars):
            assert skipping.load_inventory(avatar) == asked.load_inventory(avatar)
            assert skipping.load_avatar(avatar) == asked.load_avatar(avatar)
        for thing in sorted(everything.things):
            assert skipping.load_thing(thing) == asked.load_thing(thing)


def test_a_schema_made_from_the_kept_script_is_a_migrated_one(tmp_path: Path) -> None:
    """On PostgreSQL the first fork's schema is migrated and the statements kept; the next is
    made by running them. Both have the same tables, columns, indexes, constraints, sequences
    and revision as a schema migrated by Alembic."""
    with fresh_database("postgres", tmp_path) as url:
        main = make_engine(migrated(url))
        try:
            at = {name: location_for(main, name, "t") for name in ("one", "two", "plain")}
            stores = {name: new_store(main, at[name]) for name in ("one", "two")}
            plain = make_store(main, at["plain"])
            upgrade_to_head(plain)
            for engine_ in (*stores.values(), plain):
                engine_.dispose()
            shapes = {name: schema_shape(main, location) for name, location in at.items()}
            assert shapes["one"] == shapes["plain"] and shapes["two"] == shapes["plain"]
            assert len(shapes["plain"]["columns"]) > 100 and shapes["plain"]["revision"]
        finally:
            main.dispose()


def schema_shape(main: Engine, schema: str) -> dict[str, list[tuple[str, ...]]]:
    """Schema ``schema``'s definitions as the catalog states them, its name left out."""
    queries = {
        "columns": "SELECT table_name, column_name, data_type, column_default, is_nullable "
        "FROM information_schema.columns WHERE table_schema = :s ORDER BY 1, 2",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = :s ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(c.oid) "
        "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
        "WHERE n.nspname = :s ORDER BY 1, 2",
        "sequences": "SELECT sequence_name, start_value FROM information_schema.sequences "
        "WHERE sequence_schema = :s ORDER BY 1",
        "revision": f'SELECT version_num FROM "{schema}".alembic_version',
    }
    with main.connect() as conn:
        return {
            key: [
                tuple(str(value).replace(schema, "S") for value in row)
                for row in conn.execute(text(query), {"s": schema})
            ]
            for key, query in queries.items()
        }
