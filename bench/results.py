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

import datetime
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from server.readme import rewrite, section, with_section

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks"


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
    """The README's results table as it stands."""
    return section(readme, "results")


def rewritten(readme: str, new_table: str) -> str:
    """``readme`` with its results table replaced by ``new_table``."""
    return with_section(readme, "results", new_table)


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
    return rewrite(
        argv,
        name="results",
        table=table(headlines()),
        what="results table",
        source="docs/benchmarks/*.json",
        command=".venv/bin/python bench/results.py",
    )


if __name__ == "__main__":
    raise SystemExit(main())
