"""One router per resource; ``ROUTERS`` is what ``create_app`` mounts."""

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
    tasks,
    world,
    worlds,
)

ROUTERS = [
    health.router,
    metrics.router,
    agents.router,
    world.router,
    worlds.router,
    episodes.router,
    events.router,
    entities.router,
    tasks.router,
    policies.router,
    forge.router,
    learning.router,
    regions.router,
    dashboard.router,
]
