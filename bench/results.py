"""The README's results table, written from the headline of every docs/benchmarks/*.json.

Each benchmark page ``docs/benchmarks/NAME.md`` keeps its latest figures in ``NAME.json`` beside
it, with the run's ``date``, ``commit`` and ``command``. A JSON with a top-level ``headline``
(``order``, ``label``, ``figure``, ``page``) gives one row of the table between the README's
``<!-- results:begin -->`` and ``<!-- results:end -->`` markers, in ``order``::

    .venv/bin/python bench/results.py            # rewrite the table in README.md
    .venv/bin/python bench/results.py --check    # exit 1 when README.md's table differs

The benchmarks that write their own JSON stamp it with :func:`provenance`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


@dataclass(frozen=True)
class Headline:
    """One row of the results table: a benchmark's headline figure and where it comes from."""

    order: int
    label: str
    figure: str
    page: str  # relative to the repository root, e.g. docs/benchmarks/soak.md
    date: str
    commit: str


def headlines(folder: Path = BENCHMARKS) -> list[Headline]:
    """The headline of every JSON in ``folder`` that has one, in their ``order``."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        body = json.loads(path.read_text())
        head = body.get("headline")
        if head is None:
            continue
        rows.append(
            Headline(
                order=int(head["order"]),
                label=str(head["label"]),
                figure=str(head["figure"]),
                page=str(head["page"]),
                date=str(body["date"]),
                commit=str(body["commit"]),
            )
        )
    return sorted(rows, key=lambda row: (row.order, row.page))


def table(rows: list[Headline]) -> str:
    """The markdown table of ``rows``, one headline figure a row, each linked to its page."""
    lines = ["| what | latest figure | measured |", "| --- | --- | --- |"]
    for row in rows:
        figure = row.figure.replace("|", "\\|")
        lines.append(f"| [{row.label}]({row.page}) | {figure} | {row.date}, {row.commit} |")
    return "\n".join(lines)


def current_table(readme: str) -> str:
    """The text between the README's results markers, without the newlines around it."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[start:end].strip("\n")


def rewritten(readme: str, new_table: str) -> str:
    """``readme`` with the text between its results markers replaced by ``new_table``."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + new_table + "\n" + readme[end:]


def git_commit() -> str:
    """The checked-out commit, short, with ``-dirty`` when the tree has uncommitted changes."""
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--exclude", "*"],  # a hash, never a tag
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return described.stdout.strip() or "unknown"


def provenance(argv: list[str] | None = None) -> dict[str, str]:
    """``date`` (UTC), ``commit`` and ``command`` of the run in progress, for its JSON."""
    command = shlex.join([".venv/bin/python", *(sys.argv if argv is None else argv)])
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    return {"date": today, "commit": git_commit(), "command": command}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the README's table differs"
    )
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite")
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    wanted = table(headlines())
    if current_table(text) == wanted:
        return 0
    if args.check:
        print(f"{args.readme}: the results table differs from docs/benchmarks/*.json; run")
        print("  .venv/bin/python bench/results.py")
        return 1
    args.readme.write_text(rewritten(text, wanted))
    print(f"{args.readme}: results table rewritten ({wanted.count(chr(10)) - 1} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
