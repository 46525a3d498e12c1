"""Builds the FastAPI application; nothing else. ``create_app(settings)`` wires the runtime,
the middleware, the error handlers and one router per resource; at start-up it migrates the
database to head, creates the world if there is none and makes sure an admin credential exists."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from migrations import startup_lock, upgrade_forks, upgrade_to_head
from server.auth import bootstrap_admin
from server.background import background_work
from server.dependencies import enter_world, plain_text_parameters
from server.errors import install_error_handlers
from server.limits import BodySizeLimit
from server.metrics import Metrics
from server.openenv import mount as mount_openenv
from server.routes import MAIN_PREFIX, ROUTERS, WORLD_PREFIX, WORLD_ROUTERS
from server.runtime import Runtime
from server.settings import Settings
from world.store import ensure_world
from world.store.database import fill_pool

log = logging.getLogger("bigworld.server")


def prepare_database(runtime: Runtime) -> None:
    """Migrate to head (the forks' stores too), create the world row, bootstrap the admin
    (idempotent)."""
    settings = runtime.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with startup_lock(runtime.engine):
        upgrade_to_head(runtime.engine)
        upgrade_forks(runtime.engine)
        _prepare_world(runtime)


def _prepare_world(runtime: Runtime) -> None:
    settings = runtime.settings
    with runtime.world_transaction_unlocked() as session:
        seed = ensure_world(session, settings.seed, runtime.rules).meta.seed
        if seed != settings.seed:
            log.warning("the stored world has seed %s; ignoring seed %s", seed, settings.seed)
        bootstrap_admin(session, settings)
        session.commit()


class RequestMetrics:
    """ASGI middleware counting requests by method, route template and status, and timing
    them by method and route template. A world's routes are mounted with a prefix that their
    templates leave out: it is put back (``MAIN_PREFIX``, or ``WORLD_PREFIX``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.world_routes = {id(route) for router in WORLD_ROUTERS for route in router.routes}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            if id(route) in self.world_routes:
                forked = "world" in scope.get("path_params", {})
                path = (WORLD_PREFIX if forked else MAIN_PREFIX) + path
            self.metrics.request(scope["method"], path, status, time.perf_counter() - started)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    runtime = Runtime.build(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        started = time.perf_counter()
        prepare_database(runtime)
        if runtime.engine.dialect.name == "sqlite":  # on PostgreSQL each is a server process
            fill_pool(runtime.engine)
        log.info(
            "bigworld ready in %.2fs on %s",
            time.perf_counter() - started,
            runtime.engine.url.render_as_string(),
        )
        async with background_work(runtime):
            yield
        runtime.close()

    app = FastAPI(
        title="bigworld",
        version="1.0.0",
        summary="One persistent, never-resetting text world for continual learning, over HTTP.",
        lifespan=lifespan,
        dependencies=[Depends(plain_text_parameters)],
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    for router in WORLD_ROUTERS:
        app.include_router(router, prefix=MAIN_PREFIX)
        app.include_router(router, prefix=WORLD_PREFIX, dependencies=[Depends(enter_world)])
    mount_openenv(app, runtime)
    app.add_middleware(RequestMetrics, metrics=runtime.metrics)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    return app
