"""``bigworld demo``: the whole loop on the embedded default for a bounded time, then a report.

The demo starts, each as a child process in its own process group, the world server on a SQLite
file in the data folder (the forge runs inside it), policy agents with a tiny CPU model, a
reward agent and the continual trainer. It shows a live terminal view, and at the end (or on
Ctrl-C / SIGTERM) stops the agents and the trainer first, so that they finish or abandon their
episodes, then the server, and writes a report with ``bigworld report``.

Everything lives in the data folder, so a second run continues the same world rather than
starting over::

    D/world.db, D/admin_token           the world and its admin token (the server's own)
    D/demo/credentials.json             the demo's agents and their tokens (0600)
    D/demo/models/{policy,reward}       the tiny starting models, built once
    D/demo/train/                       the trainer's checkpoints and cursor (it resumes)
    D/demo/logs/*.log                   one log per process
    D/report/                           the report of the latest run

The demo imports nothing of the server: it runs ``bigworld`` commands and talks HTTP.

It is tuned for a cold start (untrained tiny models) to show learning within minutes: short
episodes (``DEMO_STEP_BUDGET``), a forge cycle every few seconds and a forge configuration
(``DEMO_FORGE``, patched in at every start) that measures tasks after few rollouts and decides
trials quickly, so that the forge's curriculum steps down from tasks nobody wins to one-hop
go_to tasks (which an untrained policy wins sometimes: mixed outcomes to learn from) within
the first minutes. The view shows the rung being played and every policy version.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agents.cli import at_least, command
from agents.client import BigWorldClient, Record, Request
from agents.errors import ClientError
from world.contract import DEFAULT_DATA_DIR, DEFAULT_PORT

BIGWORLD = "import sys; from server.cli import main; sys.exit(main(sys.argv[1:]))"
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0  # per process: agents finish or abandon their episode in this time
REPORT_TIMEOUT_S = 300.0
VIEW_EVERY_S = 2.0
STATUS_EVERY_S = 15.0  # without a live view (not a terminal, or --no-view): a line this often
DECISIONS_TICKS = 3000  # the view looks this far back for the forge's latest decisions
BEGUN_TICKS = (60, 1000)  # the view looks this far back for the latest episode begins
# The demo's world and forge: short episodes, a quick forge, and a curriculum that starts
# where a cold-start learner can win (see the module's docstring).
DEMO_STEP_BUDGET = 8
DEMO_FORGE_INTERVAL_S = 5.0
DEMO_FORGE: dict[str, Any] = {
    "min_rollouts": 2,  # a task's accuracy counts after 2 rollouts (of its window of 16)
    "trial_size": 2,  # a variant's trial is decided by 2 rollouts
    "cooldown_cycles": 3,
    "max_proposals": 4,
    "probe_every": 20,
}
DEMO_VOTES = 1  # judgments per step: the reward agent's and the trainer's m
# λ, the weight of the (at first untrained) reward model's vote in the step reward: small, so
# that outcomes lead while the reward model still learns from consistency
DEMO_LAMBDA = 0.25


@command("demo")
def register_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="the whole loop on the embedded default, then a report",
        description="Run the world server (SQLite in the data folder, forge inside), policy "
        "agents with a tiny CPU model, a reward agent and the trainer for a bounded time with "
        "a live view; stop cleanly on Ctrl-C or at the end and write a report. Running it "
        "again on the same data folder continues the same world.",
    )
    demo.add_argument(
        "--minutes",
        type=at_least(0, float, strict=True),
        default=10.0,
        help="how long (default 10)",
    )
    demo.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("BIGWORLD_DATA_DIR", DEFAULT_DATA_DIR)),
        help="the world's data folder (env BIGWORLD_DATA_DIR; default %(default)s)",
    )
    demo.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="server port; a free one if it is taken"
    )
    demo.add_argument("--policies", type=at_least(1), default=2, help="policy agents (default 2)")
    demo.add_argument("--seed", type=int, default=0, help="world seed for a new world")
    demo.add_argument("--no-view", action="store_true", help="a status line, not a live view")
    demo.add_argument("--no-report", action="store_true", help="skip the report at the end (tests)")
    demo.set_defaults(run=run_demo)


# --- the processes ---------------------------------------------------------------------------


@dataclass
class Child:
    """One child process with its log file."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _out: IO[bytes] | None = None

    def start(self) -> Child:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-c", BIGWORLD, *self.argv],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            process_group=0,  # Ctrl-C reaches the demo only; it stops children in order
        )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        if self.process is not None and self.alive:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> int | None:
        """The exit status, SIGKILLed when it is still running at ``deadline`` (monotonic);
        None if it never started."""
        if self.process is None:
            return None
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self._out is not None:
            self._out.close()
        return self.process.returncode


