"""Server benchmark (not a test): persisted steps against a no-op endpoint, on SQLite and PostgreSQL.

Prints, all measured in the same run under the same uvicorn settings (one process, log level
warning, HTTP keep-alive clients):

- sequential persisted steps/s and its ratio to a no-op FastAPI endpoint's requests/s (goal >= 0.5);
- the same with 16 concurrent clients (goal >= 0.4), and its step latency p50 and p99
  (goal: p99 <= 10x p50);
- step p50 latency with 1,000,000 stored things over the same with 1,000 (goal <= 1.2);
- the server's resident memory at both sizes;
- the commit floor: one durable commit of one small row, by itself, on the same database and
  disk (the server's pragmas, no server), and the sequential ratio a step would reach if it
  cost nothing but that commit on top of a no-op request: the most the goal's ratio can be
  on this machine while every step is fsynced before it is answered.

The big world is made by bulk-inserting rows (regions, places, things far from the origin)
straight into the database, not by stepping. Usage::

    .venv/bin/python bench/server_bench.py [--things 1000000] [--steps 300] [--only sqlite|postgres]
        [--family go_to]

Episodes begin with the forge's draw, or with ``--family``'s tasks; a client that ends one begins
the next, and its begins count in the steps/s (not in the step latencies).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from world.store import make_engine  # noqa: E402

ADMIN = secrets.token_urlsafe(32)  # the server refuses admin tokens under 128 bits
CLIENTS = 16
SQLITE_SYNCHRONOUS = ["FULL"]  # the server's default; --sqlite-synchronous NORMAL to compare
FAMILY: list[str | None] = [None]  # the family episodes begin with (--family); None: the draw's
PG_ADMIN = os.environ.get("BIGWORLD_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
NOOP_APP = """
from fastapi import FastAPI
from pydantic import BaseModel

class StepIn(BaseModel):
    step: int
    action: str

app = FastAPI()

@app.post("/noop/{episode_id}/steps")
def noop(episode_id: int, body: StepIn) -> dict:
    return {"step": body.step, "observation": "", "admissible_actions": [], "done": False,
            "success": False, "outcome": None, "tick": 0}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(
    cmd: list[str], port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server in its own process group until it answers /healthz or /docs; stop it after."""
    log = open(Path(tempfile.gettempdir()) / f"bigworld-bench-{port}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(1200):
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"{cmd[:4]} did not start")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- load generators -------------------------------------------------------------------------
class Stepper:
    """One client stepping one episode, with the last answer's admissible actions."""

    def __init__(self, url: str, token: str, noop: bool = False) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        self.noop = noop
        self.episode, self.index, self.admissible = 0, 0, ["look"]
        self.turn = 0
        if not noop:
            self._begin()

    def _begin(self) -> None:
        reply = self.http.post("/v1/episodes", json={"family": FAMILY[0]} if FAMILY[0] else {})
        if reply.status_code != 201:
            raise RuntimeError(f"begin failed: {reply.status_code} {reply.text[:300]}")
        body = reply.json()
        self.episode, self.index, self.admissible = (
            body["episode_id"],
            0,
            body["admissible_actions"],
        )

    def step(self) -> float:
        """One request; returns its latency in seconds."""
        self.turn += 1
        action = self.admissible[(self.turn * 7) % len(self.admissible)]
        path = "/noop/1/steps" if self.noop else f"/v1/episodes/{self.episode}/steps"
        started = time.perf_counter()
        reply = self.http.post(path, json={"step": self.index + 1, "action": action})
        elapsed = time.perf_counter() - started
        if reply.status_code != 200:
            raise RuntimeError(f"step failed: {reply.status_code} {reply.text[:200]}")
        body = reply.json()
        self.index += 1
        if not self.noop:
            self.admissible = body["admissible_actions"] or ["look"]
            if body["done"]:
                self._begin()
        return elapsed


def sequential(stepper: Stepper, n: int) -> tuple[float, list[float]]:
    for _ in range(10):  # warm-up
        stepper.step()
    started = time.perf_counter()
    latencies = [stepper.step() for _ in range(n)]
    return n / (time.perf_counter() - started), latencies


def concurrent(steppers: list[Stepper], per_client: int) -> tuple[float, list[float]]:
    """Requests/s of all clients stepping at once, and each request's latency in seconds."""
    barrier = threading.Barrier(len(steppers) + 1)
    errors: list[BaseException] = []
    latencies: list[float] = []

    def run(s: Stepper) -> None:
        barrier.wait()
        try:
            for _ in range(per_client):
                latencies.append(s.step())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in steppers]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return len(steppers) * per_client / (time.perf_counter() - started), latencies


