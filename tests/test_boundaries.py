"""The import rules of design §2, checked on the source: who may import whom."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("world", "forge", "server", "agents")

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
