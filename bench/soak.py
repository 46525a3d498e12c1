"""Soak (not a test): the demo's processes for an hour against one server; does anything grow?

Starts what ``bigworld demo`` starts, with its code (``agents.demo``): the world server on a
SQLite file (WAL) in a fresh temporary data folder, on 127.0.0.1 only, two policy agents, the
reward agent and the trainer, each a child process in its own process group with one thread
for torch; the policy agents step at a steady pace (``--step-interval``), so that the load
stays the same while they learn. A probe thread in this process plays a dedicated policy agent
(``soak-probe``, random admissible actions, a step every ``PROBE_EVERY_S``) through the REST
API and times each ``POST /v1/episodes/{id}/steps``: the step latency as an agent sees it,
under the demo's load (the server keeps no timings of its own). Its episodes are the world's
like any agent's; the trainer leaves them out, as they carry no prompts.

Every ``--interval`` seconds it samples, from ``/proc`` (Linux; psutil is in the venv only as
another package's dependency, and ``/proc`` holds all that is needed), each process's resident
memory, open file descriptors and threads, the database's size (file and WAL) and the probe's
step latency over the window (p50, p95) and the server's time by route (``/metrics``), and prints
a row. At the end it fits the samples after the warm-up and judges them against the goals:

- resident memory: the slope of its floor (the lowest sample of each 5 minutes) at most
  ``RSS_SLOPE_MIB`` MiB per 10 minutes, or not told from no growth (its 95% interval reaches
  zero; ``soak_figures``), each process;
- file descriptors and threads: no growth (the fewest in the second half of the samples after
  the warm-up not above the fewest in the first half), each process;
- step latency: p50 flat (its fitted rise over the samples after the warm-up at most
  ``P50_RISE`` of its median, or ``P50_RISE_MS``);
- nothing left running after the stop (no process in any of the children's groups, the
  server's port closed).

It stops everything it started at the end, on Ctrl-C / SIGTERM and on errors, and writes
``soak.json`` (the samples, fits and verdict, with the headline of the README's results table)
and ``soak.png`` into ``--out``, by default ``docs/benchmarks`` beside the soak's page::

    .venv/bin/python bench/soak.py --minutes 60                                # the goal's run
    .venv/bin/python bench/soak.py --minutes 3 --interval 10 --out /tmp/soak   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from results import provenance  # noqa: E402
from soak_figures import Sample, cpu, header, judge, plot, routes, row, summary  # noqa: E402
from world_bench import quantile  # noqa: E402

from agents.client import BigWorldClient  # noqa: E402
from agents.demo import (  # noqa: E402
    Child,
    Layout,
    admin_token,
    agent_children,
    build_models,
    configure_forge,
    credentials,
    free_port,
    server_child,
    stop_all,
    wait_ready,
)
from agents.errors import ClientError, ConflictError  # noqa: E402

POLICIES = 2  # the demo's default
PROBE_EVERY_S = 0.5  # the probe's pace: about 60 timed steps per 30-s window
# The policy agents' pace (--step-interval): at full speed they stepped faster as they learned
# (14 -> 17 steps/s in an hour), and the trainer listed and published more often, so the
# writer went from 59% to 71% busy and the probe's p50 followed the load, not the world's age.
STEP_INTERVAL_S = 0.25
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc's unit of CPU time
HEADLINE_ORDER = 11  # the soak's row in the README's results table (bench/results.py)


# --- what is sampled -------------------------------------------------------------------------


def fd_kind(target: str) -> str:
    """What an open descriptor is, from its ``/proc/PID/fd`` link: ``socket``, ``pipe``, the
    anonymous inode's name, or for a file the database part it is (``db``, ``wal``, ``shm``)
    or ``file``."""
    if target.startswith(("socket:", "pipe:")):
        return target.split(":", 1)[0]
    if target.startswith("anon_inode:"):
        return target.removeprefix("anon_inode:").strip("[]")
    for suffix, kind in (("-wal", "wal"), ("-shm", "shm"), ("-journal", "journal"), (".db", "db")):
        if target.endswith(suffix):
            return kind
    return "file"


def read_process(pid: int) -> dict[str, Any] | None:
    """Resident memory (MiB), open file descriptors (with a count by kind, ``fd_kind``),
    threads and CPU seconds so far (user + system) of ``pid``; None once gone."""
    kinds: dict[str, int] = {}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed between the listing and the link
                kind = fd_kind(os.readlink(f"/proc/{pid}/fd/{fd}"))
                kinds[kind] = kinds.get(kind, 0) + 1
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields["State"].strip().startswith("Z"):  # exited, not yet reaped
        return None
    rss_kib = int(fields["VmRSS"].split()[0])
    return {
        "rss_mib": rss_kib / 1024,
        "fds": sum(kinds.values()),
        "fd_kinds": kinds,
        "threads": int(fields["Threads"]),
        # after the name: state is field 3, utime and stime are fields 14 and 15 (clock ticks)
        "cpu_s": sum(map(int, stat[stat.rindex(")") + 2 :].split()[11:13])) / CLOCK_TICKS,
    }


def file_mib(path: Path) -> float:
    return path.stat().st_size / 2**20 if path.exists() else 0.0


def in_group(pgid: int) -> list[str]:
    """The processes of process group ``pgid``, as ``"pid name"``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            if int(rest.split()[2]) == pgid:  # after the name: state, ppid, pgrp
                found.append(f"{entry.name} {name}")
    return found


