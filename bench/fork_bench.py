"""Fork benchmark (not a test): what a fork costs to make, and what a step in one costs.

Run: ``.venv/bin/python bench/fork_bench.py [--things N] [--events E] [--forks K] [--steps S]
[--database-url URL]``. A world of at least N stored things is generated region by region into
a SQLite file (the default: WAL, ``synchronous=FULL``) or an empty PostgreSQL database, eight
avatars walk it at random (in-process) until its log holds E events, and then it is served by
``bigworld serve`` (a real uvicorn process):

- one fork at the current tick without its state hash (``"hash": false``), timed from the
  request to the answer, and the bytes its store adds on disk; then one with the hash;
- ``GET /v1/world?hash=true`` of the main world in the same run, the hash's own cost;
- K forks (without the hash) made one after another, their total time;
- step p50 in a fork over step p50 in the parent: S steps of one agent in each, interleaved
  in rounds of 10 so both see the same machine;
- the same over the first 10 steps of each of 10 fresh forks (each at a tick of its own, so
  nothing of its parent is kept yet), against 10 parent steps before each; no goal.

The goals of the forks' issue (1,000,000 things and 100,000 events: one fork under 1 s and
1 MB, 100 under 10 s, step ratio at most 1.2) are printed beside the figures, and the figures
written to ``docs/benchmarks/forks.json`` (``--out`` elsewhere for a trial).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import httpx  # noqa: E402
from live import start_server  # noqa: E402
from results import provenance  # noqa: E402
from sqlalchemy import func, select, text  # noqa: E402

from migrations import upgrade_to_head  # noqa: E402
from world.engine import observe  # noqa: E402
from world.engine import step as engine_step  # noqa: E402
from world.state import World  # noqa: E402
from world.store import (  # noqa: E402
    SqlBackend,
    ensure_world,
    lock_world,
    make_engine,
    session_factory,
)
from world.store.history import counts  # noqa: E402
from world.store.models import EventRow, ForkRow  # noqa: E402

HEADLINE_ORDER = 13  # the row in the README's results table (bench/results.py)
FRESH_FORKS = 10  # forks whose first 10 steps are timed


def generate(url: str, things: int) -> dict[str, int]:
    """Regions in a square spiral from the origin, 64 a transaction, until ``things``."""
    engine = make_engine(url)
    upgrade_to_head(engine)
    factory = session_factory(engine)
    with factory() as session:
        ensure_world(session, 0)
        session.commit()
    ring, stored = 0, {"things": 0}
    while stored["things"] < things:
        with factory() as session:
            world = World(SqlBackend(session, lock_world(session)))
            for x in range(-ring, ring + 1):
                for y in range(-ring, ring + 1):
                    if max(abs(x), abs(y)) == ring:
                        world.region(x, y)
            world.commit()
            session.commit()
        with factory() as session:
            stored = counts(session=session)
        ring += 1
    engine.dispose()
    return stored


def walk(url: str, events: int, seed: int = 0) -> int:
    """Eight avatars take random admissible actions, a transaction each, until the log holds
    ``events`` events; returns how many it holds."""
    engine = make_engine(url)
    factory = session_factory(engine)
    names = [f"walker-{i}" for i in range(8)]
    with factory() as session:
        world = World(SqlBackend(session, lock_world(session)))
        for name in names:
            world.add_avatar(name, name)
        world.commit()
        session.commit()
    rng, logged, i = random.Random(seed), 0, 0
    while True:
        with factory() as session:
            logged = session.execute(select(func.count()).select_from(EventRow)).scalar_one()
        if logged >= events:
            break
        for _ in range(500):
            with factory() as session:
                world = World(SqlBackend(session, lock_world(session)))
                avatar = names[i % len(names)]
                engine_step(world, avatar, rng.choice(observe(world, avatar).admissible))
                world.commit()
                session.commit()
            i += 1
    engine.dispose()
    return logged


def store_bytes(url: str, name: str) -> int:
    """What fork ``name``'s store takes: its files (SQLite), or its schema's relations."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            location = conn.execute(
                select(ForkRow.location).where(ForkRow.name == name)
            ).scalar_one()
            if url.startswith("sqlite"):
                files = Path(location).parent.glob(Path(location).name + "*")
                return sum(p.stat().st_size for p in files if p.is_file())
            size = conn.execute(
                text(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = :schema AND c.relkind IN ('r', 'S', 'm')"
                ),
                {"schema": location},
            ).scalar_one()
    finally:
        engine.dispose()
    return int(size)


