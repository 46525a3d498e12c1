"""The ``bigworld`` command line: ``serve``, ``db upgrade``, ``agent create`` and ``report`` (it
reads the database like the server does) run here; every other command (``history``,
``agent run``, ``model``, ``train``, ``demo``) belongs to the agents side and is forwarded to
``agents.cli.main``, imported only when invoked so that the server process never loads
``agents`` or torch.

Every ``serve`` flag is a setting of ``server.settings``, whose declaration gives the flag its
name, type and help, and also an environment variable (its help names it); a flag given on the
command line wins over the environment, which wins over the default. The admin token is never a
flag (a command line is visible to every user in ``ps``), only ``BIGWORLD_ADMIN_TOKEN`` or a file
named by ``--admin-token-file``.

The data folder is created readable by its owner only (0700), and so is a SQLite database file
(0600; SQLite gives its ``-wal`` and ``-shm`` files the database file's mode). No log line
carries a token: the access log writes a ``token=`` query parameter as ``token=[redacted]``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server import memory
from server.settings import Settings, default_text, flagged, flags, variables

OWN_COMMANDS = {"serve", "db", "report"}
AGENT_COMMANDS = {
    "agent",
    "history",
    "model",
    "train",
    "demo",
    "world",
}  # agents.cli's; others are misuse
AGENT_SUBCOMMANDS_HERE = {"create"}


def _settings(args: argparse.Namespace) -> Settings:
    """The settings that ``args``' flags give, over the environment and the defaults."""
    given: dict[str, Any] = {
        name: value for name in flagged() if (value := getattr(args, name, None)) is not None
    }
    return Settings(**given)


def _add_setting(parser: argparse.ArgumentParser, name: str) -> None:
    """Add setting ``name``'s flag to ``parser``, its help made from the setting's declaration.
    Every flag defaults to None, so that a flag not given leaves the environment's value."""
    field = Settings.model_fields[name]
    described = f"{field.description} (env {variables(name)[0]}; default {default_text(name)})"
    help_text = described.replace("`", "").replace("%", "%%")  # plain text, not a format
    option, *negative = flags(name)
    if field.annotation is bool:  # a switch on by default has --no-<flag> too
        action = argparse.BooleanOptionalAction if negative else "store_true"
        parser.add_argument(option, dest=name, action=action, default=None, help=help_text)
        return
    parser.add_argument(option, dest=name, type=_value_type(field.annotation), help=help_text)


def _value_type(annotation: Any) -> Callable[[str], Any]:
    """The type a flag's text becomes, from its setting's annotation (None left out)."""
    for kind in (str, int, float, Path):
        if annotation in (kind, kind | None):
            return kind
    raise TypeError(f"expected a str, int, float, Path or bool setting, got {annotation}")


