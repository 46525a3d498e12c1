"""The README stays a short guide for users: at most 250 lines, its results table made from the
benchmarks' JSON, and every relative link in it and in docs/ reaching a file (and a heading).

No server is started: ``bench/results.py`` is read as a module.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))  # bench/ is no package
from results import BENCHMARKS, current_table, headlines, main, rewritten, table  # noqa: E402

from server.readme import README  # noqa: E402

MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
PAGES = sorted([README, *(REPO / "docs").rglob("*.md")])


def slug(heading: str) -> str:
    """The anchor a markdown heading gets, as tests/test_docs.py reads design.md's."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def relative_links(page: Path) -> list[tuple[str, str]]:
    """(path, fragment) of each link in ``page`` that is no URL, outside code blocks."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    links = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        links.append((path, fragment))
    return links


def test_the_readme_has_at_most_250_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_the_results_table_is_the_one_the_benchmarks_json_makes() -> None:
    wanted = table(headlines())
    assert current_table(README.read_text()) == wanted, (
        "README.md's results table differs from docs/benchmarks/*.json; "
        "run .venv/bin/python bench/results.py"
    )


def test_results_check_fails_on_a_stale_table_and_the_rewrite_mends_it(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    rows = headlines()
    assert len(rows) >= 2
    stale.write_text(rewritten(README.read_text(), table(rows[:-1])))  # a row missing
    assert main(["--check", "--readme", str(stale)]) == 1
    assert main(["--readme", str(stale)]) == 0
    assert main(["--check", "--readme", str(stale)]) == 0
    assert stale.read_text() == README.read_text()


def test_the_results_table_has_one_row_a_benchmark_and_at_most_20() -> None:
    rows = headlines()
    assert 0 < len(rows) <= 20
    assert len({row.page for row in rows}) == len(rows), "two headlines link the same page"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_a_file_and_its_heading(page: Path) -> None:
    for path, fragment in relative_links(page):
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.relative_to(REPO)} links to {path}, which does not exist"
        if fragment and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.MULTILINE)
            assert fragment in {slug(h) for h in headings}, (
                f"{page.relative_to(REPO)} links to {path}#{fragment}, which no heading has"
            )


def test_every_benchmark_page_has_its_json_and_every_json_its_page() -> None:
    pages = {p.stem for p in BENCHMARKS.glob("*.md")}
    figures = {p.stem for p in BENCHMARKS.glob("*.json")}
    assert pages, "no benchmark pages in docs/benchmarks"
    assert pages - figures == set(), f"pages without their JSON: {sorted(pages - figures)}"
    assert figures - pages == set(), f"JSON without its page: {sorted(figures - pages)}"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.json")), ids=lambda p: p.name)
def test_every_benchmark_json_says_when_and_how_and_links_its_own_page(path: Path) -> None:
    body = json.loads(path.read_text())
    assert {"date", "commit", "command"} <= body.keys(), f"{path.name} lacks date/commit/command"
    if "headline" in body:
        assert body["headline"]["page"] == f"docs/benchmarks/{path.stem}.md"
        assert body["date"] and body["commit"], f"{path.name} has a headline but no run"