class CommitFloor:
    """One connection to a fresh database of ``kind`` with the server's pragmas, timing
    durable commits of one small row each (``BEGIN IMMEDIATE`` on SQLite, as the server's)."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind = kind
        self.engine = make_engine(url, sqlite_synchronous=SQLITE_SYNCHRONOUS[0], pool_size=1)
        self.raw = self.engine.raw_connection()
        self.mark = "?" if kind == "sqlite" else "%s"
        self.rows = 0
        cursor = self.raw.cursor()
        cursor.execute("CREATE TABLE bench_floor (id INTEGER PRIMARY KEY, body TEXT)")
        self.raw.commit()

    def seconds(self, n: int) -> float:
        """Mean seconds per commit over ``n`` commits."""
        cursor = self.raw.cursor()
        insert = f"INSERT INTO bench_floor (id, body) VALUES ({self.mark}, {self.mark})"
        started = time.perf_counter()
        for _ in range(n):
            self.rows += 1
            if self.kind == "sqlite":  # the driver begins none itself (make_engine)
                cursor.execute("BEGIN IMMEDIATE")
            cursor.execute(insert, (self.rows, "x" * 200))
            self.raw.commit()
        return (time.perf_counter() - started) / n

    def close(self) -> None:
        self.raw.close()
        self.engine.dispose()


# -- databases -------------------------------------------------------------------------------
@contextmanager
def database(kind: str, tmp: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'bench.db'}"
        return
    import psycopg

    name = f"bigworld_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def grow(url: str, total: int) -> None:
    """Bulk-insert regions, places and things far from the origin until ``total`` things are
    stored (160 things in 16 places per synthetic region, like a generated one)."""
    per_place, places_per_region = 10, 16
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        execute = conn.execute
        many = conn.executemany

        def fetch(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])
    else:
        import psycopg

        conn = psycopg.connect(url)
        cur = conn.cursor()
        execute, many = cur.execute, cur.executemany

        def fetch(sql: str) -> int:
            cur.execute(sql)
            return int(cur.fetchone()[0])

    have = fetch("SELECT count(*) FROM things")
    next_id = fetch("SELECT next_thing_id FROM world_meta WHERE id = 1")
    need = total - have
    regions, places, things = [], [], []
    region = fetch("SELECT count(*) FROM regions WHERE rx >= 100000")
    while need > 0:
        rx, ry = 100_000 + region, 100_000
        regions.append((rx, ry, "forest", places_per_region, 0))
        for p in range(places_per_region):
            pid = f"{rx},{ry}:{p}"
            places.append((pid, rx, ry, "clearing", f"clearing {p + 1}", "{}", True, "{}"))
            for _ in range(min(per_place, need)):
                things.append(
                    (
                        next_id,
                        "stone",
                        "object",
                        next_id,
                        pid,
                        None,
                        None,
                        json.dumps({"clean": True, "quantity": 1, "temp": "room"}),
                        0,
                    )
                )
                next_id += 1
                need -= 1
        region += 1
    p = "?" if url.startswith("sqlite") else "%s"
    many(
        f"INSERT INTO regions (rx, ry, kind, n_places, generated_tick) VALUES ({p},{p},{p},{p},{p})",
        regions,
    )
    many(
        f"INSERT INTO places (id, rx, ry, kind, name, exits, outdoor, attrs) VALUES ({','.join([p] * 8)})",
        places,
    )
    sql = f"INSERT INTO things (id, type, kind, num, place, container, holder, attrs, tick) VALUES ({','.join([p] * 9)})"
    for start in range(0, len(things), 50_000):
        many(sql, things[start : start + 50_000])
    execute(f"UPDATE world_meta SET next_thing_id = {next_id} WHERE id = 1")
    conn.commit()
    if not url.startswith("sqlite"):
        execute("ANALYZE")
        conn.commit()
    conn.close()


# -- the run ---------------------------------------------------------------------------------
def serve(url: str, data: Path, port: int) -> Any:
    cmd = [
        sys.executable,
        "-m",
        "server.cli",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(data),
        "--database-url",
        url,
        "--log-level",
        "warning",
        "--step-budget",
        "100000",
        "--rate-limit",
        "1000000",
    ]
    env = {"BIGWORLD_SQLITE_SYNCHRONOUS": SQLITE_SYNCHRONOUS[0], "BIGWORLD_ADMIN_TOKEN": ADMIN}
    return process(cmd, port, env=env)


@contextmanager
def world(kind: str, tmp: Path, things: int) -> Iterator[tuple[str, list[str], Any]]:
    """A running server over a fresh database of ``things`` stored things, with CLIENTS
    policy agents; yields (base URL, their tokens, the server process)."""
    with database(kind, tmp) as url:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with serve(url, tmp / "data", port):
            admin = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"})
            tokens = [
                admin.post("/v1/agents", json={"name": f"b{i}", "role": "policy"}).json()["token"]
                for i in range(CLIENTS)
            ]
        grow(url, things)
        with serve(url, tmp / "data", port) as proc:
            yield base, tokens, proc


def measure(kind: str, things: int, steps: int, noop_url: str) -> dict[str, float]:
    """Both worlds run side by side and are measured in alternating rounds, next to rounds
    of the no-op endpoint, so that load from elsewhere on the machine hits all alike."""
    out: dict[str, float] = {}
    noop = [Stepper(noop_url, "x", noop=True) for _ in range(CLIENTS)]
    started = time.perf_counter()
    floor_dir = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-floor-"))
    with (
        database(kind, floor_dir) as floor_url,
        contextlib.closing(CommitFloor(kind, floor_url)) as floor,
        world(kind, Path(tempfile.mkdtemp(prefix=f"bench-{kind}-big-")), things) as (
            big_url,
            big_tokens,
            big,
        ),
    ):
        out["grow_s"] = time.perf_counter() - started
        with world(kind, Path(tempfile.mkdtemp(prefix=f"bench-{kind}-")), 1000) as (
            url,
            tokens,
            small,
        ):
            steppers = [Stepper(url, t) for t in tokens]
            big_steppers = [Stepper(big_url, t) for t in big_tokens]
            rounds = 6
            small_lat: list[float] = []
            big_lat: list[float] = []
            conc_lat: list[float] = []
            floor_s: list[float] = []
            rates: dict[str, list[float]] = {
                "seq": [],
                "noop_seq": [],
                "conc": [],
                "noop_conc": [],
                "big_conc": [],
            }
            for _ in range(rounds):
                rate, lat = sequential(steppers[0], steps // rounds)
                rates["seq"].append(rate)
                small_lat += lat
                big_lat += sequential(big_steppers[0], steps // rounds)[1]
                rates["noop_seq"].append(sequential(noop[0], steps // rounds)[0])
                floor_s.append(floor.seconds(steps // rounds))
                rate, lat = concurrent(steppers, max(4, steps // rounds // 8))
                rates["conc"].append(rate)
                conc_lat += lat
                rates["noop_conc"].append(concurrent(noop, max(4, steps // rounds // 8))[0])
                # The big world gets the same load, so both worlds evolve alike (same crowds).
                rates["big_conc"].append(concurrent(big_steppers, max(4, steps // rounds // 8))[0])
            out["rss_1k_mib"], out["rss_big_mib"] = rss_mib(small.pid), rss_mib(big.pid)
    for name, values in rates.items():
        out[name] = statistics.median(values)
    out["p50_1k_ms"] = statistics.median(small_lat) * 1000
    out["p50_big_ms"] = statistics.median(big_lat) * 1000
    out["conc_p50_ms"] = statistics.median(conc_lat) * 1000
    out["conc_p99_ms"] = statistics.quantiles(conc_lat, n=100)[98] * 1000
    out["seq_ratio"] = out["seq"] / out["noop_seq"]
    out["floor_ms"] = statistics.median(floor_s) * 1000
    noop_s = 1 / out["noop_seq"]
    out["floor_ratio"] = noop_s / (noop_s + out["floor_ms"] / 1000)
    out["conc_ratio"] = out["conc"] / out["noop_conc"]
    out["p50_ratio"] = out["p50_big_ms"] / out["p50_1k_ms"]
    return out


@contextmanager
def noop_server() -> Iterator[str]:
    app_dir = Path(tempfile.mkdtemp(prefix="bench-noop-"))
    (app_dir / "noop_app.py").write_text(NOOP_APP)
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(app_dir),
        "noop_app:app",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with process(cmd, port):
        yield f"http://127.0.0.1:{port}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--things", type=int, default=1_000_000, help="stored things in the big world"
    )
    parser.add_argument("--steps", type=int, default=300, help="sequential steps per measurement")
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="measure one database")
    parser.add_argument(
        "--sqlite-synchronous",
        choices=["FULL", "NORMAL"],
        default="FULL",
        help="SQLite durability: FULL fsyncs every commit (the default), NORMAL in WAL "
        "survives a process kill but not a power cut",
    )
    parser.add_argument(
        "--family",
        help="begin every episode with this task family (go_to's are the demo's curriculum "
        "rung: two-step episodes, so begins weigh as much as steps); default: the forge's draw",
    )
    args = parser.parse_args(argv)
    SQLITE_SYNCHRONOUS[0] = args.sqlite_synchronous
    FAMILY[0] = args.family
    with noop_server() as noop_url:
        for kind in [args.only] if args.only else ["sqlite", "postgres"]:
            try:
                r = measure(kind, args.things, args.steps, noop_url)
            except Exception as exc:  # e.g. PostgreSQL unreachable: report and go on
                print(f"{kind}: not measured ({exc!r})")
                continue
            label = f"sqlite (synchronous={args.sqlite_synchronous})" if kind == "sqlite" else kind
            print(
                f"{label}: sequential {r['seq']:.0f} steps/s vs no-op {r['noop_seq']:.0f} req/s "
                f"(ratio {r['seq_ratio']:.2f}, goal >= 0.5); {CLIENTS} clients {r['conc']:.0f} steps/s vs "
                f"no-op {r['noop_conc']:.0f} req/s (ratio {r['conc_ratio']:.2f}, goal >= 0.4), "
                f"step p50 {r['conc_p50_ms']:.1f} ms, p99 {r['conc_p99_ms']:.1f} ms "
                f"({r['conc_p99_ms'] / r['conc_p50_ms']:.1f}x, goal <= 10x); "
                f"step p50 {r['p50_1k_ms']:.2f} ms at 1,000 things, {r['p50_big_ms']:.2f} ms at "
                f"{args.things:,} (ratio {r['p50_ratio']:.2f}, goal <= 1.2); server RSS "
                f"{r['rss_1k_mib']:.0f} MiB / {r['rss_big_mib']:.0f} MiB; big world built in {r['grow_s']:.0f} s; "
                f"commit floor {r['floor_ms']:.2f} ms (a step costing only that over a no-op "
                f"request: sequential ratio {r['floor_ratio']:.2f})",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
