"""The agent side of the ``bigworld`` command line: ``history`` and ``world`` here; ``agent
run``, ``model``, ``train`` and ``demo`` register from their modules.

``server.cli`` forwards every command it does not own to :func:`main` with the full argument
list after ``bigworld`` (``["history", "episodes", "--limit", "5"]``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from pathlib import Path
from typing import Any

from agents.client import BigWorldClient, Record, RetryPolicy
from agents.errors import AuthenticationError, ClientError, ForbiddenError, UnreachableError
from world.contract import DEFAULT_SERVER, MAIN_WORLD, WORLD_NAME

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
COMMANDS: dict[str, Register] = {}
COMMAND_MODULES = (
    "agents.commands",
    "agents.train.cli",
    "agents.demo",
    "agents.evaluate",
)  # their commands register on import
"""Top-level command name → function adding its parser (whose ``run`` default is the handler)."""


def command(name: str) -> Callable[[Register], Register]:
    """Register a top-level command group; later issues add ``agent``, ``train``, ``demo``."""

    def decorate(register: Register) -> Register:
        COMMANDS[name] = register
        return register

    return decorate


# What to do about an error the server's answer (or its silence) makes a command end on.
HINTS: dict[type[ClientError], str] = {
    AuthenticationError: "give a token the server knows with --token (env BIGWORLD_TOKEN)",
    ForbiddenError: "give a token of a role that may do this (--token, env BIGWORLD_TOKEN)",
    UnreachableError: "start the server, or point --server (env BIGWORLD_SERVER) at it",
}


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status: 0, 1 when it failed, 2 for misuse.

    Every failure prints one line on stderr saying what is wrong and what to do: misuse
    through the command's parser (``args.parser.error``: its usage, then that line), a
    ``SystemExit("bigworld: …")`` as Python prints it, a client error with a hint."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)  # registers its commands
    parser = argparse.ArgumentParser(prog="bigworld", description="bigworld agents and history.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMANDS.values():
        register(sub)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
        return int(args.run(args) or 0)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):  # a message, as the interpreter would print it
            print(exit_.code, file=sys.stderr)
            return 1
        return 0 if exit_.code is None else exit_.code
    except ClientError as exc:
        hint = next((text for kind, text in HINTS.items() if isinstance(exc, kind)), None)
        print(f"bigworld: {exc}" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 1
    except OSError as exc:  # a file to read or write, a port
        print(f"bigworld: {exc}", file=sys.stderr)
        return 1


# --- shared options --------------------------------------------------------------------------


def at_least(
    minimum: float, kind: type[int] | type[float] = int, *, strict: bool = False
) -> Callable[[str], Any]:
    """An argparse ``type``: a number of ``kind`` no smaller than ``minimum`` (with
    ``strict``, larger)."""
    bound = f"{'>' if strict else '>='} {minimum}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (strict and value == minimum):
            number = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {number} {bound}, got {text!r}")
        return value

    return parse


def server_url(text: str) -> str:
    """An argparse ``type``: an http(s) URL."""
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL, got {text!r}")
    return text


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """``--server``, ``--token`` and ``--retry-s``, defaulting to BIGWORLD_SERVER,
    BIGWORLD_TOKEN and BIGWORLD_RETRY_S; :func:`client_for` builds the client from them."""
    parser.add_argument(
        "--server",
        type=server_url,
        default=os.environ.get("BIGWORLD_SERVER", DEFAULT_SERVER),
        help="server URL (env BIGWORLD_SERVER; default %(default)s)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("BIGWORLD_TOKEN"),
        help="bearer token of any role (env BIGWORLD_TOKEN)",
    )
    parser.add_argument(
        "--retry-s",
        type=at_least(0, float),
        default=os.environ.get("BIGWORLD_RETRY_S", str(RetryPolicy.budget_s)),  # typed by argparse
        help="seconds a request is retried while the server is away or busy, e.g. restarting "
        "(env BIGWORLD_RETRY_S; default %(default)s)",
    )
    parser.set_defaults(parser=parser)


def add_thread_option(parser: argparse.ArgumentParser) -> None:
    """``--threads``, for commands that run torch; :func:`limit_threads` applies it."""
    parser.add_argument(
        "--threads",
        type=at_least(0),
        default=1,
        help="CPU threads for torch, set before any model loads; processes sharing the cores "
        "(several agents, the trainer) each want 1, 0 is torch's default of one per core "
        "(default %(default)s)",
    )


def limit_threads(count: int) -> None:
    """Run torch (and the OpenMP and MKL pools under it) on ``count`` CPU threads; 0 leaves
    torch's default. Call before any model loads. With one pool per process, each as wide as
    the machine, processes that share the cores only wait on each other: on a 2-core machine
    with several agents a forward pass was ~17x slower than on one thread."""
    if count < 1:
        return
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(count)
    import torch

    torch.set_num_threads(count)


def stop_on_signals(stop: threading.Event, seconds: float | None = None) -> None:
    """Set ``stop`` on SIGTERM or Ctrl-C, and after ``seconds`` when given, so that a
    long-running command (an agent, the trainer) finishes its work cleanly."""

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    if seconds is not None:
        timer = threading.Timer(seconds, stop.set)
        timer.daemon = True
        timer.start()


WORLD_NAME_PATTERN = re.compile(WORLD_NAME)


def world_name(text: str) -> str:
    """An argparse ``type``: a world's name, ``main`` or a fork's."""
    if not WORLD_NAME_PATTERN.match(text):
        raise argparse.ArgumentTypeError(
            f"expected a world's name (main, or a fork's: lowercase letters, digits and '-', "
            f"see `bigworld world list`), got {text!r}"
        )
    return text


def add_world_option(parser: argparse.ArgumentParser) -> None:
    """``--world``: the world a command reads (``main`` or a fork), for
    ``client_for(args, world=args.world)``."""
    parser.add_argument(
        "--world",
        type=world_name,
        default=MAIN_WORLD,
        help="the world to read: main or a fork's name (see `bigworld world list`; "
        "default %(default)s)",
    )


def client_for(
    args: argparse.Namespace, token: str | None = None, *, world: str = MAIN_WORLD
) -> BigWorldClient:
    """A client for the command's ``--server`` and ``--retry-s``, with its ``--token`` unless
    another ``token`` is given (an expert's, a player's); no token at all is misuse. It reads
    and plays in ``world`` (a command's ``--world``, :func:`add_world_option`)."""
    token = token or args.token
    if not token:
        args.parser.error("expected a token: give --token or set BIGWORLD_TOKEN")
    return BigWorldClient(args.server, token, retry=RetryPolicy(budget_s=args.retry_s), world=world)


def check_token(client: BigWorldClient) -> None:
    """Fail at once on a token the server refuses (401), which a long-running command would
    otherwise retry forever; a server not up yet is waited for by the command itself."""
    with contextlib.suppress(UnreachableError):
        client.world()


# The query parameters of the list routes (design §6); each is the option of the same name.
TICK_FILTERS = ("from_tick", "to_tick")
EPISODE_FILTERS = ("agent", "task", "family", "status", "policy_version", *TICK_FILTERS)
EVENT_FILTERS = ("kind", "entity", "region", "actor", *TICK_FILTERS)
DECISION_FILTERS = ("kind", "task", *TICK_FILTERS)  # --task is the route's task_id
# What ``history export`` writes, and the filters that apply to each.
EXPORTS = {
    "episodes": EPISODE_FILTERS,
    "steps": EPISODE_FILTERS,
    "judgments": EPISODE_FILTERS,
    "events": EVENT_FILTERS,
    "decisions": DECISION_FILTERS,
}
# The columns of the table views (``--format jsonl`` prints every field).
EPISODE_COLUMNS = (
    "id",
    "agent_id",
    "avatar_id",
    "family",
    "status",
    "outcome",
    "last_step",
    "begin_tick",
    "end_tick",
)
EVENT_COLUMNS = ("id", "tick", "kind", "actor", "entities", "payload")


def add_tick_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from-tick", type=int, help="only from this tick on (inclusive)")
    parser.add_argument("--to-tick", type=int, help="only up to this tick (inclusive)")


def add_episode_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", type=int, help="agent id")
    parser.add_argument("--task", help="task id")
    parser.add_argument("--family", help="task family, e.g. pick_and_place")
    parser.add_argument("--status", choices=("open", "succeeded", "failed", "abandoned"))
    parser.add_argument(
        "--policy-version",
        help="episodes with a step by this policy version (steps and judgments: only that "
        "version's steps)",
    )


def add_event_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", help="event kind (with --what decisions: decision kind)")
    parser.add_argument("--entity", help='an entity the event touches, e.g. "thing:7"')
    parser.add_argument("--region", help="region key, e.g. 0,0")
    parser.add_argument("--actor", help="the acting avatar's id")


def filters(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    given = {name: getattr(args, name, None) for name in names}
    return {name: value for name, value in given.items() if value is not None}


# --- worlds ----------------------------------------------------------------------------------

WORLD_COLUMNS = ("name", "parent", "at_tick", "tick", "size", "created_at")


@command("world")
def register_world(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    world = sub.add_parser(
        "world",
        help="fork, list and delete worlds",
        description="Forks: a copy of a world as it was at the end of a tick, that never "
        "touches its parent (making and deleting one needs an admin token).",
    )
    verbs = world.add_subparsers(dest="verb", required=True, metavar="VERB")

    fork = verbs.add_parser("fork", help="fork a world at a tick", description="Fork a world.")
    add_server_options(fork)
    fork.add_argument("--from", dest="source", default=MAIN_WORLD, help="the world forked")
    fork.add_argument("--at-tick", type=at_least(0), required=True, help="its tick to fork at")
    fork.add_argument("--name", help="the fork's name (default: generated)")
    fork.set_defaults(run=run_world_fork)

    listing = verbs.add_parser("list", help="list worlds", description="List main and forks.")
    add_server_options(listing)
    listing.add_argument("--format", choices=("table", "jsonl"), default="table")
    listing.set_defaults(run=run_world_list)

    drop = verbs.add_parser(
        "delete", help="delete a fork", description="Delete a fork and all only it holds."
    )
    add_server_options(drop)
    drop.add_argument("name")
    drop.set_defaults(run=run_world_delete)


def run_world_fork(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        print(json.dumps(client.fork_world(args.source, args.at_tick, args.name), sort_keys=True))
    return 0


def run_world_list(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        print_rows(client.worlds(), args.format, WORLD_COLUMNS)
    return 0


def run_world_delete(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        print(json.dumps(client.delete_world(args.name), sort_keys=True))
    return 0


# --- history ---------------------------------------------------------------------------------


@command("history")
def register_history(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser(
        "history",
        help="query and export the world's history",
        description="Query episodes and the event log; export those, steps, judgments and "
        "the forge's decisions. --world reads a fork's history instead of main's.",
    )
    verbs = history.add_subparsers(dest="verb", required=True, metavar="VERB")

    episodes = verbs.add_parser(
        "episodes",
        help="list episodes",
        description="List episodes, newest pages first as the server orders them.",
    )
    add_server_options(episodes)
    add_world_option(episodes)
    add_episode_filters(episodes)
    add_tick_filters(episodes)
    add_listing_options(episodes)
    episodes.set_defaults(run=run_episodes)

    events = verbs.add_parser(
        "events",
        help="list the event log",
        description="List entries of the append-only event log.",
    )
    add_server_options(events)
    add_world_option(events)
    add_event_filters(events)
    add_tick_filters(events)
    add_listing_options(events)
    events.set_defaults(run=run_events)

    export = verbs.add_parser(
        "export",
        help="export episodes, steps, judgments, events or forge decisions to a file",
        description="Export history to JSONL or Parquet, one row per record; nested JSON "
        "fields become JSON strings in Parquet. Either loads in pandas in one line: "
        "pd.read_json(path, lines=True) or pd.read_parquet(path). Episode filters (--agent, "
        "--task, --family, --status, --policy-version) apply to episodes, steps and "
        "judgments; a tick range to the episodes' begin tick, the events' and the "
        "decisions' tick. Decisions take --kind, --task and a tick range; they are the "
        "forge's, which runs in the main world only.",
    )
    add_server_options(export)
    add_world_option(export)
    export.add_argument("--what", choices=tuple(EXPORTS), required=True)
    export.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        help="file format (default: from --out's suffix, else jsonl)",
    )
    export.add_argument("--out", type=Path, required=True, help="file to write")
    export.add_argument("--limit", type=at_least(0), default=0, help="at most N rows (0: all)")
    add_episode_filters(export)
    add_event_filters(export)
    add_tick_filters(export)
    export.set_defaults(run=run_export)


def add_listing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=at_least(0), default=50, help="at most N rows (0: all)")
    parser.add_argument("--format", choices=("table", "jsonl"), default="table")


def run_episodes(args: argparse.Namespace) -> int:
    with client_for(args, world=args.world) as client:
        rows = client.episodes(page_size=page_size(args.limit), **filters(args, EPISODE_FILTERS))
        print_rows(take(rows, args.limit), args.format, EPISODE_COLUMNS)
    return 0


def run_events(args: argparse.Namespace) -> int:
    with client_for(args, world=args.world) as client:
        rows = client.events(page_size=page_size(args.limit), **filters(args, EVENT_FILTERS))
        print_rows(take(rows, args.limit), args.format, EVENT_COLUMNS)
    return 0


def run_export(args: argparse.Namespace) -> int:
    every = {name for names in EXPORTS.values() for name in names}
    misplaced = set(filters(args, tuple(every))) - set(EXPORTS[args.what])
    if misplaced:
        args.parser.error(f"--what {args.what} takes no {', '.join(sorted(misplaced))} filter")
    if args.what == "decisions" and args.world != MAIN_WORLD:
        args.parser.error(
            f"--what decisions exports the forge's decisions, made in the main world only: "
            f"leave out --world {args.world}"
        )
    if not args.out.parent.is_dir():
        args.parser.error(f"expected --out in an existing folder, got {args.out}")
    fmt = args.format or ("parquet" if args.out.suffix == ".parquet" else "jsonl")
    with client_for(args, world=args.world) as client:
        # The first page before the file: a refusal (an unknown --world, a token) writes nothing.
        rows = peeked(take(export_rows(client, args), args.limit))
        count = write_parquet(rows, args.out) if fmt == "parquet" else write_jsonl(rows, args.out)
    print(f"wrote {count} {args.what} to {args.out}", file=sys.stderr)
    return 0


def export_rows(client: BigWorldClient, args: argparse.Namespace) -> Iterator[Record]:
    size = page_size(args.limit)
    if args.what == "events":
        yield from client.events(page_size=size, **filters(args, EVENT_FILTERS))
        return
    if args.what == "decisions":
        given = filters(args, DECISION_FILTERS)
        if "task" in given:
            given["task_id"] = given.pop("task")
        yield from client.decisions(page_size=size, **given)
        return
    episodes = client.episodes(page_size=size, **filters(args, EPISODE_FILTERS))
    if args.what == "episodes":
        yield from episodes
        return
    for summary in episodes:  # steps, judgments: one episode at a time, from its detail
        yield from episode_records(client.episode(summary["id"]), args.what, args.policy_version)


def episode_records(detail: Record, what: str, version: str | None) -> Iterator[Record]:
    """An episode's steps or judgments as rows naming their episode; with ``version``, only
    those on steps by that policy version. A judgment row carries the judged step's policy
    version, and the policy agent as ``episode_agent_id`` (its own ``agent_id`` is the judge)."""
    context = {
        "episode_id": detail["id"],
        "family": detail["family"],
        "task_id": detail["task"]["id"],
    }
    versions = {s["step"]: s.get("policy_version") for s in detail.get("steps") or ()}
    if what == "steps":
        for step in detail.get("steps") or ():
            if version is None or step.get("policy_version") == version:
                yield {**context, "agent_id": detail["agent_id"], **step}
        return
    for judgment in detail.get("judgments") or ():
        judged = versions.get(judgment["step"])
        if version is None or judged == version:
            yield {
                **context,
                "episode_agent_id": detail["agent_id"],
                "policy_version": judged,
                **judgment,
            }


# --- output ----------------------------------------------------------------------------------


def page_size(limit: int) -> int:
    return min(limit, 500) if limit > 0 else 500


def take(rows: Iterable[Record], limit: int) -> Iterator[Record]:
    return islice(rows, limit) if limit > 0 else iter(rows)


def peeked(rows: Iterator[Record]) -> Iterator[Record]:
    """``rows`` with the first already read (its request sent, its error raised now)."""
    first = next(rows, None)
    return rows if first is None else chain([first], rows)


def flat(value: Any) -> Any:
    """A cell value: nested JSON as a JSON string, scalars as they are."""
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


def print_rows(rows: Iterable[Record], fmt: str, columns: tuple[str, ...]) -> None:
    if fmt == "jsonl":
        for row in rows:
            print(json.dumps(row, sort_keys=True))
        return
    table = [{key: flat(value) for key, value in row.items()} for row in rows]
    if not table:
        print("(none)")
        return
    columns = tuple(c for c in columns if c in table[0]) or tuple(table[0])
    cells = [[("" if r.get(c) is None else str(r.get(c)))[:60] for c in columns] for r in table]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    for line in [columns, *cells]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def write_jsonl(rows: Iterable[Record], out: Path) -> int:
    count = 0
    with out.open("w", encoding="utf-8") as file:
        for row in rows:
            file.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
    return count


def write_parquet(rows: Iterable[Record], out: Path) -> int:
    """Write rows as one Parquet table: nested fields as JSON strings, and a column whose
    values mix strings with other scalars as strings throughout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = [{key: flat(value) for key, value in row.items()} for row in rows]
    columns: dict[str, list[Any]] = {}
    for row in table:
        for key in row:
            columns.setdefault(key, [])
    for key, values in columns.items():
        values.extend(row.get(key) for row in table)
        kinds = {type(v) for v in values if v is not None}
        if str in kinds and len(kinds) > 1:
            columns[key] = [None if v is None else str(v) for v in values]
    pq.write_table(pa.table(columns) if table else pa.table({}), out)
    return len(table)


if __name__ == "__main__":
    raise SystemExit(main())