def stop_all(children: list[Child]) -> None:
    """SIGTERM to all at once, then wait for each, SIGKILL for any still running at the end."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for child in children:
        child.wait(deadline)


def free_port(preferred: int) -> int:
    """``preferred`` when it can be bound on loopback, else any free port."""
    for port in (preferred, 0):
        with socket.socket() as sock, contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            return int(sock.getsockname()[1])
    raise OSError("no free port on 127.0.0.1")


@dataclass
class Layout:
    """Where the demo keeps what it needs in the data folder."""

    data_dir: Path

    @property
    def home(self) -> Path:
        return self.data_dir / "demo"

    @property
    def credentials(self) -> Path:
        return self.home / "credentials.json"

    def model(self, kind: str) -> Path:
        return self.home / "models" / kind

    @property
    def train(self) -> Path:
        return self.home / "train"

    def log(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    @property
    def report(self) -> Path:
        return self.data_dir / "report"


def build_models(layout: Layout) -> None:
    """The tiny policy and reward models, built once (a later run reuses them)."""
    for kind in ("policy", "reward"):
        if (layout.model(kind) / "config.json").exists():
            continue
        from agents.models.tiny import ModelSpec, init_model

        init_model(kind, layout.model(kind), ModelSpec())


def wait_ready(server: Child, url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    with BigWorldClient(url) as probe:
        while time.monotonic() < deadline:
            if not server.alive:
                raise SystemExit(f"bigworld: the server stopped; see {server.log}")
            with contextlib.suppress(ClientError):
                if probe.readyz():
                    return
            time.sleep(0.3)
    raise SystemExit(f"bigworld: the server was not ready in {READY_TIMEOUT_S:.0f} s")


def configure_forge(url: str, token: str) -> None:
    """Patch the demo's forge configuration (``DEMO_FORGE``) into the server's."""
    with BigWorldClient(url, token) as admin:
        reply = admin.send(Request("PATCH", "/v1/forge/config", json=DEMO_FORGE))
    if reply.status != 200:
        raise SystemExit(f"bigworld: the forge configuration was refused: {reply.text}")


def agent_names(policies: int) -> dict[str, str]:
    """The demo's agents, name → role."""
    names = {f"demo-policy-{i}": "policy" for i in range(1, policies + 1)}
    names.update({"demo-reward": "reward", "demo-trainer": "trainer", "demo-observer": "observer"})
    return names


