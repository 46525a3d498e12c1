"""The README's tables that code writes, each between its markers (``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``): the configuration table (``python -m server.settings``, name
``settings``) and the benchmarks' results table (``bench/results.py``, name ``results``). Each
command rewrites its table, or with ``--check`` changes nothing and exits 1 where it differs."""

from __future__ import annotations

import argparse
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _bounds(readme: str, name: str) -> tuple[int, int]:
    """Where the text between ``readme``'s ``name`` markers starts and ends."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    return readme.index(begin) + len(begin), readme.index(end)


def section(readme: str, name: str) -> str:
    """The text between ``readme``'s ``name`` markers, without the newlines around it."""
    start, end = _bounds(readme, name)
    return readme[start:end].strip("\n")


def with_section(readme: str, name: str, table: str) -> str:
    """``readme`` with the text between its ``name`` markers replaced by ``table``."""
    start, end = _bounds(readme, name)
    return readme[:start] + "\n" + table + "\n" + readme[end:]


def rewrite(
    argv: list[str] | None, *, name: str, table: str, what: str, source: str, command: str
) -> int:
    """The command line of a table's writer: rewrite the README's ``name`` section with
    ``table`` (``what``, made from ``source`` by ``command``), or with ``--check`` only say
    whether it differs."""
    parser = argparse.ArgumentParser(description=f"Rewrite README.md's {what}.")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the README's table differs"
    )
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite")
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    if section(text, name) == table:
        return 0
    if args.check:
        print(f"{args.readme}: the {what} differs from {source}; run")
        print(f"  {command}")
        return 1
    args.readme.write_text(with_section(text, name, table))
    print(f"{args.readme}: {what} rewritten")
    return 0
