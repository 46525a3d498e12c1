"""The ``bigworld`` command line: help everywhere, db upgrade, agent create, the generated admin
token file, forwarding to the agents side, and a server process free of agents/torch."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from harness import REPO, ServerProcess

from migrations import at_head, head_revision
from server.auth import token_bits
from world.store import make_engine


def bigworld(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BIGWORLD_")}
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**clean, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )


@pytest.mark.parametrize(
    "args", [(), ("serve",), ("db",), ("db", "upgrade"), ("agent",), ("agent", "create")]
)
def test_every_command_has_help(args: tuple[str, ...]) -> None:
    result = bigworld(*args, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: bigworld" in result.stdout


def test_serve_flags_are_also_environment_variables() -> None:
    out = bigworld("serve", "--help").stdout
    for flag in (
        "--host",
        "--port",
        "--data-dir",
        "--database-url",
        "--seed",
        "--admin-token-file",
        "--heartbeat",
    ):
        assert flag in out
    assert "BIGWORLD_DATABASE_URL" in out and "BIGWORLD_HEARTBEAT;" in out
    assert "--admin-token " not in out  # a token on the command line is visible in ps


def test_serve_refuses_an_admin_token_on_the_command_line_or_a_weak_one(tmp_path: Path) -> None:
    flag = bigworld("serve", "--data-dir", str(tmp_path), "--admin-token", secrets.token_hex(32))
    assert flag.returncode == 2
    assert "BIGWORLD_ADMIN_TOKEN" in flag.stderr and "visible to every user in ps" in flag.stderr
    weak = bigworld("serve", "--data-dir", str(tmp_path), env={"BIGWORLD_ADMIN_TOKEN": "s3cret!"})
    assert weak.returncode == 2
    assert weak.stderr.startswith("bigworld: expected an admin token of at least 128 bits")
    assert "s3cret" not in weak.stderr  # the message names the size, never the token
    short = tmp_path / "short"
    short.write_text("test-admin-token\n")
    from_file = bigworld("serve", "--data-dir", str(tmp_path), "--admin-token-file", str(short))
    assert from_file.returncode == 2 and "about 84 bits" in from_file.stderr
    assert not (tmp_path / "world.db").exists()  # refused before anything was created


def test_token_bits_estimates_what_random_tokens_carry() -> None:
    assert token_bits(secrets.token_hex(16)) >= 128
    assert token_bits(secrets.token_urlsafe(32)) >= 250
    assert token_bits("test-admin-token") < 128
    assert token_bits("a" * 200) < 20 and token_bits("ab" * 100) < 40
    assert token_bits(secrets.token_hex(15)) < 128


def test_admin_token_from_a_file_and_private_data_files(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    assert bigworld("db", "upgrade", "--data-dir", str(data)).returncode == 0
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for path in data.glob("world.db*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    token = secrets.token_urlsafe(32)
    token_file = tmp_path / "admin-token"
    token_file.write_text(token + "\n")
    served = tmp_path / "served"  # made by the harness (for its log): mode as the umask says
    server = ServerProcess(
        f"sqlite:///{served / 'world.db'}",
        served,
        admin_token=None,
        BIGWORLD_ADMIN_TOKEN_FILE=str(token_file),
    )
    server.start()
    try:
        written = list(served.glob("world.db*"))
        assert {"world.db", "world.db-wal", "world.db-shm"} <= {path.name for path in written}
        assert {stat.S_IMODE(path.stat().st_mode) for path in written} == {0o600}
        made = httpx.post(
            server.url + "/v1/agents",
            headers={"Authorization": f"Bearer {token}"},
            json={"name": "ann", "role": "observer"},
        )
        assert made.status_code == 201, made.text
    finally:
        server.stop()


def test_upgrade_create_agent_and_admin_token_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = bigworld("db", "upgrade", "--data-dir", str(data))
    assert result.returncode == 0 and head_revision() in result.stdout, result.stderr
    engine = make_engine(f"sqlite:///{data / 'world.db'}")
    assert at_head(engine)
    engine.dispose()

    made = bigworld("agent", "create", "--name", "ann", "--role", "policy", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    token = dict(line.split(": ", 1) for line in made.stdout.splitlines())["token"]
    token_file = data / "admin_token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    admin_token = token_file.read_text().strip()
    assert (
        bigworld(
            "agent", "create", "--name", "ann", "--role", "policy", "--data-dir", str(data)
        ).returncode
        == 1
    )

    # Started without --admin-token: the generated token works and its file stays as written.
    server = ServerProcess(f"sqlite:///{data / 'world.db'}", data, admin_token=None).start()
    try:
        ann = httpx.get(server.url + "/v1/world", headers={"Authorization": f"Bearer {token}"})
        assert ann.status_code == 200 and ann.json()["avatars"] == 1
        admin = httpx.post(
            server.url + "/v1/agents",
            headers={"Authorization": f"Bearer {admin_token}"},
            json={"name": "bob", "role": "observer"},
        )
        assert admin.status_code == 201
        assert token_file.read_text().strip() == admin_token
    finally:
        server.stop()


def test_other_commands_go_to_the_agents_side() -> None:
    result = bigworld("history", "--help")
    assert result.returncode == 0 and "history" in result.stdout


def test_server_process_never_imports_agents_or_torch(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom server.app import create_app\nfrom server.settings import Settings\n"
        f"create_app(Settings(data_dir={str(tmp_path)!r}))\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('agents', 'torch', 'transformers', 'vllm')]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