def credentials(layout: Layout, url: str, admin_token: str, policies: int) -> dict[str, str]:
    """Tokens of the demo's agents, name → token: registered on first use and kept (0600) in
    the data folder, so a later run acts with the same agents and avatars."""
    known: dict[str, str] = {}
    if layout.credentials.exists():
        known = json.loads(layout.credentials.read_text())
    missing = {n: r for n, r in agent_names(policies).items() if n not in known}
    if missing:
        with BigWorldClient(url, admin_token) as admin:
            for name, role in missing.items():
                known[name] = admin.create_agent(name, role).token
        layout.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(layout.credentials, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(known, out, indent=1)
    return known


def admin_token(data_dir: Path) -> str:
    """The admin token: BIGWORLD_ADMIN_TOKEN, else the one the server wrote at first start."""
    given = os.environ.get("BIGWORLD_ADMIN_TOKEN")
    if given:
        return given
    return (data_dir / "admin_token").read_text().strip()


def server_child(layout: Layout, port: int, seed: int) -> Child:
    """The world server on the data folder's SQLite file, with the demo's settings (not started)."""
    return Child(
        "server",
        ["serve", "--data-dir", str(layout.data_dir), "--port", str(port)],
        layout.log("server"),
        {
            "BIGWORLD_SEED": str(seed),
            "BIGWORLD_RECORD_DISTANCE": "true",
            "BIGWORLD_STEP_BUDGET": str(DEMO_STEP_BUDGET),
            "BIGWORLD_FORGE_INTERVAL_S": str(DEMO_FORGE_INTERVAL_S),
            "BIGWORLD_VOTES_PER_STEP": str(DEMO_VOTES),  # m slots a step has, so m per judge
        },
    )


def agent_children(
    layout: Layout, url: str, tokens: dict[str, str], policies: int, step_interval: float = 0.0
) -> list[Child]:
    """The demo's agents; ``step_interval`` paces each policy agent (``--step-interval``)."""
    server_opts = ["--server", url]
    pace = ["--step-interval", str(step_interval)] if step_interval else []
    # One torch thread per process (the default, said aloud): the demo's processes share the
    # cores, and a pool per process as wide as the machine would only wait on the others.
    one_thread = ["--threads", "1"]
    children = [
        Child(
            f"policy-{i}",
            [
                "agent", "run", "--role", "policy", "--backend", "transformers",
                "--model", str(layout.model("policy")), "--mode", "rank",
                "--seed", str(i), "--device", "cpu", *one_thread, *server_opts, *pace,
            ],
            layout.log(f"policy-{i}"),
            {"BIGWORLD_TOKEN": tokens[f"demo-policy-{i}"]},
        )
        for i in range(1, policies + 1)
    ]  # fmt: skip
    children.append(
        Child(
            "reward",
            [
                "agent", "run", "--role", "reward", "--backend", "transformers",
                "--model", str(layout.model("reward")), "--votes", str(DEMO_VOTES),
                "--device", "cpu", *one_thread, *server_opts,
            ],
            layout.log("reward"),
            {"BIGWORLD_TOKEN": tokens["demo-reward"]},
        )
    )  # fmt: skip
    children.append(
        Child(
            "trainer",
            [
                "train", "--policy", str(layout.model("policy")),
                "--reward", str(layout.model("reward")), "--out", str(layout.train),
                "--mode", "integrated_rm", "--votes", str(DEMO_VOTES),
                "--lam", str(DEMO_LAMBDA), "--no-progress", *one_thread, *server_opts,
            ],
            layout.log("trainer"),
            {"BIGWORLD_TOKEN": tokens["demo-trainer"]},
        )
    )  # fmt: skip
    return children


# --- the live view ---------------------------------------------------------------------------


@dataclass
class Snapshot:
    """What the view shows, read over HTTP with the observer token."""

    world: Record
    learning: Record | None
    decisions: list[Record]
    versions: dict[str, Any]
    begun: list[Record] = field(default_factory=list)  # the latest episode begins, oldest first


def latest_begins(client: BigWorldClient, tick: int) -> list[Record]:
    """The latest ``episode_begun`` events (the route pages oldest first: look back a little,
    then further while nothing is found)."""
    for back in BEGUN_TICKS:
        found = list(
            client.events(kind="episode_begun", from_tick=max(0, tick - back), page_size=500)
        )
        if found:
            return found[-50:]
    return []


def rung_line(begun: list[Record]) -> str:
    """The rung being played: the family (and hops, for go_to) of the latest begin and how it
    was drawn, then what the latest begins played."""
    if not begun:
        return "rung: (no episode begun yet)"
    last = begun[-1]["payload"]
    latest = f"rung: {_task_label(last.get('task') or {})} ({last.get('draw', '?')})"
    counts: dict[str, int] = {}
    for event in begun:
        label = _task_label(event["payload"].get("task") or {})
        counts[label] = counts.get(label, 0) + 1
    played = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])[:4])
    return f"{latest}   last {len(begun)} begins: {played}"


def _task_label(task: Record) -> str:
    family = str(task.get("family", "?"))
    if family != "go_to":
        return family
    hops = int((task.get("params") or {}).get("hops", 1))
    return f"go_to {hops} hop{'s' if hops != 1 else ''}"


def snapshot(client: BigWorldClient) -> Snapshot:
    world = client.world()
    learning: Record | None = None
    with contextlib.suppress(ClientError):
        learning = client.learning_metrics()
    decisions: list[Record] = []
    with contextlib.suppress(ClientError):
        recent = max(0, int(world["tick"]) - DECISIONS_TICKS)  # the route pages oldest first
        decisions = list(client.decisions(page_size=500, from_tick=recent))[-5:]
    versions: dict[str, Any] = {}
    for kind in ("policy", "reward"):
        with contextlib.suppress(ClientError):
            versions[kind] = client.latest_policy(kind).get("version")
    begun: list[Record] = []
    with contextlib.suppress(ClientError):
        begun = latest_begins(client, int(world["tick"]))
    return Snapshot(world, learning, decisions, versions, begun)


def _rate(stats: Record | None) -> str:
    if not stats or not stats.get("episodes"):
        return "   -   "
    rate = stats.get("success_rate")
    return f"{rate:4.2f} ({stats['episodes']})" if rate is not None else "   -   "


