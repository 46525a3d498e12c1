"""A real bigworld server in a subprocess: the one way tests and benchmarks start a process.

``start_server`` runs ``bigworld serve`` (through ``server.cli.main``) on a free loopback port
with its own data folder and admin token, in its own process group, and waits for ``/readyz``.
``LiveServer.stop`` ends it politely, ``LiveServer.kill`` with SIGKILL (for crash tests);
``LiveServer.restart`` starts it again over the same data folder and database. The server tests
that need a process (tests/server/harness.py, ``ServerProcess``) use it with their defaults.

tests/ is not a package: a conftest that wants this module puts tests/ on ``sys.path`` first.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 60.0  # seconds; migrations on a fresh database included
SERVE = "import sys; from server.cli import main; sys.exit(main(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LiveServer:
    """A running server: ``url``, the ``admin_token`` (None: the server makes one into its
    data folder), its ``data_dir`` and its log file. ``env`` holds ``BIGWORLD_*`` settings;
    those of the test process are not passed on."""

    data_dir: Path
    admin_token: str | None
    port: int
    database_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.data_dir / f"server-{self.port}.log"  # processes may share a data folder

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=bearer(token), timeout=60.0)

    def start(self) -> LiveServer:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("BIGWORLD_")}
        # The admin token travels in the environment: a command line is visible in ps.
        token = {"BIGWORLD_ADMIN_TOKEN": self.admin_token} if self.admin_token is not None else {}
        env = {
            **inherited,
            "BIGWORLD_HOST": "127.0.0.1",
            "BIGWORLD_PORT": str(self.port),
            "BIGWORLD_DATA_DIR": str(self.data_dir),
            **token,
            **({"BIGWORLD_DATABASE_URL": self.database_url} if self.database_url else {}),
            **self.env,
        }
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVE, "serve"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so kill() takes the workers too
            )
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/readyz", timeout=2.0).status_code < 300:
                    return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _signal(self, sig: signal.Signals, wait: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)
        try:
            self.process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=wait)

    def stop(self) -> None:
        """SIGTERM to the process group; SIGKILL if it has not gone after 10 s."""
        self._signal(signal.SIGTERM, 10.0)

    def kill(self) -> None:
        """SIGKILL to the process group at once: a crash, not a shutdown."""
        self._signal(signal.SIGKILL, 10.0)

    def restart(self) -> LiveServer:
        self.stop()
        return self.start()


def bearer(token: str | None) -> dict[str, str]:
    """The Authorization header of ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def start_server(
    data_dir: Path, *, database_url: str | None = None, env: dict[str, str] | None = None
) -> LiveServer:
    """Start a server over ``data_dir`` (and ``database_url``, default SQLite inside it)."""
    # Prefixed like the server's own tokens: one beginning with '-' would read as a flag to the
    # CLI's --token (one start in 64 failed so).
    token = "bw_" + secrets.token_urlsafe(24)
    server = LiveServer(data_dir, token, free_port(), database_url, env or {})
    return server.start()


@contextlib.contextmanager
def live_server(data_dir: Path, **kwargs: object) -> Iterator[LiveServer]:
    server = start_server(data_dir, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def readme_snippets(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks of the README's section ``### heading`` (its text up to
    the next heading), for tests that run them as a user would."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index(f"\n### {heading}\n")
    end = min(
        i for i in (readme.find("\n## ", start + 1), readme.find("\n### ", start + 1)) if i > 0
    )
    return re.findall(rf"```{language}\n(.*?)```", readme[start:end], flags=re.DOTALL)
