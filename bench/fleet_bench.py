"""Rollout fleet benchmark (not a test): batched steps and many paced open episodes on one server.

Measured in one run, on SQLite and then PostgreSQL (``--only`` picks one), each server one
uvicorn process as ``bigworld serve`` runs it:

- **batch**: one policy agent holds ``--batch`` (64) open episodes and steps every one of them
  with one ``POST /v1/steps`` a round. Persisted steps/s over a no-op FastAPI endpoint's
  sequential requests/s, measured in alternating rounds (goal >= 1.0); single steps
  (``POST /v1/episodes/{id}/steps``, one client) in the same rounds, for comparison.
- **paced**: ``--clients`` (8) policy agents each hold ``--episodes`` (128) open episodes,
  1,024 in all, and step each once every ``--pace-s`` (2) seconds, for ``--minutes`` (10): each
  client sends, every ``--tick-s`` (0.25), the batch of its episodes that are due. Errors
  (goal 0), the latency of a step (its batch's) p50 and p99 (goal p99 <= 250 ms), the steps
  that kept the pace, and the server's resident memory every 10 s with its slope over the run
  once warm (the first fifth left out; goal: within noise).

An episode that ends is replaced by a new begin of the same client. ``--aged N`` first makes
the world one that has run for a long time: N rules versions, one every 2,000 ticks, as the
forge's drifts leave them. Figures go to ``--out`` (``docs/benchmarks/fleet.json``). Usage::

    .venv/bin/python bench/fleet_bench.py [--only sqlite|postgres] [--minutes 10] [--aged N]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.results import provenance  # noqa: E402
from bench.server_bench import (  # noqa: E402
    ADMIN,
    Stepper,
    database,
    free_port,
    noop_server,
    rss_mib,
    sequential,
    serve,
)
from forge.dynamics import DynamicsConfig  # noqa: E402
from world.schemas import MAX_BATCH_STEPS  # noqa: E402

HEADLINE_ORDER = 15  # the row in the README's results table (bench/results.py)


class Fleet:
    """One policy agent's open episodes, stepped in batches; an ended one is begun anew."""

    def __init__(self, url: str, token: str, episodes: int) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        )
        self.turn = 0
        self.open: dict[int, tuple[int, list[str]]] = {}  # episode -> (last index, admissible)
        for _ in range(episodes):
            self._begin()

    def _begin(self) -> None:
        reply = self.http.post("/v1/episodes", json={})
        if reply.status_code != 201:
            raise RuntimeError(f"begin failed: {reply.status_code} {reply.text[:300]}")
        body = reply.json()
        self.open[body["episode_id"]] = (0, body["admissible_actions"] or ["look"])

    def step(self, episodes: list[int]) -> tuple[float, int]:
        """One batch: a step of each of ``episodes``; returns its latency and the errors."""
        batch = []
        for episode in episodes:
            self.turn += 1
            index, admissible = self.open[episode]
            action = admissible[(self.turn * 7) % len(admissible)]
            batch.append({"episode_id": episode, "step": index + 1, "action": action})
        started = time.perf_counter()
        reply = self.http.post("/v1/steps", json=batch)
        elapsed = time.perf_counter() - started
        if reply.status_code != 200:
            raise RuntimeError(f"batch failed: {reply.status_code} {reply.text[:300]}")
        errors = 0
        for sent, answer in zip(batch, reply.json()["items"], strict=True):
            episode = sent["episode_id"]
            if answer["status"] != 200:
                errors += 1
                continue
            result = answer["result"]
            if result["done"]:
                del self.open[episode]
                self._begin()
            else:
                self.open[episode] = (sent["step"], result["admissible_actions"] or ["look"])
        return elapsed, errors

    def episodes(self) -> list[int]:
        return list(self.open)


def agent(url: str, name: str, episodes: int) -> str:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
        reply = admin.post(
            "/v1/agents", json={"name": name, "role": "policy", "max_open_episodes": episodes}
        )
    if reply.status_code != 201:
        raise RuntimeError(f"agent failed: {reply.status_code} {reply.text[:300]}")
    return str(reply.json()["token"])