def step_p50(api: httpx.Client, prefix: str, episode: dict, steps: int) -> list[float]:
    """Seconds of ``steps`` steps of ``episode`` (its state in ``episode``), taking the first
    admissible action, beginning anew when it ends."""
    out = []
    for _ in range(steps):
        index = episode["index"] + 1
        body = {"step": index, "action": episode["actions"][0]}
        started = time.perf_counter()
        reply = api.post(f"{prefix}/episodes/{episode['id']}/steps", json=body)
        out.append(time.perf_counter() - started)
        reply.raise_for_status()
        answer = reply.json()
        episode.update(index=index, actions=answer["admissible_actions"])
        if answer["done"]:
            episode.update(begin(api, prefix))
    return out


def begin(api: httpx.Client, prefix: str) -> dict:
    reply = api.post(f"{prefix}/episodes", json={})
    reply.raise_for_status()
    body = reply.json()
    return {"id": body["episode_id"], "index": 0, "actions": body["admissible_actions"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--things", type=int, default=100_000, help="stored things, at least")
    parser.add_argument("--events", type=int, default=0, help="events in the log, at least")
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database (default: a SQLite file)"
    )
    parser.add_argument("--forks", type=int, default=100, help="forks made one after another")
    parser.add_argument("--steps", type=int, default=200, help="steps timed in each world")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bigworld-forks-"))
    url = args.database_url or f"sqlite:///{work / 'world.db'}"
    kind = "PostgreSQL" if args.database_url else "SQLite"
    started = time.perf_counter()
    stored = generate(url, args.things)
    print(f"world: {stored} in {time.perf_counter() - started:.0f} s", flush=True)
    if args.events:
        started = time.perf_counter()
        logged = walk(url, args.events)
        print(f"log: {logged} events in {time.perf_counter() - started:.0f} s", flush=True)
    server = start_server(work, database_url=url, env={"BIGWORLD_FORGE_ENABLED": "false"})
    try:
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        admin = httpx.Client(base_url=server.url, headers=headers, timeout=600)
        made = admin.post("/v1/agents", json={"name": "walker", "role": "policy"}).json()
        walker = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {made['token']}"}, timeout=60
        )
        events = admin.get("/v1/worlds").json()["items"][0]["size"]["events"]
        tick = admin.get("/v1/world").json()["tick"]

        started = time.perf_counter()
        hashed = admin.get("/v1/world", params={"hash": "true"}).json()
        hash_s = time.perf_counter() - started
        # The first fork makes the SQLite template store (once per schema version): not timed.
        admin.post("/v1/worlds", json={"from": "main", "at_tick": tick, "hash": False})
        started = time.perf_counter()
        body = {"from": "main", "at_tick": tick, "name": "one", "hash": False}
        one = admin.post("/v1/worlds", json=body)
        one_s = time.perf_counter() - started
        one.raise_for_status()
        one_bytes = store_bytes(url, "one")
        started = time.perf_counter()
        body = {"from": "main", "at_tick": tick, "name": "hashed"}
        with_hash = admin.post("/v1/worlds", json=body)
        hashed_s = time.perf_counter() - started
        with_hash.raise_for_status()
        assert with_hash.json()["state_hash"] == hashed["state_hash"]
        got = admin.get("/v1/worlds/one/world", params={"hash": "true"}).json()["state_hash"]
        assert got == hashed["state_hash"]
        print(
            f"one fork: {one_s:.2f} s, {one_bytes / 1e6:.2f} MB; with its hash {hashed_s:.2f} s; "
            f"the hash alone {hash_s:.2f} s"
        )

        started = time.perf_counter()
        for i in range(args.forks):
            body = {"from": "main", "at_tick": tick, "name": f"many-{i}", "hash": False}
            admin.post("/v1/worlds", json=body).raise_for_status()
        many_s = time.perf_counter() - started
        print(f"{args.forks} forks: {many_s:.1f} s", flush=True)

        main_episode, fork_episode = begin(walker, "/v1"), begin(walker, "/v1/worlds/one")
        parent_times: list[float] = []
        fork_times: list[float] = []
        for _ in range(args.steps // 10):
            parent_times += step_p50(walker, "/v1", main_episode, 10)
            fork_times += step_p50(walker, "/v1/worlds/one", fork_episode, 10)
        parent_p50, fork_p50 = statistics.median(parent_times), statistics.median(fork_times)
        ratio = fork_p50 / parent_p50
        print(
            f"step p50: parent {parent_p50 * 1e3:.1f} ms, fork {fork_p50 * 1e3:.1f} ms: {ratio:.2f}"
        )
        # A fork's first steps read its parent at its tick from the database (a fork that has
        # played a while finds most of it kept): fresh forks, each at a tick of its own.
        fresh_parent: list[float] = []
        fresh_times: list[float] = []
        for i in range(FRESH_FORKS):
            fresh_parent += step_p50(walker, "/v1", main_episode, 10)
            at = admin.get("/v1/world").json()["tick"]
            body = {"from": "main", "at_tick": at, "name": f"fresh-{i}", "hash": False}
            admin.post("/v1/worlds", json=body).raise_for_status()
            prefix = f"/v1/worlds/fresh-{i}"
            fresh_times += step_p50(walker, prefix, begin(walker, prefix), 10)
        fresh_ratio = statistics.median(fresh_times) / statistics.median(fresh_parent)
        print(
            f"fresh forks' first 10 steps, p50: {statistics.median(fresh_times) * 1e3:.1f} ms, "
            f"{fresh_ratio:.2f}x the parent's ({statistics.median(fresh_parent) * 1e3:.1f} ms)"
        )
    finally:
        server.stop()

    figures = {
        "world": {**stored, "events": events},
        "database": kind,
        "one_fork_s": round(one_s, 3),
        "one_fork_bytes": one_bytes,
        "one_fork_with_hash_s": round(hashed_s, 3),
        "hash_alone_s": round(hash_s, 3),
        "forks": args.forks,
        "many_forks_s": round(many_s, 2),
        "step_p50_parent_ms": round(parent_p50 * 1e3, 2),
        "step_p50_fork_ms": round(fork_p50 * 1e3, 2),
        "step_ratio": round(ratio, 3),
        "fresh_forks": FRESH_FORKS,
        "fresh_step_p50_parent_ms": round(statistics.median(fresh_parent) * 1e3, 2),
        "fresh_step_p50_fork_ms": round(statistics.median(fresh_times) * 1e3, 2),
        "fresh_step_ratio": round(fresh_ratio, 3),
    }
    goals = {
        "one fork under 1 s": one_s < 1.0,
        "one fork under 1 MB": one_bytes < 1_000_000,
        f"{args.forks} forks under 10 s": many_s < 10.0,
        "fork step p50 at most 1.2x the parent's": ratio <= 1.2,
    }
    for goal, met in goals.items():
        print(f"{goal}: {'PASS' if met else 'FAIL'}")
    report = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"Forks of a world of {stored['things']:,} things and {events:,} events, "
            f"{kind}",
            "figure": f"one in {one_s:.2f} s, {one_bytes / 1e6:.2f} MB (with its state hash: "
            f"{hashed_s:.2f} s); {args.forks} in {many_s:.1f} s; "
            f"step p50 {ratio:.2f}x the parent's",
            "page": "docs/benchmarks/forks.md",
        },
        "figures": figures,
        "goals": goals,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "forks.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
