"""One router per resource. ``create_app`` mounts ``ROUTERS`` as they are, and each of
``WORLD_ROUTERS`` (the routes of one world, with paths relative to it) twice: under
``MAIN_PREFIX`` for the main world and under ``WORLD_PREFIX`` for any world of the tree
(design §6)."""

from server.routes import (
    agents,
    dashboard,
    entities,
    episodes,
    events,
    forge,
    health,
    learning,
    metrics,
    policies,
    regions,
    steps,
    tasks,
    world,
    worlds,
)

MAIN_PREFIX = "/v1"
WORLD_PREFIX = "/v1/worlds/{world}"
ROUTERS = [
    health.router,
    metrics.router,
    agents.router,
    world.router,
    worlds.router,
    policies.router,
    forge.router,
    dashboard.router,
]
WORLD_ROUTERS = [
    episodes.router,
    steps.router,
    events.router,
    entities.router,
    tasks.router,
    learning.router,
    regions.router,
]
