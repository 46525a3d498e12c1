"""Fork benchmark (not a test): what a fork costs to make, and what a step in one costs.

Run: ``.venv/bin/python bench/fork_bench.py [--things N] [--forks K] [--steps S]``. A world of
at least N stored things is generated region by region into a SQLite file (the default: WAL,
``synchronous=FULL``), then served by ``bigworld serve`` (a real uvicorn process) over it:

- one fork at the current tick, timed from the request to the answer (which carries the
  fork's state hash, a read of the whole world), and the bytes its store adds on disk;
- ``GET /v1/world?hash=true`` of the main world in the same run, the hash's own cost;
- K forks made one after another, their total time;
- step p50 in a fork over step p50 in the parent: S steps of one agent in each, interleaved
  in rounds of 10 so both see the same machine.

The goals of the forks' issue (1,000,000 things and 100,000 events: one fork under 1 s and
1 MB, 100 under 10 s, step ratio at most 1.2) are printed beside the figures, and the figures
written to ``docs/benchmarks/forks.json`` (``--out`` elsewhere for a trial).
"""

from __future__ import annotations

import argparse
import json
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

from migrations import upgrade_to_head  # noqa: E402
from world.state import World  # noqa: E402
from world.store import (  # noqa: E402
    SqlBackend,
    ensure_world,
    lock_world,
    make_engine,
    session_factory,
)
from world.store.history import counts  # noqa: E402

HEADLINE_ORDER = 13  # the row in the README's results table (bench/results.py)


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


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*") if p.is_file())


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
    parser.add_argument("--forks", type=int, default=100, help="forks made one after another")
    parser.add_argument("--steps", type=int, default=200, help="steps timed in each world")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bigworld-forks-"))
    url = f"sqlite:///{work / 'world.db'}"
    started = time.perf_counter()
    stored = generate(url, args.things)
    print(f"world: {stored} in {time.perf_counter() - started:.0f} s", flush=True)
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
        before = disk_bytes(work / "forks") if (work / "forks").exists() else 0
        started = time.perf_counter()
        one = admin.post("/v1/worlds", json={"from": "main", "at_tick": tick, "name": "one"})
        one_s = time.perf_counter() - started
        one.raise_for_status()
        assert one.json()["state_hash"] == hashed["state_hash"]
        one_bytes = disk_bytes(work / "forks") - before
        print(f"one fork: {one_s:.2f} s, {one_bytes / 1e6:.2f} MB; hash alone {hash_s:.2f} s")

        started = time.perf_counter()
        for i in range(args.forks):
            body = {"from": "main", "at_tick": tick, "name": f"many-{i}"}
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
    finally:
        server.stop()

    figures = {
        "world": {**stored, "events": events},
        "one_fork_s": round(one_s, 3),
        "one_fork_bytes": one_bytes,
        "hash_alone_s": round(hash_s, 3),
        "forks": args.forks,
        "many_forks_s": round(many_s, 2),
        "step_p50_parent_ms": round(parent_p50 * 1e3, 2),
        "step_p50_fork_ms": round(fork_p50 * 1e3, 2),
        "step_ratio": round(ratio, 3),
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
            "label": f"Forks of a world of {stored['things']:,} things, SQLite",
            "figure": f"one in {one_s:.2f} s (the state hash alone: {hash_s:.2f} s), "
            f"{one_bytes / 1e6:.2f} MB; {args.forks} in {many_s:.0f} s; "
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
