"""History benchmark (not a test): does what the server does per request grow with its past?

A world that never resets keeps every episode, step and judgment. Work that reads all of them
on each request gets slower for as long as the world lives: the soak saw step latency rise as
the database grew. This benchmark runs two servers side by side on SQLite (or PostgreSQL), each
given a synthetic past bulk-inserted straight into the database: ended episodes of three
steps, each step judged once, spread over the pool's tasks, and a forge decision per 10
episodes; ``--past`` of them on one, a twentieth as many on the other (enough to fill every
window the forge reads, so both do the same work when nothing depends on the past's length). It then measures, in alternating rounds so that load from elsewhere
on the machine hits both alike:

- a step (``POST /v1/episodes/{id}/steps``) and a begin (abandon, then ``POST /v1/episodes``,
  which draws from the pool);
- the judge's and the trainer's poll, ``GET /v1/episodes?needs_votes=1``;
- a forge cycle (``POST /v1/forge/cycle``, admin), which reads the pool's recent rollouts.

It prints each one's median latency on both servers and the ratio, long past over short (goal:
at most 1.2 for each). Usage::

    .venv/bin/python bench/history_bench.py [--past 50000] [--rounds 5] [--only sqlite|postgres]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_bench import ADMIN, Stepper, database, free_port, serve  # noqa: E402

STEPS = 3  # per synthetic episode
PER_ROUND = 20  # requests of each kind per round


@contextmanager
def world(kind: str, past: int) -> Iterator[tuple[httpx.Client, Stepper]]:
    """A running server with ``past`` synthetic ended episodes; yields an admin client and a
    policy agent's stepper (whose episode stays open: the bench's step budget is large)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-history-{kind}-"))
    with database(kind, tmp) as url:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with serve(url, tmp / "data", port):
            admin = httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120
            )
            token = admin.post("/v1/agents", json={"name": "p", "role": "policy"}).json()["token"]
            judge = admin.post("/v1/agents", json={"name": "j", "role": "reward"}).json()
            first = Stepper(base, token)  # the first begin fills the pool
            checked(first.http.post(f"/v1/episodes/{first.episode}/abandon"))
            admin.post("/v1/forge/cycle").raise_for_status()
        if past:
            grow(url, past, int(judge["id"]))
        with serve(url, tmp / "data", port):
            yield admin, Stepper(base, token)


