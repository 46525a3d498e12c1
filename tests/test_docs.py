"""The documents that ship with the code agree with it: every route of ``/openapi.json`` is in
the API table of docs/design.md §6, every "design §N" names a section that exists, the error
table lists exactly the error codes, and the clients type their answers with the server's own
models. (The README's configuration table is made from the settings: tests/server/test_settings.py.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from agents.client import AsyncBigWorldClient, BigWorldClient
from server.app import create_app
from server.routes import MAIN_PREFIX, ROUTERS, WORLD_PREFIX, WORLD_ROUTERS
from server.settings import Settings
from world.contract import WORLD_PATHS, ErrorCode

REPO = Path(__file__).resolve().parents[1]
DESIGN = REPO / "docs" / "design.md"
README = REPO / "README.md"
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)[^`]*`")


def sections(text: str) -> dict[int, str]:
    """Section number -> its text, for the ``## N. Title`` headings of a markdown file."""
    parts = re.split(r"^## (\d+)\. .*$", text, flags=re.MULTILINE)
    return {int(number): body for number, body in zip(parts[1::2], parts[2::2], strict=True)}


def table_rows(text: str) -> list[list[str]]:
    """The cells of each markdown table row in ``text`` (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows[1:] if rows else rows


def shape(method: str, path: str) -> str:
    """``GET /v1/things/{}``: the route with its path parameters' names left out."""
    return method + " " + re.sub(r"\{[^}]*\}", "{}", path)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    return create_app(Settings(data_dir=tmp_path_factory.mktemp("data")))  # never started


def documented_routes() -> set[str]:
    """The API table's routes, and each route of one world (``WORLD_ROUTERS``) also under
    ``/v1/worlds/{world}``, as §6 says once for all of them."""
    api = sections(DESIGN.read_text())[6]
    listed = {shape(m, p) for row in table_rows(api) for m, p in ROUTE.findall(row[0])}
    assert "/v1/worlds/{world}/…" in api, "§6 no longer says where a world's routes are served"
    per_world = {
        shape(method, route.path)
        for router in WORLD_ROUTERS
        for route in router.routes
        for method in getattr(route, "methods", None) or ()
    }
    for relative in per_world:
        method, path = relative.split(" ", 1)
        if f"{method} /v1{path}" in listed:
            listed.add(f"{method} /v1/worlds/{{}}{path}")
    return listed