def _db_options(parser: argparse.ArgumentParser, *, seed: bool = True) -> None:
    for name in ("data_dir", "database_url", "seed") if seed else ("data_dir", "database_url"):
        _add_setting(parser, name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bigworld", description="bigworld: one persistent world over HTTP."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run the world server in the foreground",
        description="Run the world server (uvicorn) in the foreground.",
    )
    for name in flagged():
        _add_setting(serve, name)
    # Refused with a message saying where the token goes instead (a flag is seen in ps).
    serve.add_argument("--admin-token", dest="admin_token_flag", help=argparse.SUPPRESS)
    serve.set_defaults(run=_serve)

    db = sub.add_parser("db", help="database maintenance", description="Database maintenance.")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = db_sub.add_parser(
        "upgrade",
        help="apply migrations to the configured database",
        description="Apply every pending migration to the configured database.",
    )
    _db_options(upgrade)
    upgrade.set_defaults(run=_upgrade)

    agent = sub.add_parser(
        "agent",
        help="register agents (create) or run them (run)",
        description="Register an agent (create) or run one (run, on the agents side).",
    )
    agent_sub = agent.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    create = agent_sub.add_parser(
        "create",
        help="register an agent directly in the database; prints its token",
        description="Register an agent in the configured database; prints id and token.",
    )
    create.add_argument("--name", required=True, help="lowercase name, also the avatar's name")
    create.add_argument(
        "--role", required=True, choices=["admin", "policy", "reward", "trainer", "observer"]
    )
    create.add_argument(
        "--max-open-episodes",
        type=int,
        default=1,
        help="policy agents: episodes it may hold open at once (default 1)",
    )
    _db_options(create)
    create.set_defaults(run=_create_agent)
    agent_sub.add_parser(
        "run", help="run an agent until stopped (see `bigworld agent run --help`)", add_help=False
    )
    for name, text in (
        ("history", "query and export history"),
        ("model", "build tiny models"),
        ("train", "run the continual trainer"),
        ("demo", "the whole loop on the embedded default"),
    ):
        sub.add_parser(name, help=f"{text} (see `bigworld {name} --help`)", add_help=False)
    report = sub.add_parser(
        "report",
        help="plots and a summary of the world's history",
        description="Read the world's history straight from the database (the server need "
        "not run) and write report.md, PNG plots (success over time per family and per "
        "policy version, the reward model's agreement with outcomes, forge decisions, world "
        "changes and seasons) and metrics.json into --out. With --world, a fork's own "
        "history (since its tick) instead of the main world's.",
    )
    _db_options(report, seed=False)
    report.add_argument(
        "--world",
        default="main",
        help="the world to report on: main or a fork's name, found in the main world's "
        "database (default %(default)s)",
    )
    report.add_argument(
        "--out",
        type=Path,
        help="folder to write the report to (default: DATA_DIR/report, for a fork "
        "DATA_DIR/report-<name>)",
    )
    report.add_argument(
        "--bucket-ticks",
        dest="bucket_ticks",
        type=int,
        help="ticks per bucket of the curves (default: about 40 buckets over the run)",
    )
    report.add_argument(
        "--window", type=int, default=10, help="episodes per window of the metrics (default 10)"
    )
    report.set_defaults(run=_report)
    return parser