def grow(url: str, past: int, judge_id: int) -> None:
    """Bulk-insert ``past`` ended, judged episodes of the pool's tasks, with their steps and
    judgments, and forge decisions, as a long-lived world would hold them."""
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
        cur, p = conn.cursor(), "?"
    else:
        import psycopg

        conn = psycopg.connect(url)
        cur, p = conn.cursor(), "%s"
    cur.execute("SELECT id, family FROM tasks ORDER BY id")
    tasks = cur.fetchall()
    cur.execute("SELECT id, avatar_id FROM agents WHERE role = 'policy'")
    agent, avatar = cur.fetchone()
    cur.execute("SELECT coalesce(max(id), 0) FROM episodes")
    first = int(cur.fetchone()[0]) + 1
    cur.execute("SELECT * FROM episodes LIMIT 0")
    keeps_votes = "min_votes" in [d[0] for d in cur.description]
    episodes, steps, judgments, decisions = [], [], [], []
    for n in range(past):
        eid, (task, family) = first + n, tasks[n % len(tasks)]
        status = "succeeded" if n % 3 == 0 else "failed"
        row = [eid, agent, avatar, task, family, status, 1 if n % 3 == 0 else -1, 8, STEPS,
               n, n + STEPS, "You are somewhere.", "[]", 0.0, 3]  # fmt: skip
        episodes.append(row + [1] if keeps_votes else row)
        for s in range(1, STEPS + 1):
            steps.append((eid, s, "look", "You see things.", "[]", n + s, s == STEPS,
                          status == "succeeded" and s == STEPS, None, "v1", "prompt " * 40,
                          "look", False, "rank", 1.0, None, 3 - s))  # fmt: skip
            judgments.append((eid, s, judge_id, 0, 1, "fine", "r1", "rank", 1.0, None, 0.0))
        if n % 10 == 0:
            kind = ("task.harder", "task.easier", "task.kept")[n % 3]
            decisions.append((n // 10, n, kind, task, None, "proposed", "{}", 0.0))
    episode_columns = (
        "id, agent_id, avatar_id, task_id, family, status, outcome, budget, last_step, "
        "begin_tick, end_tick, observation, admissible, updated_at, distance"
        + (", min_votes" if keeps_votes else "")
    )
    inserts = [
        (f"INSERT INTO episodes ({episode_columns})", episodes),
        (
            "INSERT INTO steps (episode_id, step, action, observation, admissible, tick, done, "
            "success, outcome, policy_version, prompt, completion, parse_failed, mode, "
            "temperature, completion_ids, distance)",
            steps,
        ),
        (
            "INSERT INTO judgments (episode_id, step, agent_id, vote, score, rationale, "
            "model_version, mode, temperature, completion_ids, created_at)",
            judgments,
        ),
        (
            "INSERT INTO forge_decisions (cycle, tick, kind, task_id, candidate_id, verdict, "
            "evidence, created_at)",
            decisions,
        ),
    ]
    for sql, rows in inserts:
        values = f" VALUES ({','.join([p] * len(rows[0]))})"
        for start in range(0, len(rows), 50_000):
            cur.executemany(sql + values, rows[start : start + 50_000])
    if not url.startswith("sqlite"):
        cur.execute(f"SELECT setval(pg_get_serial_sequence('episodes', 'id'), {first + past})")
    conn.commit()
    if not url.startswith("sqlite"):
        conn.autocommit = True
        cur.execute("ANALYZE")
    conn.close()


def timed(
    probe: Callable[[httpx.Client, Stepper], Any], admin: httpx.Client, stepper: Stepper
) -> float:
    started = time.perf_counter()
    probe(admin, stepper)
    return time.perf_counter() - started


def checked(reply: httpx.Response) -> httpx.Response:
    if reply.status_code >= 400:
        raise RuntimeError(
            f"{reply.request.method} {reply.request.url}: {reply.status_code} {reply.text[:300]}"
        )
    return reply


def rebegin(stepper: Stepper) -> None:
    checked(stepper.http.post(f"/v1/episodes/{stepper.episode}/abandon"))
    stepper._begin()


def measure(kind: str, past: int, rounds: int) -> dict[str, dict[str, float]]:
    probes: dict[str, Callable[[httpx.Client, Stepper], Any]] = {
        "step": lambda admin, stepper: stepper.step(),
        "begin": lambda admin, stepper: rebegin(stepper),
        "vote poll": lambda admin, stepper: checked(
            stepper.http.get("/v1/episodes", params={"needs_votes": 1, "limit": 100})
        ),
        "forge cycle": lambda admin, stepper: checked(admin.post("/v1/forge/cycle")),
    }
    times: dict[str, dict[str, list[float]]] = {n: {"short": [], "long": []} for n in probes}
    with world(kind, past) as long, world(kind, past // 20) as short:
        for _ in range(rounds):
            for name, probe in probes.items():
                for label, (admin, stepper) in (("short", short), ("long", long)):
                    times[name][label] += [timed(probe, admin, stepper) for _ in range(PER_ROUND)]
    return {
        name: {label: statistics.median(values) * 1000 for label, values in by.items()}
        for name, by in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--past", type=int, default=40_000, help="the long past's episodes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args(argv)
    kinds = [args.only] if args.only else ["sqlite", "postgres"]
    worst = 0.0
    for kind in kinds:
        figures = measure(kind, args.past, args.rounds)
        print(f"{kind}: {args.past // 20:,} (short) and {args.past:,} (long) past episodes")
        print(f"  {'request':<12} {'short ms':>9} {'long ms':>9} {'long/short':>11}")
        for name, f in figures.items():
            ratio = f["long"] / f["short"]
            worst = max(worst, ratio)
            print(f"  {name:<12} {f['short']:9.2f} {f['long']:9.2f} {ratio:11.2f}")
    print(json.dumps({"worst_ratio": round(worst, 2), "goal": 1.2}))
    return 0 if worst <= 1.2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