def batch_rates(
    url: str, noop_url: str, size: int, rounds: int, per_round: int
) -> dict[str, float]:
    """Batched and single steps/s of this server, and the no-op endpoint's sequential
    requests/s, in alternating rounds."""
    fleet = Fleet(url, agent(url, "batcher", size), size)
    single = Stepper(url, agent(url, "single", 1))
    noop = Stepper(noop_url, "x", noop=True)
    for _ in range(3):  # warm-up
        fleet.step(fleet.episodes())
    rates: dict[str, list[float]] = {"batch": [], "single": [], "noop": []}
    errors = 0
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(per_round):
            errors += fleet.step(fleet.episodes())[1]
        rates["batch"].append(per_round * size / (time.perf_counter() - started))
        rates["single"].append(sequential(single, per_round * 4)[0])
        rates["noop"].append(sequential(noop, per_round * 4)[0])
    out = {name: statistics.median(values) for name, values in rates.items()}
    out["batch_ratio"] = out["batch"] / out["noop"]
    out["single_ratio"] = out["single"] / out["noop"]
    out["batch_errors"] = errors
    return out


@dataclass
class Paced:
    """What the paced clients saw."""

    latencies: list[tuple[float, float]] = field(default_factory=list)  # (sent at, seconds)
    errors: list[str] = field(default_factory=list)
    steps: int = 0
    late: int = 0  # batches sent later than a tick after they were due
    lock: threading.Lock = field(default_factory=threading.Lock)


def paced(
    url: str, pid: int, clients: int, episodes: int, pace_s: float, tick_s: float, minutes: float
) -> dict[str, Any]:
    fleets = [Fleet(url, agent(url, f"pacer{i}", episodes), episodes) for i in range(clients)]
    seen = Paced()
    slots = max(1, round(pace_s / tick_s))
    stop = threading.Event()
    started = time.monotonic()

    def run(fleet: Fleet, offset: float) -> None:
        due = started + offset
        turn = 0
        while not stop.is_set():
            wait = due - time.monotonic()
            if wait > 0:
                stop.wait(wait)
                if stop.is_set():
                    return
            elif -wait > tick_s:
                with seen.lock:
                    seen.late += 1
            open_now = fleet.episodes()
            mine = open_now[turn % slots :: slots]
            turn += 1
            due += tick_s
            sent = time.monotonic() - started
            try:
                elapsed, errors = fleet.step(mine)
            except Exception as exc:  # a refused batch: counted, and the client goes on
                with seen.lock:
                    seen.errors.append(repr(exc)[:300])
                continue
            with seen.lock:
                seen.latencies += [(sent, elapsed)] * len(mine)
                seen.steps += len(mine)
                if errors:
                    seen.errors.append(f"{errors} steps refused")

    threads = [
        threading.Thread(target=run, args=(fleet, i * tick_s / clients), daemon=True)
        for i, fleet in enumerate(fleets)
    ]
    for thread in threads:
        thread.start()
    rss: list[tuple[float, float]] = []
    deadline = started + minutes * 60
    while time.monotonic() < deadline:
        time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
        rss.append((time.monotonic() - started, rss_mib(pid)))
        with seen.lock:
            print(
                f"  paced {rss[-1][0]:5.0f} s: {seen.steps} steps, {len(seen.errors)} errors, "
                f"RSS {rss[-1][1]:.0f} MiB",
                flush=True,
            )
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    warm = [(t, m) for t, m in rss if t >= minutes * 60 / 5]
    slope = _slope(warm) * 60 if len(warm) >= 2 else float("nan")
    latencies = [seconds for _, seconds in seen.latencies]
    warm_latencies = [seconds for t, seconds in seen.latencies if t >= minutes * 60 / 5]
    elapsed = time.monotonic() - started
    return {
        "open_episodes": clients * episodes,
        "steps": seen.steps,
        "steps_per_s": seen.steps / elapsed,
        "pace_steps_per_s": clients * episodes / pace_s,
        "errors": len(seen.errors),
        "first_errors": seen.errors[:5],
        "late_batches": seen.late,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else None,
        "p99_ms": _p99(latencies) * 1000,
        # the first fifth left out, as for memory: the 1,024 avatars begin in one place, and
        # their first steps, in a crowd, cost the most
        "p99_warm_ms": _p99(warm_latencies) * 1000,
        "rss_mib": rss,
        "rss_warm_mib": [warm[0][1], warm[-1][1]] if warm else None,
        "rss_slope_mib_per_min": slope,
    }


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points, per unit of x."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


DRIFT_EVERY = DynamicsConfig().drift_every  # ticks between the forge's drifts, by default