def _report(args: argparse.Namespace) -> int:
    from server.report import ReportError, write_report

    settings = _settings(args)
    folder = "report" if args.world == "main" else f"report-{args.world}"
    out = args.out or settings.data_dir / folder
    for name in ("bucket_ticks", "window"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(
                f"bigworld: expected --{name.replace('_', '-')} >= 1, got {value}", file=sys.stderr
            )
            return 2
    try:
        summary = write_report(
            settings.resolved_database_url(),
            out,
            world=args.world,
            bucket_ticks=args.bucket_ticks,
            window=args.window,
        )
    except (ReportError, ValueError) as exc:
        print(f"bigworld: {exc}", file=sys.stderr)
        return 1
    print(f"report written to {summary}")
    return 0


class RedactTokens(logging.Filter):
    """Writes a ``token=`` query parameter (``?token=…``, ``&access_token=…``) of a log line as
    ``token=[redacted]``: uvicorn's access log prints every request's path and query."""

    PATTERN = re.compile(r"(?i)((?:^|[?&;])[a-z_]*token=)[^&;#\s]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self.PATTERN.sub(r"\1[redacted]", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


def prepare_data_dir(settings: Settings) -> None:
    """Create the data folder (0700) and a SQLite database file (0600) readable by their owner
    only. An existing folder keeps its mode (it may be shared: a warning says so); an existing
    database file of this user's is narrowed to 0600, with its -wal and -shm files."""
    from sqlalchemy.engine import make_url

    data = settings.data_dir
    if not data.exists():
        data.mkdir(mode=0o700, parents=True)
        os.chmod(data, 0o700)  # mkdir's mode is filtered by the umask
    elif stat.S_IMODE(data.stat().st_mode) & 0o077:
        logging.getLogger("bigworld.server").warning(
            "the data folder %s is open to other users (mode %o); expected 0700",
            data,
            stat.S_IMODE(data.stat().st_mode),
        )
    url = make_url(settings.resolved_database_url())
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    database = Path(url.database)
    if not database.exists() and database.parent.is_dir():
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        if path.exists() and path.stat().st_uid == os.getuid():
            os.chmod(path, 0o600)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.auth import AdminTokenError, configured_admin_token

    if args.admin_token_flag is not None:
        print(
            "bigworld: expected the admin token in BIGWORLD_ADMIN_TOKEN or a file named by "
            "--admin-token-file, got --admin-token (a command line is visible to every user "
            "in ps)",
            file=sys.stderr,
        )
        return 2
    settings = _settings(args)
    try:
        configured_admin_token(settings)
    except AdminTokenError as exc:
        print(f"bigworld: {exc}", file=sys.stderr)
        return 2
    prepare_data_dir(settings)
    config = uvicorn.Config(
        create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level
    )
    logging.getLogger("uvicorn.access").addFilter(RedactTokens())  # after Config set logging up
    uvicorn.Server(config).run()
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    from migrations import startup_lock, upgrade_forks, upgrade_to_head
    from world.store import make_engine

    settings = _settings(args)
    prepare_data_dir(settings)
    engine = make_engine(settings.resolved_database_url())
    try:
        with startup_lock(engine):  # a server may be starting on the same database
            revision = upgrade_to_head(engine)
            forks = upgrade_forks(engine)
        print(f"database at revision {revision}; {forks} fork stores migrated")
    finally:
        engine.dispose()
    return 0


def _create_agent(args: argparse.Namespace) -> int:
    from sqlalchemy.orm import Session

    from server.accounts import register_agent
    from server.app import prepare_database
    from server.errors import ApiError
    from server.models import AgentRow
    from server.runtime import Runtime
    from world.store import WorldRow

    settings = _settings(args)
    prepare_data_dir(settings)
    runtime = Runtime.build(settings)

    def work(session: Session, world_row: WorldRow) -> tuple[AgentRow, str]:
        made = register_agent(
            session, world_row, runtime.rules, args.name, args.role, args.max_open_episodes
        )
        session.commit()
        return made

    try:
        prepare_database(runtime)
        agent, token = runtime.world_transaction(work)
    except ApiError as exc:
        print(f"bigworld: {exc.message}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    print(f"id: {agent.id}\nname: {agent.name}\nrole: {agent.role}\ntoken: {token}")
    return 0


def main(argv: list[str] | None = None) -> int:
    memory.configure()  # every command, before any thread: the server and the agents alike
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else None
    own = (
        command in OWN_COMMANDS
        or command not in AGENT_COMMANDS  # None, --help, and a mistyped one: the full list
        or (
            command == "agent"
            and (len(argv) < 2 or argv[1] in AGENT_SUBCOMMANDS_HERE or argv[1] in ("-h", "--help"))
        )
    )
    if not own:
        return int(importlib.import_module("agents.cli").main(argv) or 0)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not hasattr(args, "run"):
            parser.error("expected a command; see bigworld --help")
        return int(args.run(args) or 0)
    except SystemExit as exit_:  # argparse's usage errors print themselves
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
            return 1
        return 0 if exit_.code is None else exit_.code
    except ValidationError as exc:  # a setting out of range, from its flag or BIGWORLD_<FLAG>
        print(f"bigworld {command}: error: {_invalid(exc)}", file=sys.stderr)
        return 2


def _invalid(exc: ValidationError) -> str:
    """Pydantic's errors about :class:`Settings` as one line naming each setting's variable."""
    return "; ".join(
        f"expected {'.'.join(map(str, e['loc']))} (its flag, or BIGWORLD_"
        f"{'_'.join(map(str, e['loc'])).upper()}) to be {e['msg'].removeprefix('Input should be ')}"
        f", got {e.get('input')!r}"
        for e in exc.errors()
    )


if __name__ == "__main__":
    sys.exit(main())