def test_every_openapi_route_is_in_the_design_api_table(app: FastAPI) -> None:
    served = {
        shape(method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    missing = sorted(served - documented_routes())
    assert not missing, f"routes of /openapi.json missing from docs/design.md §6: {missing}"


def test_every_route_in_the_design_api_table_is_served() -> None:
    mounted = [("", router) for router in ROUTERS] + [
        (prefix, router) for router in WORLD_ROUTERS for prefix in (MAIN_PREFIX, WORLD_PREFIX)
    ]  # as create_app mounts them
    served = {  # the routers' routes, those left out of the schema (the dashboard) too
        shape(method, prefix + route.path)
        for prefix, router in mounted
        for route in router.routes
        for method in getattr(route, "methods", None) or ()
    }
    unknown = sorted(documented_routes() - served)
    assert not unknown, f"docs/design.md §6 lists routes the app does not serve: {unknown}"


def test_every_design_section_cited_exists() -> None:
    numbers = set(sections(DESIGN.read_text()))
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    cited = 0
    for name in files:
        path = REPO / name
        if path.suffix not in {".py", ".md", ".html", ".js", ".toml"} or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        # Inside the design and the README a bare §N is a section of the design too.
        pattern = r"§(\d+)" if path in (DESIGN, README) else r"design(?:\.md)?\)?,? §(\d+)"
        for match in re.finditer(pattern, text):
            line = text.count("\n", 0, match.start()) + 1
            assert int(match.group(1)) in numbers, f"{name}:{line} cites design §{match[1]}"
            cited += 1
    assert cited > 20


def test_readme_links_into_the_design_reach_a_heading() -> None:
    headings = re.findall(r"^#+ (.+)$", DESIGN.read_text(), flags=re.MULTILINE)
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    for anchor in re.findall(r"docs/design\.md#([\w-]+)", README.read_text()):
        assert anchor in slugs, f"README links to docs/design.md#{anchor}, which no heading has"


def test_the_design_error_table_lists_exactly_the_error_codes() -> None:
    """Every ``ErrorCode`` once in docs/design.md's error table, and nothing else; the codes
    the server raises are the enum's (``server.errors`` takes nothing else, by its types)."""
    text = DESIGN.read_text()
    table = text[text.index("<!-- error-codes:begin -->") : text.index("<!-- error-codes:end -->")]
    listed = [row[0].strip("`") for row in table_rows(table)]
    assert sorted(listed) == sorted(code.value for code in ErrorCode)
    assert len(listed) == len(set(listed)), "a code listed twice"


def test_no_error_code_is_a_bare_string_in_the_server() -> None:
    """``code="…"`` anywhere in the server or the forge would be a code outside the enum."""
    bare = [
        f"{path.relative_to(REPO)}:{n}"
        for folder in ("server", "forge")
        for path in sorted((REPO / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"\bcode\s*=\s*[\"']", line) or re.search(r"\bcode = [\"']", line)
    ]
    assert not bare, "error codes as bare strings:\n" + "\n".join(bare)


def test_the_client_s_world_paths_are_the_routes_of_one_world(app: FastAPI) -> None:
    """``world.contract.WORLD_PATHS`` (the paths a client of a fork sends under its name) cover
    every route the server serves once per world, and each is served under a fork's name."""
    served = {
        MAIN_PREFIX + route.path
        for router in WORLD_ROUTERS
        for route in router.routes
        if getattr(route, "methods", None)
    }
    covered = {path for path in served if any(
        path == prefix or path.startswith(prefix + "/") for prefix in WORLD_PATHS
    )}  # fmt: skip
    assert covered == served, f"world routes no client path covers: {sorted(served - covered)}"
    in_a_fork = {shape("", path) for path in app.openapi()["paths"]}
    unserved = [
        p for p in WORLD_PATHS if not any(
            s == shape("", f"{WORLD_PREFIX}{p.removeprefix(MAIN_PREFIX)}")
            or s.startswith(shape("", f"{WORLD_PREFIX}{p.removeprefix(MAIN_PREFIX)}") + "/")
            for s in in_a_fork
        )
    ]  # fmt: skip
    assert not unserved, f"client paths no fork serves: {unserved}"


# The client's typed calls and the routes that answer them.
TYPED_CALLS = {
    "create_agent": ("POST", "/v1/agents"),
    "me": ("GET", "/v1/agents/me"),
    "begin_episode": ("POST", "/v1/episodes"),
    "step": ("POST", "/v1/episodes/{episode_id}/steps"),
}


@pytest.mark.parametrize("name", sorted(TYPED_CALLS))
def test_the_client_parses_answers_with_the_server_s_models(name: str) -> None:
    """What a client call returns is the model its route answers with (``world.schemas``),
    in both clients: a field the server adds or renames reaches the client with it."""
    method, path = TYPED_CALLS[name]
    served = [(route, route.path) for router in ROUTERS for route in router.routes] + [
        (route, MAIN_PREFIX + route.path) for router in WORLD_ROUTERS for route in router.routes
    ]
    answered = [
        route.response_model
        for route, at in served
        if isinstance(route, APIRoute) and at == path and method in route.methods
    ]
    assert len(answered) == 1, f"{method} {path} is served {len(answered)} times"
    for client in (BigWorldClient, AsyncBigWorldClient):
        returned = get_type_hints(getattr(client, name))["return"]
        assert returned is answered[0], f"{client.__name__}.{name} returns {returned}"


def test_the_openenv_client_speaks_the_mount_s_models() -> None:
    """The typed OpenEnv client's action, observation and state are the classes the mount
    builds its server with (``world.openenv_schemas``), not copies."""
    pytest.importorskip("openenv")
    from agents.openenv_client import BigWorldOpenEnv
    from server.openenv import environment

    (base,) = BigWorldOpenEnv.__orig_bases__  # type: ignore[attr-defined]
    action, observation, state = get_args(base)
    served = environment.BigWorldEnvironment
    step = get_type_hints(served.step)
    assert step["action"] in get_args(action), f"the client sends {action}, the mount takes {step}"
    assert step["return"] is observation
    assert get_type_hints(served.state.fget)["return"] is state