class Probe:
    """A policy agent that steps with random admissible actions and times each step."""

    def __init__(self, url: str, token: str, seed: int) -> None:
        self.client = BigWorldClient(url, token)
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latencies: list[float] = []  # seconds, since the last take()
        self.errors = 0
        self.thread = threading.Thread(target=self._run, name="soak-probe", daemon=True)

    def take(self) -> tuple[list[float], int]:
        """The step latencies (s) and errors since the last call."""
        with self.lock:
            taken, errors = self.latencies, self.errors
            self.latencies, self.errors = [], 0
        return taken, errors

    def _run(self) -> None:
        episode: int | str | None = None  # None or no actions: begin an episode
        index, actions = 0, tuple[str, ...]()
        while not self.stop.wait(PROBE_EVERY_S):
            try:
                if episode is None or not actions:
                    start = self.client.begin_episode()
                    episode, index, actions = start.episode_id, 0, start.admissible_actions
                index += 1
                sent = time.perf_counter()
                result = self.client.step(episode, index, self.rng.choice(actions))
                took = time.perf_counter() - sent
                with self.lock:
                    self.latencies.append(took)
                episode = None if result.done else episode
                actions = result.admissible_actions
            except ClientError as exc:  # counted; a 409 may name an episode left open
                details = exc.details if isinstance(exc, ConflictError) else None
                left_open = details.get("episode_id") if isinstance(details, dict) else None
                if left_open is not None:
                    with contextlib.suppress(ClientError):
                        self.client.abandon(left_open)
                episode = None
                with self.lock:
                    self.errors += 1
        if episode is not None:
            with contextlib.suppress(ClientError):
                self.client.abandon(episode)
        self.client.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30.0)


def sample(
    t: float,
    children: list[Child],
    layout: Layout,
    probe: Probe,
    observer: BigWorldClient,
    url: str,
) -> Sample:
    # /proc first: the sampler's own requests below would otherwise count as the server's
    # descriptors (a connection it has not yet seen closed) and threads
    processes = {c.name: read_process(c.process.pid) if c.process else None for c in children}
    latencies, errors = probe.take()
    tick = None
    with contextlib.suppress(ClientError):
        tick = int(observer.world()["tick"])
    routes: dict[str, list[float]] = {}
    with contextlib.suppress(httpx.HTTPError):
        routes = request_seconds(httpx.get(f"{url}/metrics", timeout=30).text)
    return {
        "t_s": round(t, 1),
        "tick": tick,
        "processes": processes,
        "db_mib": file_mib(layout.data_dir / "world.db"),
        "wal_mib": file_mib(layout.data_dir / "world.db-wal"),
        "steps": len(latencies),
        "probe_errors": errors,
        "p50_ms": quantile(latencies, 0.5) * 1e3 if latencies else None,
        "p95_ms": quantile(latencies, 0.95) * 1e3 if latencies else None,
        "routes": routes,
    }


