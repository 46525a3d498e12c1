"""When the database goes away under a running server, requests get 503 in the error shape
(not 500), and /readyz says not ready; /healthz (liveness) still answers."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from dbfixtures import PG_ADMIN_URL, fresh_database
from harness import ADMIN_TOKEN, ServerProcess
from sqlalchemy import create_engine, text


@pytest.mark.postgres
def test_unreachable_database_is_a_503(tmp_path: Path) -> None:
    with fresh_database("postgres", tmp_path) as url:
        server = ServerProcess(url, tmp_path / "data").start()
        try:
            auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            assert httpx.get(server.url + "/v1/world", headers=auth).status_code == 200
            admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
            admin.dispose()
            for path in ("/v1/world", "/v1/events"):
                reply = httpx.get(server.url + path, headers=auth)
                assert reply.status_code == 503, (path, reply.text)
                assert reply.json()["error"]["code"] == "database_unavailable"
            ready = httpx.get(server.url + "/readyz")
            assert (
                ready.status_code == 503 and ready.json()["error"]["code"] == "database_unavailable"
            )
            assert httpx.get(server.url + "/healthz").status_code == 200
        finally:
            server.stop()
