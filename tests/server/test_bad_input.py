"""Bad requests get their documented status and error shape, and change nothing: the world's
state hash and every table's row count are the same before and after each one."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from harness import ADMIN_TOKEN, Api, AppServer, db_state


def _chunks(total: int) -> Callable[[], object]:
    def body():  # no Content-Length: the server must count as the bytes stream in
        sent = 0
        while sent < total:
            yield b"x" * 8192
            sent += 8192

    return body


def test_bad_requests_are_refused_and_change_nothing(server: AppServer, admin: Api) -> None:
    ann, cy, watcher = admin.agent("ann"), admin.agent("cy"), admin.agent("watch", "observer")
    judge, coach = admin.agent("judge", "reward"), admin.agent("coach", "trainer")
    episode = ann.post("/v1/episodes", json={}).json()["episode_id"]
    assert (
        ann.post(f"/v1/episodes/{episode}/steps", json={"step": 1, "action": "look"}).status_code
        == 200
    )
    steps = f"/v1/episodes/{episode}/steps"
    anonymous, forged = Api(server), Api(server, "bw_forged")
    json_headers = {"Content-Type": "application/json"}

    cases: list[tuple[str, int, Callable[[], httpx.Response]]] = [
        (
            "malformed json",
            400,
            lambda: ann.post(steps, content=b'{"step": 2,', headers=json_headers),
        ),
        ("step as string", 422, lambda: ann.post(steps, json={"step": "2", "action": "look"})),
        ("action as number", 422, lambda: ann.post(steps, json={"step": 2, "action": 5})),
        ("unknown field", 422, lambda: ann.post(steps, json={"step": 2, "action": "look", "x": 1})),
        ("missing field", 422, lambda: ann.post(steps, json={"step": 2})),
        ("body is a list", 422, lambda: ann.post(steps, json=[1, 2])),
        ("step zero", 422, lambda: ann.post(steps, json={"step": 0, "action": "look"})),
        ("action too long", 422, lambda: ann.post(steps, json={"step": 2, "action": "l" * 513})),
        ("empty action", 422, lambda: ann.post(steps, json={"step": 2, "action": ""})),
        (
            "unknown decoding mode",
            422,
            lambda: ann.post(steps, json={"step": 2, "action": "look", "mode": "beam"}),
        ),
        (
            "non-finite temperature",
            422,
            lambda: ann.post(
                steps,
                content=b'{"step": 2, "action": "look", "temperature": NaN}',
                headers=json_headers,
            ),
        ),
        (
            "infinite temperature",
            422,
            lambda: ann.post(
                steps,
                content=b'{"step": 2, "action": "look", "temperature": Infinity}',
                headers=json_headers,
            ),
        ),
        (
            "negative temperature",
            422,
            lambda: ann.post(steps, json={"step": 2, "action": "look", "temperature": -1}),
        ),
        (
            "control characters",
            422,
            lambda: ann.post(steps, json={"step": 2, "action": "look\u0000"}),
        ),
        (
            "oversized body",
            413,
            lambda: ann.post(steps, content=b"x" * (70 * 1024), headers=json_headers),
        ),
        (
            "oversized chunked body",
            413,
            lambda: ann.post(steps, content=_chunks(200 * 1024)(), headers=json_headers),
        ),
        (
            "unknown episode",
            404,
            lambda: ann.post("/v1/episodes/999999/steps", json={"step": 1, "action": "look"}),
        ),
        (
            "episode id out of range",
            422,
            lambda: ann.post(f"/v1/episodes/{2**70}/steps", json={"step": 1, "action": "l"}),
        ),
        ("someone else's episode", 403, lambda: cy.post(steps, json={"step": 2, "action": "look"})),
        ("someone else's abandon", 403, lambda: cy.post(f"/v1/episodes/{episode}/abandon")),
        ("observer begins", 403, lambda: watcher.post("/v1/episodes", json={})),
        (
            "policy registers agent",
            403,
            lambda: ann.post("/v1/agents", json={"name": "eve", "role": "admin"}),
        ),
        ("no token", 401, lambda: anonymous.post(steps, json={"step": 2, "action": "look"})),
        ("forged token", 401, lambda: forged.get("/v1/world")),
        ("skipped index", 409, lambda: ann.post(steps, json={"step": 3, "action": "look"})),
        (
            "replayed index, other action",
            409,
            lambda: ann.post(steps, json={"step": 1, "action": "wait"}),
        ),
        ("second open episode", 409, lambda: ann.post("/v1/episodes", json={})),
        ("unknown task", 404, lambda: cy.post("/v1/episodes", json={"task_id": "nope"})),
        ("unknown family", 422, lambda: cy.post("/v1/episodes", json={"family": "juggling"})),
        (
            "duplicate agent",
            409,
            lambda: Api(server, ADMIN_TOKEN).post(
                "/v1/agents", json={"name": "ann", "role": "policy"}
            ),
        ),
        (
            "bad agent name",
            422,
            lambda: Api(server, ADMIN_TOKEN).post(
                "/v1/agents", json={"name": "A B", "role": "policy"}
            ),
        ),
        (
            "bad role",
            422,
            lambda: Api(server, ADMIN_TOKEN).post(
                "/v1/agents", json={"name": "zed", "role": "god"}
            ),
        ),
        (
            "score out of range",
            422,
            lambda: judge.post(
                f"/v1/episodes/{episode}/judgments",
                json=[{"step": 1, "score": 2, "model_version": "r"}],
            ),
        ),
        # Text PostgreSQL cannot store (NUL) or no database can encode (a lone surrogate) is
        # refused before any world work, on SQLite too, wherever it sits in a body.
        *(
            (
                f"NUL in a step's {field}",
                422,
                lambda field=field: ann.post(
                    steps, json={"step": 2, "action": "look", field: "a\u0000b"}
                ),
            )
            for field in ("prompt", "completion", "policy_version")
        ),
        (
            "lone surrogate in a prompt",
            422,
            lambda: ann.post(
                steps,
                content=b'{"step": 2, "action": "look", "prompt": "\\ud800"}',
                headers=json_headers,
            ),
        ),
        (
            "NUL in a rationale",
            422,
            lambda: judge.post(
                f"/v1/episodes/{episode}/judgments",
                json=[{"step": 1, "score": 1, "model_version": "r", "rationale": "ok\u0000"}],
            ),
        ),
        (
            "NUL in a policy path",
            422,
            lambda: coach.post("/v1/policies", json={"kind": "policy", "path": "/m\u0000"}),
        ),
        (
            "NUL in a policy config key",
            422,
            lambda: coach.post(
                "/v1/policies", json={"kind": "policy", "path": "/m", "config": {"a\u0000": 1}}
            ),
        ),
        (
            "NUL in a task spec",
            422,
            lambda: cy.post(
                "/v1/episodes",
                json={"task": {"family": "go_to", "params": {"place_name": "x\u0000"}}},
            ),
        ),
        (
            "NUL in the forge's config",
            422,
            lambda: admin.patch("/v1/forge/config", json={"lm_url": "http://lm\u0000"}),
        ),
        ("bad cursor", 422, lambda: ann.get("/v1/events", params={"cursor": "abc"})),
        ("bad place id", 422, lambda: ann.get("/v1/places/kitchen")),
        ("NUL in a filter", 422, lambda: ann.get("/v1/episodes", params={"task": "a\u0000b"})),
        ("unknown path", 404, lambda: ann.get("/v1/nothing-here")),
        ("wrong method", 405, lambda: ann.delete(f"/v1/episodes/{episode}")),
    ]
    for name, status, send in cases:
        before = db_state(server.database_url)
        reply = send()
        assert reply.status_code == status, f"{name}: {reply.status_code} {reply.text[:300]}"
        error = reply.json()["error"]
        assert isinstance(error["code"], str) and error["message"] and "details" in error, name
        assert db_state(server.database_url) == before, f"{name} changed the database"

    # The episode is intact and carries on from step 2.
    assert ann.post(steps, json={"step": 2, "action": "look"}).status_code == 200


def test_ids_cursors_and_ticks_beyond_a_bigint_are_refused(server: AppServer, admin: Api) -> None:
    """A 20-digit cursor was a 500 on SQLite (OverflowError) that dropped the kept-alive
    connection; past 2**63 - 1 every id, cursor and tick is a 422 before any query."""
    watcher = admin.agent("watch", "observer")
    biggest = 2**63 - 1
    for route in ("/v1/episodes", "/v1/events", "/v1/policies", "/v1/forge/decisions"):
        for cursor in ("9" * 20, str(biggest + 1)):
            reply = watcher.get(route, params={"cursor": cursor})
            assert reply.status_code == 422, f"{route} cursor {cursor}: {reply.text[:300]}"
            assert reply.json()["error"]["code"] == "validation_error"
            assert reply.headers.get("connection") != "close", route
        page = watcher.get(route, params={"cursor": str(biggest)})
        assert page.status_code == 200 and page.json()["items"] == [], route
    for path, params in (
        (f"/v1/episodes/{biggest + 1}", {}),
        (f"/v1/things/{biggest + 1}", {}),
        ("/v1/episodes", {"agent": str(biggest + 1)}),
        ("/v1/events", {"from_tick": str(2**63)}),
        ("/v1/things/1", {"at_tick": str(2**63)}),
        ("/v1/metrics/learning", {"to_tick": str(2**63)}),
    ):
        reply = watcher.get(path, params=params)
        assert reply.status_code == 422, f"{path} {params}: {reply.text[:300]}"
    assert watcher.get(f"/v1/episodes/{biggest}").status_code == 404
    assert watcher.get("/v1/world").status_code == 200  # the same connection still serves


def test_rate_limit_per_token(tmp_path: Path) -> None:
    proc = AppServer(
        f"sqlite:///{tmp_path / 'w.db'}",
        tmp_path / "data",
        BIGWORLD_RATE_LIMIT_PER_S="0.5",
        BIGWORLD_RATE_LIMIT_BURST="3",
    ).start()
    try:
        watcher = Api(proc).agent("watch", "observer")  # the admin's bucket pays for this
        statuses = [watcher.get("/v1/world").status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = watcher.get("/v1/world")
        assert (
            limited.json()["error"]["code"] == "rate_limited"
            and int(limited.headers["Retry-After"]) >= 1
        )
        assert Api(proc).agent("other", "observer").get("/v1/world").status_code == 200
    finally:
        proc.stop()


def test_a_low_rate_limits_from_the_first_second(tmp_path: Path) -> None:
    """``--rate-limit 5`` with no burst set limited nothing: the burst was fixed at 10,000."""
    proc = AppServer(
        f"sqlite:///{tmp_path / 'w.db'}", tmp_path / "data", BIGWORLD_RATE_LIMIT_PER_S="5"
    ).start()
    try:
        watcher = Api(proc).agent("watch", "observer")
        started = time.monotonic()
        statuses = [watcher.get("/v1/world").status_code for _ in range(12)]
        refilled = int((time.monotonic() - started) * 5) + 1
        assert statuses.count(200) <= 5 + refilled and 429 in statuses, statuses
    finally:
        proc.stop()


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_open_routes_need_no_token(server: AppServer, path: str) -> None:
    reply = Api(server).get(path)
    assert reply.status_code == 200
    if path == "/metrics":
        assert (
            "bigworld_world_tick 0" in reply.text
            and "# TYPE bigworld_step_seconds histogram" in reply.text
        )
