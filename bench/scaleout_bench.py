"""Scale-out benchmark (not a test): one world on one PostgreSQL, served by one process and then
by two, with 8 clients stepping in 8 distant regions (#16 §3).

Prints, measured in the same run, in alternating rounds of equal length:

- persisted steps/s of two server processes over one (goal > 1.2);
- the fraction of step time the servers spent waiting for locks (goal <= 5%): the servers'
  ``bigworld_world_lock_wait_seconds_total`` (seconds blocked on a lock another transaction
  held, each transaction of a batch counted for the batch's wait) over their
  ``bigworld_step_seconds_sum``, both read from ``/metrics`` before and after each round;
  and, as a check from the database's side, the share of samples (every 10 ms, from
  ``pg_stat_activity``) of the bench database's backends inside a transaction that were
  waiting for a lock.

The avatars are moved apart the way ``server_bench.py`` grows its world: straight in the
database, between two starts of the server (the HTTP API has no way to place an avatar, and
walking there would take thousands of steps). Such a move is not in the event log, so this
world does not replay; it is made for the figures only. Everything runs on 127.0.0.1 and
stops by itself. Usage::

    .venv/bin/python bench/scaleout_bench.py [--seconds 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
from server_bench import ADMIN, Stepper, database, free_port, serve

from world.state import World
from world.store import SqlBackend, lock_world, make_engine, session_factory

CLIENTS = 8
APART = 10  # regions between two avatars: a step locks those within 2 of its own


def metric(base: str, name: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=30).text
    found = re.search(rf"^{name} ([0-9.eE+-]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def spread(url: str) -> None:
    """Put avatar i at the hub of region (i * APART, 0), generating that region and its four
    neighbours first (a task is drawn from what exists near the avatar)."""
    engine = make_engine(url)
    with session_factory(engine)() as session:
        world = World(SqlBackend(session, lock_world(session)))
        for i in range(CLIENTS):
            for dx, dy in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                world.region(i * APART + dx, dy)
        world.commit()
        session.commit()
    engine.dispose()
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        avatars = [r[0] for r in conn.execute("SELECT id FROM avatars ORDER BY id")]
        for i, avatar in enumerate(avatars):
            place = f"{i * APART},0:0"
            conn.execute("UPDATE avatars SET place = %s WHERE id = %s", (place, avatar))


class Sampler(threading.Thread):
    """Every 10 ms, the bench database's backends that are inside a transaction, and those of
    them waiting for a lock (``pg_stat_activity``): PostgreSQL's own view of the lock wait."""

    QUERY = (
        "SELECT count(*) FILTER (WHERE state IN ('active', 'idle in transaction')), "
        "count(*) FILTER (WHERE wait_event_type = 'Lock') "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.busy, self.waiting = url, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url.replace("+psycopg", ""), autocommit=True) as conn:
            while not self.stop.wait(0.01):
                busy, waiting = conn.execute(self.QUERY).fetchone() or (0, 0)
                self.busy, self.waiting = self.busy + busy, self.waiting + waiting


def round_of(
    steppers: list[Stepper], bases: list[str], seconds: float, url: str
) -> dict[str, float]:
    """Every client steps for ``seconds``; returns steps/s and the servers' lock-wait share."""
    before = {b: (metric(b, "bigworld_world_lock_wait_seconds_total"), _steps(b)) for b in bases}
    sampler = Sampler(url)
    sampler.start()
    stop = time.monotonic() + seconds
    counts = [0] * len(steppers)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            while time.monotonic() < stop:
                steppers[i].step()
                counts[i] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(steppers))]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    if errors:
        raise errors[0]
    waited = step_s = 0.0
    for b in bases:
        wait0, (sum0, _n0) = before[b]
        sum1, _n1 = _steps(b)
        waited += metric(b, "bigworld_world_lock_wait_seconds_total") - wait0
        step_s += sum1 - sum0
    return {
        "steps_s": sum(counts) / elapsed,
        "wait": waited / step_s if step_s else 0.0,
        "pg_wait": sampler.waiting / sampler.busy if sampler.busy else 0.0,
    }


def _steps(base: str) -> tuple[float, float]:
    return metric(base, "bigworld_step_seconds_sum"), metric(base, "bigworld_step_seconds_count")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of one round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each, alternating")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, database("postgres", Path(tmp)) as url:
        ports = [free_port(), free_port()]
        bases = [f"http://127.0.0.1:{p}" for p in ports]
        with serve(url, Path(tmp) / "d0", ports[0]):
            admin = httpx.Client(base_url=bases[0], headers={"Authorization": f"Bearer {ADMIN}"})
            tokens = [
                admin.post("/v1/agents", json={"name": f"far{i}", "role": "policy"}).json()["token"]
                for i in range(CLIENTS)
            ]
        spread(url)
        with ExitStack() as servers:
            for i, port in enumerate(ports):
                servers.enter_context(serve(url, Path(tmp) / f"d{i}", port))
            steppers = [Stepper(bases[0], t) for t in tokens]  # each begins its episode
            clients = {
                n: [
                    httpx.Client(base_url=bases[i % n], headers=s.http.headers, timeout=60)
                    for i, s in enumerate(steppers)
                ]
                for n in (1, 2)
            }
            results: dict[int, list[dict[str, float]]] = {1: [], 2: []}
            for _ in range(args.rounds):
                for n in (1, 2):  # the same episodes, sent to one process or spread over two
                    for stepper, client in zip(steppers, clients[n], strict=True):
                        stepper.http = client
                    results[n].append(round_of(steppers, bases[:n], args.seconds, url))
            for n, rounds in results.items():
                for r in rounds:
                    print(
                        f"{n} process(es): {r['steps_s']:.1f} steps/s, lock wait "
                        f"{r['wait']:.1%} (/metrics), {r['pg_wait']:.1%} (pg_stat_activity)"
                    )
    one_s = sum(r["steps_s"] for r in results[1]) / len(results[1])
    two_s = sum(r["steps_s"] for r in results[2]) / len(results[2])
    wait = max(r["wait"] for r in results[2])
    pg_wait = max(r["pg_wait"] for r in results[2])
    print(
        f"{CLIENTS} clients in {CLIENTS} regions {APART} apart, {args.rounds} x {args.seconds:.0f} s "
        f"each: 2 processes over 1: {two_s / one_s:.2f} (goal > 1.2); lock wait with 2 "
        f"processes {wait:.1%} of step time, worst round (goal <= 5%; pg_stat_activity: "
        f"{pg_wait:.1%} of in-transaction samples waiting for a lock)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