def render(
    shot: Snapshot,
    *,
    elapsed: float,
    total: float,
    url: str,
    ended_at_start: int,
    children: list[Child],
) -> str:
    """The view as text: world, throughput, success per family and version, forge, processes."""
    world, learning = shot.world, shot.learning or {}
    ended = int(learning.get("episodes") or 0)
    per_min = (ended - ended_at_start) / max(elapsed / 60.0, 1e-9)
    lines = [
        f"bigworld demo  {int(elapsed) // 60}:{int(elapsed) % 60:02d} of "
        f"{int(total) // 60}:{int(total) % 60:02d}   dashboard: {url}/",
        f"world  tick {world.get('tick')}  season {world.get('season')}  "
        f"regions {world.get('regions')}  things {world.get('things')}  "
        f"avatars {world.get('avatars')}  rules v{world.get('rules_version')}",
        f"episodes  {ended} ended ({per_min:.1f}/min this run)   "
        f"policy v{shot.versions.get('policy', '-')}  reward v{shot.versions.get('reward', '-')}",
        rung_line(shot.begun),
        "",
        "success by family          all",
    ]
    families: dict[str, Record] = learning.get("families") or {}
    versions: dict[str, Record] = learning.get("versions") or {}
    for family, stats in sorted(families.items()):
        lines.append(f"  {family:22} {_rate(stats):>12}")
    if not families:
        lines.append("  (no episode has ended yet)")
    lines += ["", "success by policy version"]
    shown = sorted(versions.items(), key=lambda kv: _version_key(kv[0]))
    if len(shown) > 8:  # the first and the latest ones
        shown = [shown[0], *shown[-7:]]
    for i in range(0, len(shown), 4):
        lines.append("  " + "   ".join(f"v{v}: {_rate(st)}" for v, st in shown[i : i + 4]))
    if not versions:
        lines.append("  (none yet)")
    lines += ["", "forge, latest decisions"]
    for d in reversed(shot.decisions):
        task = f" {d['task_id']}" if d.get("task_id") else ""
        lines.append(f"  tick {d['tick']:>6}  {d['kind']:<16} {d['verdict']:<10}{task}")
    if not shot.decisions:
        lines.append("  (none yet)")
    state = "  ".join(f"{c.name} {'up' if c.alive else 'DOWN'}" for c in children)
    lines += ["", f"processes  {state}", "Ctrl-C stops cleanly and writes the report."]
    return "\n".join(lines)


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (1 << 62, version)


# --- the run ---------------------------------------------------------------------------------


def run_demo(args: argparse.Namespace) -> int:
    layout = Layout(args.data_dir.resolve())
    layout.home.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    print(f"bigworld demo: data folder {layout.data_dir}", flush=True)
    build_models(layout)
    port = free_port(args.port)
    url = f"http://127.0.0.1:{port}"
    server = server_child(layout, port, args.seed).start()
    children: list[Child] = []
    try:
        wait_ready(server, url)
        admin = admin_token(layout.data_dir)
        configure_forge(url, admin)
        tokens = credentials(layout, url, admin, args.policies)
        children = [c.start() for c in agent_children(layout, url, tokens, args.policies)]
        watch(args, url, tokens["demo-observer"], [server, *children], stop)
    finally:
        stop_all(children)  # they finish or abandon their episodes while the server is up
        stop_all([server])
    if not args.no_report:
        report = Child(
            "report",
            ["report", "--data-dir", str(layout.data_dir), "--out", str(layout.report)],
            layout.log("report"),
        ).start()
        status = report.wait(time.monotonic() + REPORT_TIMEOUT_S)
        if status != 0:
            print(f"bigworld demo: the report failed; see {report.log}", file=sys.stderr)
            return 1
        print(f"bigworld demo: report in {layout.report}/report.md")
    print(f"bigworld demo: the world stays in {layout.data_dir}; run again to continue it.")
    return 0


def watch(
    args: argparse.Namespace, url: str, token: str, children: list[Child], stop: threading.Event
) -> None:
    """Show the view until the time is up, Ctrl-C, or a process dies."""
    total = args.minutes * 60.0
    started = time.monotonic()
    live = sys.stdout.isatty() and not args.no_view
    ended_at_start: int | None = None
    last_line = 0.0
    with BigWorldClient(url, token) as client:
        while not stop.wait(VIEW_EVERY_S if ended_at_start is not None else 0.0):
            elapsed = time.monotonic() - started
            if elapsed >= total:
                break
            dead = [c.name for c in children if not c.alive]
            if dead:
                print(f"bigworld demo: {', '.join(dead)} stopped; see {children[0].log.parent}")
                break
            if not live and last_line and elapsed - last_line < STATUS_EVERY_S:
                continue  # a status line is due only every STATUS_EVERY_S: spare the server
            try:
                shot = snapshot(client)
            except ClientError as exc:
                print(f"bigworld demo: server unreachable: {exc}", file=sys.stderr)
                continue
            if ended_at_start is None:
                ended_at_start = int((shot.learning or {}).get("episodes") or 0)
            text = render(
                shot,
                elapsed=elapsed,
                total=total,
                url=url,
                ended_at_start=ended_at_start,
                children=children,
            )
            if live:
                print("\x1b[H\x1b[2J" + text, flush=True)
            else:
                last_line = max(elapsed, 1e-9)
                print(" | ".join(text.splitlines()[1:4]), flush=True)
