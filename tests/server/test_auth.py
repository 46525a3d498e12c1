"""Credentials: revoking an agent's token and rotating the admin token reach every server
process within ``auth_cache_s``; 401s carry the Bearer challenge; failed authentications are
throttled per client address."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import ADMIN_TOKEN, Api, AppServer, ServerProcess
from sqlalchemy import select

from server.models import AgentRow
from world.store import make_engine, session_factory

CACHE_S = 2.0  # the default auth_cache_s: how long a process may trust a token it checked
SLACK_S = 1.5  # polling and request time on a loaded two-core machine


def _admin_id(database_url: str) -> int:
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            found = session.scalar(select(AgentRow.id).where(AgentRow.name == "admin"))
    finally:
        engine.dispose()
    assert found is not None
    return found


def _world(api: Api) -> Callable[[], int]:
    return lambda: api.get("/v1/world").status_code


def _refused_within(request: Callable[[], int], bound_s: float) -> float:
    """Seconds until ``request`` answers 401, polling; fails if that takes over ``bound_s``."""
    started = time.monotonic()
    while (status := request()) != 401:
        assert status == 200, status
        elapsed = time.monotonic() - started
        assert elapsed <= bound_s, f"still answered {status} after {elapsed:.1f} s"
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_revoked_token_is_refused_and_the_admin_is_rotated_not_revoked(
    server: AppServer, admin: Api
) -> None:
    ann = admin.agent("ann")
    assert ann.get("/v1/world").status_code == 200
    watcher = admin.agent("watcher", "observer")
    assert watcher.delete(f"/v1/agents/{ann.id}").status_code == 403

    revoked = admin.delete(f"/v1/agents/{ann.id}")
    assert revoked.status_code == 200, revoked.text
    body = revoked.json()
    assert body["name"] == "ann" and body["role"] == "policy" and body["avatar_id"] == "ann"
    refused = ann.get("/v1/world")  # at once on the process that revoked it
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert refused.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    again = admin.delete(f"/v1/agents/{ann.id}")
    assert again.status_code == 200 and again.json()["revoked_at"] == body["revoked_at"]

    assert admin.delete("/v1/agents/999999").status_code == 404
    own = admin.delete(f"/v1/agents/{_admin_id(server.database_url)}")
    assert own.status_code == 409 and own.json()["error"]["code"] == "admin_agent"
    taken = admin.post("/v1/agents", json={"name": "ann", "role": "policy"})
    assert taken.status_code == 409  # a revoked agent keeps its name and history
    assert watcher.get("/v1/world").status_code == 200


@pytest.mark.slow
def test_revocation_and_rotation_reach_every_process(database_url: str, tmp_path: Path) -> None:
    """Two servers over one database, both having just trusted a token: revoked through one,
    the other refuses it within auth_cache_s; a third started with a new admin token makes
    the old one fail on both within the same bound."""
    first = ServerProcess(database_url, tmp_path / "a").start()
    second = ServerProcess(database_url, tmp_path / "b")
    third = None
    try:
        second.start()
        ann = Api(first).agent("ann")
        token = ann.http.headers["Authorization"]
        on_second = Api(second)
        on_second.http.headers["Authorization"] = token
        assert ann.get("/v1/world").status_code == 200
        assert on_second.get("/v1/world").status_code == 200  # now trusted there too

        assert Api(first, ADMIN_TOKEN).delete(f"/v1/agents/{ann.id}").status_code == 200
        waited = _refused_within(_world(on_second), CACHE_S + SLACK_S)
        print(f"revoked token refused by the other process after {waited:.2f} s")

        old = [Api(s, ADMIN_TOKEN) for s in (first, second)]
        assert all(api.get("/v1/world").status_code == 200 for api in old)
        new_token = secrets.token_urlsafe(32)
        third = ServerProcess(database_url, tmp_path / "c", admin_token=new_token).start()
        for api in old:
            waited = _refused_within(_world(api), CACHE_S + SLACK_S)
            print(f"rotated admin token refused after {waited:.2f} s")
        made = old[0].post("/v1/agents", json={"name": "bob", "role": "observer"})
        assert made.status_code == 401
        assert (
            Api(first, new_token)
            .post("/v1/agents", json={"name": "bob", "role": "observer"})
            .status_code
            == 201
        )
    finally:
        for proc in (first, second, third):
            if proc is not None:
                proc.stop()


def test_401s_carry_the_bearer_challenge(server: AppServer) -> None:
    bare = Api(server).get("/v1/world")
    assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
    wrong = Api(server).get("/v1/world", headers={"Authorization": "Basic abc"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'


def test_failed_authentications_are_throttled_per_address(tmp_path: Path) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'world.db'}", tmp_path / "data", BIGWORLD_AUTH_FAILURES_PER_MIN="5"
    ).start()
    try:
        admin = Api(proc, ADMIN_TOKEN)
        guesser = Api(proc, "bw_guess")
        assert [guesser.get("/v1/world").status_code for _ in range(5)] == [401] * 5
        throttled = guesser.get("/v1/world")
        assert throttled.status_code == 429
        assert throttled.json()["error"]["code"] == "auth_throttled"
        assert 1 <= int(throttled.headers["retry-after"]) <= 60
        # The whole address waits, a valid token included: else a guess that is right would
        # still be told so, and the guessing would go on unhindered.
        assert admin.get("/v1/world").status_code == 429
        assert Api(proc).get("/v1/world").status_code == 401  # no token: not a guess
    finally:
        proc.stop()