WRITER = {  # the writer's own time, shown beside the routes: what its transactions wait for
    "writer: running, per transaction": (
        "bigworld_world_work_seconds_total",
        "bigworld_world_transactions_total",
    ),
    "writer: COMMIT, per commit": (
        "bigworld_world_commit_seconds_total",
        "bigworld_world_commits_total",
    ),
}


def request_seconds(text: str) -> dict[str, list[float]]:
    """The server's ``bigworld_request_seconds`` from /metrics: ``"METHOD route"`` ->
    [seconds, requests], both counted since the server started; and the writer's
    [seconds, transactions] running them and [seconds, commits] committing (``WRITER``)."""
    found: dict[str, list[float]] = {}
    counters: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("bigworld_world_"):
            name, _, value = line.partition(" ")
            counters[name] = float(value)
        if not line.startswith("bigworld_request_seconds_"):
            continue
        name, _, value = line.rpartition(" ")
        part, _, labels = name.removeprefix("bigworld_request_seconds_").partition("{")
        method = labels.split('method="', 1)[1].split('"', 1)[0]
        route = labels.split('route="', 1)[1].rsplit('"', 1)[0]
        found.setdefault(f"{method} {route}", [0.0, 0.0])[part == "count"] = float(value)
    for shown, (seconds, count) in WRITER.items():
        if seconds in counters and count in counters:
            found[shown] = [counters[seconds], counters[count]]
    return found


# --- the run ---------------------------------------------------------------------------------


def leftovers(children: list[Child], port: int) -> list[str]:
    """What still runs of what the soak started: processes in the children's groups (each
    child leads its own; any found are then SIGKILLed), and the server's port if it still
    accepts connections."""
    found = []
    for child in children:
        pgid = child.process.pid if child.process else None
        group = in_group(pgid) if pgid is not None else []
        if pgid is not None and group:
            found += [f"{p} (group of {child.name}, killed)" for p in group]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    with socket.socket() as sock:
        sock.settimeout(1.0)
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            found.append(f"port {port} still accepts connections")
    return found


def soak(args: argparse.Namespace, data: Path) -> tuple[list[Sample], list[str], list[str]]:
    """Run the processes, sample them until the time is up, a process dies or a signal comes;
    stop them. Returns the samples, what was left running, and the processes that died."""
    stop = threading.Event()
    before = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    layout = Layout(data)
    layout.home.mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging  # imported by build_models anyway

    hf_logging.disable_progress_bar()  # its bars would break the table
    build_models(layout)
    port = free_port(0)
    url = f"http://127.0.0.1:{port}"
    server = server_child(layout, port, args.seed)
    server.env["BIGWORLD_HOST"] = "127.0.0.1"
    server.start()
    children: list[Child] = []
    samples: list[Sample] = []
    dead: list[str] = []
    probe: Probe | None = None
    try:
        wait_ready(server, url)
        admin = admin_token(layout.data_dir)
        configure_forge(url, admin)
        tokens = credentials(layout, url, admin, POLICIES)
        with BigWorldClient(url, admin) as client:
            probe_token = client.create_agent("soak-probe", "policy").token
        # a steady pace: the load stays what it was at the start
        children = agent_children(layout, url, tokens, POLICIES, args.step_interval)
        children = [c.start() for c in children]
        probe = Probe(url, probe_token, args.seed)
        probe.thread.start()
        everyone = [server, *children]
        print(f"soak: {len(everyone)} processes on {url}, data folder {data}", flush=True)
        print(header([c.name for c in everyone]), flush=True)
        started = time.monotonic()
        with BigWorldClient(url, tokens["demo-observer"]) as observer:
            for k in range(1, int(args.minutes * 60 / args.interval) + 1):
                if stop.wait(max(0.0, started + k * args.interval - time.monotonic())):
                    print("soak: stopped by a signal", flush=True)
                    break
                samples.append(
                    sample(time.monotonic() - started, everyone, layout, probe, observer, url)
                )
                print(row(samples[-1]), flush=True)
                dead = [c.name for c in everyone if not c.alive]
                if dead:
                    print(f"soak: {', '.join(dead)} stopped; logs in {layout.home / 'logs'}")
                    break
    finally:
        if probe is not None:
            probe.close()
        stop_all(children)  # the agents first, while the server is up, as the demo does
        stop_all([server])
        for signum, handler in before.items():
            signal.signal(signum, handler)
        left = leftovers([server, *children], port)
        if left:  # said here too, for a stop on an error
            print(f"soak: left running after the stop: {', '.join(left)}", file=sys.stderr)
    return samples, left, dead


