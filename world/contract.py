"""What the HTTP contract's server and its clients share, defined once: the codes of its errors,
where a server listens by default, the main world's name, what a world's name may be, and which
routes are a world's (the bodies are in ``world.schemas``).

Every error answer has the shape ``{"error": {"code", "message", "details"}}``; its ``code``
is one of :class:`ErrorCode`, which the server raises by name (``server.errors``), and which
``docs/design.md``'s error table lists (a test compares the two). It lives in ``world`` because
both the server and the client side (``agents``) may import ``world``, and neither the other.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every ``error.code`` the server sends. A code names what went wrong, the HTTP status
    how to react (``docs/design.md``, "Errors")."""

    # by status, where nothing more precise applies
    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    BODY_TOO_LARGE = "body_too_large"
    INVALID_REQUEST = "invalid_request"
    RATE_LIMITED = "rate_limited"
    INTERNAL_ERROR = "internal_error"
    UNAVAILABLE = "unavailable"
    ERROR = "error"  # a status none of these names
    # requests
    MALFORMED_JSON = "malformed_json"
    VALIDATION_ERROR = "validation_error"
    INVALID_VALUE = "invalid_value"
    CONTROL_CHARACTERS = "control_characters"
    AUTH_THROTTLED = "auth_throttled"
    # agents
    AGENT_EXISTS = "agent_exists"
    ADMIN_AGENT = "admin_agent"
    # episodes and steps
    UNKNOWN_FAMILY = "unknown_family"
    NO_TASK = "no_task"
    INVALID_TASK = "invalid_task"
    TASK_AND_TASK_ID = "task_and_task_id"
    EPISODE_OPEN = "episode_open"
    OPEN_EPISODE_LIMIT = "open_episode_limit"
    EPISODE_ENDED = "episode_ended"
    INVALID_ACTION = "invalid_action"
    STEP_OUT_OF_ORDER = "step_out_of_order"
    STEP_MISMATCH = "step_mismatch"
    UNKNOWN_STEP = "unknown_step"
    VOTE_OUT_OF_RANGE = "vote_out_of_range"
    # history
    GONE = "gone"
    TOO_MANY_BUCKETS = "too_many_buckets"
    # the forge
    FORGE_DISABLED = "forge_disabled"
    FORGE_PAUSED = "forge_paused"
    INVALID_CONFIG = "invalid_config"
    UNSOLVABLE_TASK = "unsolvable_task"
    # worlds and forks
    UNKNOWN_WORLD = "unknown_world"
    WORLD_EXISTS = "world_exists"
    WORLD_IS_MAIN = "world_is_main"
    WORLD_HAS_FORKS = "world_has_forks"
    TICK_IN_FUTURE = "tick_in_future"
    TICK_BEFORE_FORK = "tick_before_fork"
    TICK_UNREADABLE = "tick_unreadable"
    # the database
    DATABASE_UNAVAILABLE = "database_unavailable"
    WORLD_UNAVAILABLE = "world_unavailable"
    NOT_MIGRATED = "not_migrated"


# Where a server listens and keeps its files unless told otherwise (server.settings), so that
# the tools beside it (the client, the demo) find it there.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_SERVER = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
DEFAULT_DATA_DIR = "./bigworld-data"

MAIN_WORLD = "main"  # the world a path without /v1/worlds/{name} means
WORLD_NAME = r"^[a-z][a-z0-9-]{0,31}$"  # a world's name: main's, or a fork's
# The routes of one world (design §6), each served under /v1 for main and under
# /v1/worlds/{name} for any world: a client of a fork sends them under its name.
WORLD_PATHS = (
    "/v1/world",
    "/v1/episodes",
    "/v1/steps",
    "/v1/events",
    "/v1/things",
    "/v1/places",
    "/v1/tasks",
    "/v1/regions",
    "/v1/metrics/learning",
)
