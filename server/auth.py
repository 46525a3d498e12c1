"""Bearer tokens: hashed at rest, checked on every route, with roles and per-token rate limits.

Tokens are 256-bit random strings; only their SHA-256 is stored, which is enough for keys of
that entropy (no salt or slow hash needed: nothing to brute-force). The admin token comes from
``BIGWORLD_ADMIN_TOKEN`` or is generated at first start and written once to a 0600 file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import time
from pathlib import Path

from sqlalchemy.orm import Session

from server.errors import Forbidden, RateLimited, Unauthorized
from server.limits import retry_after
from server.runtime import Caller, Runtime
from server.settings import Settings
from world.store import records

log = logging.getLogger("bigworld.server")
ADMIN_NAME = "admin"
ADMIN_TOKEN_FILE = "admin_token"


def new_token() -> str:
    return "bw_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def authenticate(runtime: Runtime, authorization: str | None) -> Caller:
    """The caller named by an ``Authorization: Bearer`` header (401 otherwise; 429 when over
    the token's rate)."""
    if not authorization:
        raise Unauthorized("expected an 'Authorization: Bearer <token>' header, got none")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("expected an 'Authorization: Bearer <token>' header")
    digest = hash_token(token.strip())
    caller = runtime.callers.get(digest)
    if caller is None:
        with runtime.sessions() as session:
            agent = records.agent_by_token(session=session, token_hash=digest)
        if agent is None:
            raise Unauthorized("the bearer token is not valid")
        caller = Caller(agent.id, agent.name, agent.role, agent.avatar_id)
        runtime.callers[digest] = caller
    wait = runtime.limiter.take(digest)
    if wait > 0:
        raise RateLimited(
            f"over {runtime.settings.rate_limit_per_s:g} requests/s for this token",
            headers=retry_after(wait),
        )
    return caller


def check_role(caller: Caller, roles: tuple[str, ...]) -> Caller:
    if roles and caller.role not in roles:
        raise Forbidden(
            f"expected role {' or '.join(roles)}, got {caller.role}",
            details={"required": list(roles), "role": caller.role},
        )
    return caller


def bootstrap_admin(session: Session, settings: Settings) -> Path | None:
    """Make sure an admin credential exists; returns the token file written, if any.

    With ``admin_token`` set, the admin agent's token becomes that one. Otherwise a token is
    generated only when no admin exists yet, and written (never overwritten) to a 0600 file.
    """
    admin = records.agent_by_name(session=session, name=ADMIN_NAME)
    if settings.admin_token is not None:
        digest = hash_token(settings.admin_token.get_secret_value())
        if admin is None:
            records.add_agent(
                session=session,
                name=ADMIN_NAME,
                role="admin",
                token_hash=digest,
                avatar_id=None,
                now=time.time(),
            )
        elif admin.token_hash != digest:
            admin.token_hash = digest
        return None
    if admin is not None or records.any_admin(session=session) is not None:
        return None
    token = new_token()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = settings.data_dir / ADMIN_TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    records.add_agent(
        session=session,
        name=ADMIN_NAME,
        role="admin",
        token_hash=hash_token(token),
        avatar_id=None,
        now=time.time(),
    )
    log.warning("generated the admin token into %s (mode 0600)", path)
    return path
