"""The import rules of design §2, checked on the source: who may import whom, and that no
module of the project imports itself back through others."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("world", "forge", "server", "agents")
# Every folder of Python the project has, for the cycle check: scripts and tests count too.
SOURCE_FOLDERS = (*PACKAGES, "bench", "tests", "migrations", "docs")

# package -> top-level modules it must never import
FORBIDDEN = {
    "world": {"server", "forge", "agents", "torch", "transformers", "vllm", "fastapi"},
    "forge": {"server", "agents", "torch", "transformers", "vllm"},
    "server": {"agents", "torch", "transformers", "vllm"},
    "agents": {"server", "forge"},
}
# The world's core is pure: only world.store may touch SQLAlchemy; nothing reads the clock.
WORLD_CORE_FORBIDDEN = {"sqlalchemy", "time", "datetime", "random"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_only_what_design_allows(package: str) -> None:
    bad = []
    for path in _sources(package):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
            if package == "agents" and name.startswith(("world.store", "world.state")):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "forbidden imports:\n" + "\n".join(bad)


def test_world_core_is_pure() -> None:
    bad = []
    for path in _sources("world"):
        if "store" in path.relative_to(ROOT / "world").parts:
            continue
        for name in _imports(path):
            if name.split(".")[0] in WORLD_CORE_FORBIDDEN:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "the world core must stay pure:\n" + "\n".join(bad)


def test_server_process_loads_no_model_code() -> None:
    """Building the app must not pull in torch, transformers or agents/."""
    code = (
        "import sys, server.app\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'transformers', 'vllm', 'agents'})\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def _module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project (a package is its
    ``__init__``)."""
    files = {}
    for folder in SOURCE_FOLDERS:
        for path in _sources(folder):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file: at the top, inside functions
    and under ``TYPE_CHECKING`` alike. An import names the deepest module it reaches
    (``from world import tasks`` is world.tasks, ``from world.tasks import Task`` is
    world.tasks), as import-linter counts them. A script's bare ``import learning`` or a
    test's ``from harness import ...`` is the file of that name beside it, else the one file
    of that name in its top folder (the folders tests put on ``sys.path``)."""

    def deepest(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def beside(dotted: str) -> str | None:
        here = path.relative_to(ROOT).parent
        sibling = ".".join((*here.parts, dotted))
        if deepest(sibling) is not None and deepest(sibling) != deepest(".".join(here.parts)):
            return deepest(sibling)
        top = here.parts[0]
        named = [m for m in modules if m.startswith(f"{top}.") and m.endswith(f".{dotted}")]
        return named[0] if len(named) == 1 else None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" for alias in node.names]
            targets = [t if t in modules else source for t in targets]
        else:
            continue
        for target in targets:
            top = target.split(".")[0]
            module = deepest(target) if top in SOURCE_FOLDERS else beside(target)
            if module is not None and module != name:
                found.add(module)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle per strongly connected group of modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def test_no_module_imports_itself_back() -> None:
    """A module may import another only if that one does not lead back to it: the parts of the
    project can be read (and loaded) one at a time, bottom up."""
    modules = _module_files()
    graph = {name: _imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph["world.state"] >= {"world.dynamics", "world.worldgen", "world.values"}
    assert "world.oracle" in graph["world.sampling"]  # imports are resolved to modules
    cycles = _cycles(graph)
    assert not cycles, "modules that import each other in a circle:\n" + "\n".join(
        " <-> ".join(group) for group in cycles
    )


def test_a_cycle_is_found() -> None:
    """The check itself: two modules importing each other form a cycle; a chain does not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