def age(url: str, versions: int) -> None:
    """Make the stored world one that has run ``versions`` drifts: its rules versions one every
    :data:`DRIFT_EVERY` ticks (the spoil rate moving between three values), its clock at the
    last. A world that serves a fleet for days holds thousands of them."""
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
    else:
        import psycopg

        conn = psycopg.connect(url)
    stored = conn.execute("SELECT versions FROM world_versions WHERE id = 1").fetchone()[0]
    genesis = (json.loads(stored) if isinstance(stored, str) else stored)[0]
    aged = [genesis]
    for n in range(1, versions):
        aged.append(
            genesis
            | {"version": n + 1, "since_tick": DRIFT_EVERY * n, "cause": "drift"}
            | {"spoil_rate": [1.0, 1.1, 1.2][n % 3]}
        )
    tick = DRIFT_EVERY * max(1, versions)
    if url.startswith("sqlite"):
        conn.execute("UPDATE world_versions SET versions = ?", (json.dumps(aged),))
        conn.execute("UPDATE world_meta SET tick = ?", (tick,))
    else:
        conn.execute("UPDATE world_versions SET versions = %s::json", (json.dumps(aged),))
        conn.execute("SELECT setval('bigworld_ticks', %s)", (tick,))
    conn.commit()
    conn.close()


def measure(kind: str, args: argparse.Namespace, noop_url: str) -> dict[str, Any]:
    with database(kind, Path(tempfile.mkdtemp(prefix=f"bench-fleet-{kind}-"))) as url:
        data = Path(tempfile.mkdtemp(prefix="bench-fleet-data-"))
        if args.aged:
            with serve(url, data, free_port()):  # the server makes the store
                pass
            age(url, args.aged)
        port = free_port()
        with serve(url, data, port) as proc:
            base = f"http://127.0.0.1:{port}"
            out: dict[str, Any] = batch_rates(base, noop_url, args.batch, args.rounds, 20)
            print(
                f"{kind}: batches of {args.batch}: {out['batch']:.0f} steps/s vs no-op "
                f"{out['noop']:.0f} req/s (ratio {out['batch_ratio']:.2f}, goal >= 1.0); single "
                f"steps {out['single']:.0f}/s (ratio {out['single_ratio']:.2f})",
                flush=True,
            )
            if args.minutes > 0:
                out["paced"] = paced(
                    base, proc.pid, args.clients, args.episodes, args.pace_s, args.tick_s,
                    args.minutes,
                )  # fmt: skip
                p = out["paced"]
                print(
                    f"{kind}: {p['open_episodes']} paced episodes, {args.minutes:g} min: "
                    f"{p['steps']} steps ({p['steps_per_s']:.0f}/s of a pace of "
                    f"{p['pace_steps_per_s']:.0f}/s), {p['errors']} errors, p50 {p['p50_ms']:.0f} "
                    f"ms, p99 {p['p99_ms']:.0f} ms (goal <= 250; once warm {p['p99_warm_ms']:.0f}), "
                    "RSS slope "
                    f"{p['rss_slope_mib_per_min']:+.2f} MiB/min once warm",
                    flush=True,
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["sqlite", "postgres"], help="measure one database")
    parser.add_argument(
        "--batch", type=int, default=64, help=f"steps a batch (<= {MAX_BATCH_STEPS})"
    )
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds of the ratio")
    parser.add_argument("--clients", type=int, default=8, help="paced clients (agents)")
    parser.add_argument("--episodes", type=int, default=128, help="open episodes a paced client")
    parser.add_argument(
        "--pace-s", type=float, default=2.0, help="seconds between an episode's steps"
    )
    parser.add_argument(
        "--tick-s", type=float, default=0.25, help="seconds between a client's batches"
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="paced run (0: none)")
    parser.add_argument(
        "--aged",
        type=int,
        default=0,
        help=f"first age the world to this many rules versions (one every {DRIFT_EVERY} ticks)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "fleet.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with noop_server() as noop_url:
        for kind in [args.only] if args.only else ["sqlite", "postgres"]:
            results[kind] = measure(kind, args, noop_url)
    if "sqlite" in results and "postgres" in results:
        results["postgres_over_sqlite"] = results["postgres"]["batch"] / results["sqlite"]["batch"]
        print(
            f"postgres batches over sqlite's: {results['postgres_over_sqlite']:.2f} (goal >= 0.6)"
        )
    first = results.get("sqlite") or results[next(iter(results))]
    report = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"Rollout fleet: batches of {args.batch} steps",
            "figure": f"{first['batch']:.0f} persisted steps/s, {first['batch_ratio']:.2f}x a "
            "no-op endpoint's sequential requests",
            "page": "docs/benchmarks/fleet.md",
        },
        "args": {k: str(v) for k, v in vars(args).items()},
        **results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
