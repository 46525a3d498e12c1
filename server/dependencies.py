"""Typed FastAPI dependencies: the runtime, a database session, the authenticated caller and
role checks (``Annotated`` aliases used by every router).

Those that never block are ``async``: FastAPI runs a plain ``def`` dependency in its thread
pool, one trip there and back per dependency and request, which costs more than the work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from server.auth import admit, check_role, digest_of, look_up
from server.credentials import Caller
from server.errors import NotFound, Unprocessable
from server.runtime import Runtime
from server.worlds import enlist
from world.contract import WORLD_NAME, ErrorCode


async def get_main_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


MainRuntimeDep = Annotated[Runtime, Depends(get_main_runtime)]


async def get_runtime(request: Request, main: MainRuntimeDep) -> Runtime:
    """The runtime of the world the path names (``/v1/worlds/{world}/…``), else the main
    world's; 404 ``unknown_world`` for a world that does not exist."""
    name = request.path_params.get("world")
    if name is None:
        return main
    runtime = main.forks.get(name) or await run_in_threadpool(main.world, name)
    if runtime is None:
        raise NotFound(f"no world {name!r}", code=ErrorCode.UNKNOWN_WORLD)
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_session(runtime: RuntimeDep) -> Iterator[Session]:
    """A read session of the world served (a fork's reads through its parent); write paths
    use ``Runtime.world_transaction`` instead."""
    with runtime.sessions() as session, runtime.parents(session):
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


async def get_caller(
    request: Request,
    runtime: MainRuntimeDep,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """``server.auth.authenticate``, with its database read (a token not cached) in the
    thread pool. Accounts are the main world's: a token works in every world."""
    # The peer's address as uvicorn sees it: behind a proxy, every client shares the proxy's.
    address = request.client.host if request.client is not None else "unknown"
    digest = digest_of(runtime, authorization, address)
    caller = runtime.callers.get(digest)
    if caller is None:
        caller = await run_in_threadpool(look_up, runtime, digest, address)
    return admit(runtime, digest, caller)


CallerDep = Annotated[Caller, Depends(get_caller)]


# A world's name in a path.
WorldPath = Annotated[str, Path(pattern=WORLD_NAME, max_length=32)]


async def enter_world(
    world: WorldPath,
    runtime: RuntimeDep,
    caller: CallerDep,
) -> None:
    """The routes of a world named in the path (``/v1/worlds/{world}/…``): a fork's store
    gets a row for each agent acting in it (its episodes and judgments refer to one)."""
    if runtime.lineage and caller.id not in runtime.members:
        await run_in_threadpool(enlist, runtime, caller)


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
                f"expected printable text in parameters, got {value!r}",
                code=ErrorCode.CONTROL_CHARACTERS,
            )
