"""One router per resource; ``ROUTERS`` is what ``create_app`` mounts."""

from server.routes import (
    agents,
    entities,
    episodes,
    events,
    health,
    metrics,
    policies,
    tasks,
    world,
)

ROUTERS = [
    health.router,
    metrics.router,
    agents.router,
    world.router,
    episodes.router,
    events.router,
    entities.router,
    tasks.router,
    policies.router,
]
