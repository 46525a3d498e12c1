"""Schemathesis over /openapi.json against the real server: no request gets a 5xx answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from harness import ADMIN_TOKEN, Api, ServerProcess

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def _fuzz(server: ServerProcess, token: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        str(SCHEMATHESIS),
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        "not_a_server_error",
        "-H",
        f"Authorization: Bearer {token}",
        "--max-examples",
        os.environ.get("BIGWORLD_FUZZ_EXAMPLES", "25"),
        # One worker: hypothesis parses lambda sources with ast, and CPython 3.11's parser
        # fails ("AST constructor recursion depth mismatch") when two threads do it at once.
        "--workers",
        "1",
        "--seed",
        "1",
        "--request-timeout",
        "30",
        "--generation-database",
        "none",
        "--suppress-health-check",
        "all",
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp)


def test_openapi_describes_every_route_with_models(server: ServerProcess) -> None:
    spec = Api(server).get("/openapi.json").json()
    for path in (
        "/v1/agents",
        "/v1/world",
        "/v1/episodes",
        "/v1/episodes/{episode_id}/steps",
        "/v1/episodes/{episode_id}/abandon",
        "/v1/episodes/{episode_id}",
        "/v1/episodes/{episode_id}/judgments",
        "/v1/episodes/{episode_id}/expert",
        "/v1/policies",
        "/v1/policies/latest",
        "/v1/events",
        "/v1/things/{thing_id}",
        "/v1/places/{place_id}",
        "/v1/tasks",
        "/v1/tasks/{task_id}",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in spec["paths"], path
    step = spec["paths"]["/v1/episodes/{episode_id}/steps"]["post"]
    assert step["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/StepOut"
    )
    assert step["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody"
    )
    assert {"StepIn", "EpisodeStarted", "EventOut", "ThingOut", "TaskDetail"} <= set(
        spec["components"]["schemas"]
    )


def test_every_integer_parameter_fits_a_bigint(server: ServerProcess) -> None:
    """Each integer path and query parameter declares bounds within 0..2**63 - 1, so a new
    route cannot pass an unbounded id or tick to the database (where SQLite overflows)."""
    spec = Api(server).get("/openapi.json").json()
    checked = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                for alternative in schema.get("anyOf", [schema]):
                    if alternative.get("type") != "integer":
                        continue
                    where = f"{method.upper()} {path} {parameter['name']}"
                    assert 0 <= alternative.get("minimum", -1), where
                    assert alternative.get("maximum", 2**64) <= 2**63 - 1, where
                    checked += 1
    assert checked >= 10  # episode ids, thing ids, agent filter, ticks, limits, …


@pytest.mark.slow
def test_schemathesis_finds_no_server_error(process: ServerProcess, tmp_path: Path) -> None:
    policy = Api(process).agent("fuzz")
    begun = policy.post("/v1/episodes", json={})
    assert begun.status_code == 201
    for token in (str(policy.http.headers["Authorization"]).split()[1], ADMIN_TOKEN):
        result = _fuzz(process, token, tmp_path)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert httpx.get(process.url + "/readyz").status_code == 200