def warmup_seconds(minutes: float, warmup: float) -> float:
    """The warm-up left out of the fits: ``warmup`` minutes, at most a third of the run."""
    return min(warmup, minutes / 3) * 60


def verdict(
    samples: list[Sample], fits: dict[str, Any], leftover: list[str], warmup_s: float
) -> None:
    """Print the judgement, then where the server's time and the machine's cores went."""
    for line in summary(fits, leftover):
        print(line)
    for line in routes(samples, warmup_s) + cpu(samples, warmup_s):
        print(line)


def rejudge(path: Path) -> int:
    """The verdict of today's goals on the samples of an earlier run (nothing is started)."""
    report = json.loads(path.read_text())
    warmup_s = warmup_seconds(float(report["args"]["minutes"]), float(report["args"]["warmup"]))
    fits = judge(report["samples"], warmup_s)
    verdict(report["samples"], fits, report["left_running"], warmup_s)
    return 0 if not fits["failures"] and not report["left_running"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="how long (default 60)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    parser.add_argument(
        "--warmup",
        type=float,
        default=10.0,
        help="minutes left out of the fits (default 10, at most a third of the run)",
    )
    parser.add_argument("--seed", type=int, default=0, help="world seed")
    parser.add_argument(
        "--step-interval",
        type=float,
        default=STEP_INTERVAL_S,
        help="seconds from one step to the next of each policy agent (default %(default)s; 0: "
        "as fast as they can, so the load grows as they learn)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks",
        help="folder for soak.json and soak.png (default: docs/benchmarks, beside soak.md)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data folder (and logs)")
    parser.add_argument(
        "--judge",
        type=Path,
        metavar="SOAK_JSON",
        help="run nothing: judge the samples of an earlier run's soak.json again (its own "
        "--minutes and --warmup) and print the verdict",
    )
    args = parser.parse_args()
    if args.judge is not None:
        return rejudge(args.judge)
    warmup_s = warmup_seconds(args.minutes, args.warmup)
    if warmup_s < args.warmup * 60:
        print(f"soak: warm-up {warmup_s / 60:.1f} min, a third of a short run")
    args.out.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="bigworld-soak-"))
    try:
        samples, leftover, dead = soak(args, data)
    except BaseException:
        print(f"soak: stopped on an error; the data folder and logs stay in {data}")
        raise
    fits = judge(samples, warmup_s)
    for name in dead:
        if f"{name} stopped during the run" not in fits["failures"]:
            fits["failures"].append(f"{name} stopped during the run")
    failures = fits["failures"] + [f"left running: {x}" for x in leftover]
    report = {
        **provenance(),
        "headline": {
            "order": HEADLINE_ORDER,
            "label": f"Soak: the demo's processes for {args.minutes:g} minutes",
            "figure": ("FAIL: " + "; ".join(failures)) if failures else "PASS, every goal met",
            "page": "docs/benchmarks/soak.md",
        },
        "args": {k: str(v) for k, v in vars(args).items()},
        "latency_source": "probe client: POST /v1/episodes/{id}/steps round trips",
        "samples": samples,
        "fits": fits,
        "left_running": leftover,
        "pass": not fits["failures"] and not leftover,
    }
    (args.out / "soak.json").write_text(json.dumps(report, indent=1))
    if samples:
        plot(samples, warmup_s, args.out / "soak.png")
    verdict(samples, fits, leftover, warmup_s)
    print(f"soak: wrote {args.out / 'soak.json'}" + (" and soak.png" if samples else ""))
    if args.keep or dead or leftover:
        print(f"soak: the data folder and logs stay in {data}")
    else:
        shutil.rmtree(data, ignore_errors=True)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
