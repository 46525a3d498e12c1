"""Typed FastAPI dependencies: the runtime, a database session, the authenticated caller and
role checks (``Annotated`` aliases used by every router).

Those that never block are ``async``: FastAPI runs a plain ``def`` dependency in its thread
pool, one trip there and back per dependency and request, which costs more than the work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from server.auth import admit, check_role, digest_of, look_up
from server.credentials import Caller
from server.errors import Unprocessable
from server.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_session(runtime: RuntimeDep) -> Iterator[Session]:
    """A read session; write paths use ``Runtime.world_transaction`` instead."""
    with runtime.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


async def get_caller(
    request: Request,
    runtime: RuntimeDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """``server.auth.authenticate``, with its database read (a token not cached) in the
    thread pool."""
    # The peer's address as uvicorn sees it: behind a proxy, every client shares the proxy's.
    address = request.client.host if request.client is not None else "unknown"
    digest = digest_of(runtime, authorization, address)
    caller = runtime.callers.get(digest)
    if caller is None:
        caller = await run_in_threadpool(look_up, runtime, digest, address)
    return admit(runtime, digest, caller)


CallerDep = Annotated[Caller, Depends(get_caller)]


def role(*roles: str) -> object:
    async def dependency(caller: CallerDep) -> Caller:
        return check_role(caller, roles)

    return Depends(dependency)


AdminDep = Annotated[Caller, role("admin")]
PolicyDep = Annotated[Caller, role("policy")]
RewardDep = Annotated[Caller, role("reward")]
TrainerDep = Annotated[Caller, role("trainer", "admin")]


async def plain_text_parameters(request: Request) -> None:
    """Refuse control characters (NUL included) in query and path parameters with a 422, the
    same on every database (PostgreSQL text cannot hold NUL; SQLite can)."""
    values = [*request.query_params.values(), *(str(v) for v in request.path_params.values())]
    for value in values:
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise Unprocessable(
                f"expected printable text in parameters, got {value!r}", code="control_characters"
            )
