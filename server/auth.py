"""Bearer tokens: hashed at rest, checked on every route, with roles, per-token rate limits
and a throttle on failed authentications per client address.

Tokens are 256-bit random strings; only their SHA-256 is stored, which is enough for keys of
that entropy (no salt or slow hash needed: nothing to brute-force). The admin token comes from
``BIGWORLD_ADMIN_TOKEN`` or a file (``--admin-token-file``), at least 128 bits, or is generated
at first start and written once to a 0600 file. A token found valid is trusted for
``auth_cache_s`` seconds per process (``server.credentials.CallerCache``); that is how long a
revoked or rotated token can keep working anywhere.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import secrets
import string
import time
from pathlib import Path

from sqlalchemy.orm import Session

from server import records
from server.credentials import Caller
from server.errors import Forbidden, RateLimited, Unauthorized
from server.limits import retry_after
from server.runtime import Runtime
from server.settings import Settings
from world.contract import ErrorCode

log = logging.getLogger("bigworld.server")
ADMIN_NAME = "admin"
ADMIN_TOKEN_FILE = "admin_token"
MIN_ADMIN_TOKEN_BITS = 128


def new_token() -> str:
    return "bw_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _unauthorized(message: str, *, invalid: bool) -> Unauthorized:
    """A 401 with the ``WWW-Authenticate`` challenge RFC 6750 asks for."""
    challenge = 'Bearer error="invalid_token"' if invalid else "Bearer"
    return Unauthorized(message, headers={"WWW-Authenticate": challenge})


def authenticate(runtime: Runtime, authorization: str | None, address: str) -> Caller:
    """The caller named by an ``Authorization: Bearer`` header (401 otherwise; 429 when the
    client ``address`` failed too often in the last minute, or when over the token's rate).
    A token is looked up in the database unless this process checked it within
    ``auth_cache_s``, so a revoked or rotated token stops working everywhere within that bound.
    Its parts, for a caller that keeps the database read off its event loop: :func:`digest_of`,
    ``runtime.callers.get``, :func:`look_up`, :func:`admit`."""
    digest = digest_of(runtime, authorization, address)
    caller = runtime.callers.get(digest) or look_up(runtime, digest, address)
    return admit(runtime, digest, caller)


def digest_of(runtime: Runtime, authorization: str | None, address: str) -> str:
    """The hash of the header's bearer token, after the failure throttle (no database)."""
    if not authorization:
        raise _unauthorized(
            "expected an 'Authorization: Bearer <token>' header, got none", invalid=False
        )
    wait = runtime.auth_failures.wait(address)
    if wait > 0:
        raise RateLimited(
            f"expected at most {runtime.settings.auth_failures_per_min} failed authentications "
            f"a minute from {address}; retry later",
            code=ErrorCode.AUTH_THROTTLED,
            headers=retry_after(wait),
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        runtime.auth_failures.fail(address)
        raise _unauthorized("expected an 'Authorization: Bearer <token>' header", invalid=True)
    return hash_token(token.strip())


def look_up(runtime: Runtime, digest: str, address: str) -> Caller:
    """The agent whose token hashes to ``digest``, read from the database and cached (401 for
    an unknown or revoked token, counted against ``address``)."""
    with runtime.sessions() as session:
        agent = records.agent_by_token(session=session, token_hash=digest)
    if agent is None or agent.revoked_at is not None:
        runtime.auth_failures.fail(address)
        raise _unauthorized("the bearer token is not valid", invalid=True)
    caller = Caller(agent.id, agent.name, agent.role, agent.avatar_id, agent.max_open_episodes)
    runtime.callers.put(digest, caller)
    return caller


def admit(runtime: Runtime, digest: str, caller: Caller) -> Caller:
    """``caller``, unless its token is over its rate (429)."""
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


class AdminTokenError(ValueError):
    """Raised at start when the configured admin token is missing, unreadable or too weak."""


def token_bits(token: str) -> float:
    """An estimate of a token's entropy in bits: its length times log2 of the smallest usual
    alphabet holding its characters (digits 10, hex digits 16, one case of letters with digits
    36, with ``-_`` 38, base64url 64, anything else 95), the length capped at 4 per distinct
    character so that repeats (``aaaa…``, ``abab…``) earn little. It cannot see a dictionary
    word: it refuses short or narrow tokens, it does not prove long ones random.
    ``secrets.token_urlsafe(32)`` scores about 256, ``secrets.token_hex(16)`` 128 and
    ``test-admin-token`` about 84."""
    chars = set(token)
    if not chars:
        return 0.0
    one_case = not (chars & set(string.ascii_lowercase) and chars & set(string.ascii_uppercase))
    if chars <= set(string.digits):
        alphabet = 10
    elif one_case and chars <= set(string.hexdigits):
        alphabet = 16
    elif chars <= set(string.ascii_letters + string.digits + "-_"):
        alphabet = 64 if not one_case else 38 if chars & set("-_") else 36
    else:
        alphabet = 95
    return min(len(token), 4 * len(chars)) * math.log2(alphabet)


def configured_admin_token(settings: Settings) -> str | None:
    """The admin token the settings name (``admin_token``, or the first line of
    ``admin_token_file``), checked for at least ``MIN_ADMIN_TOKEN_BITS``; None when neither."""
    if settings.admin_token is not None and settings.admin_token_file is not None:
        raise AdminTokenError(
            "expected the admin token from BIGWORLD_ADMIN_TOKEN or --admin-token-file, got both"
        )
    if settings.admin_token_file is not None:
        try:
            token = settings.admin_token_file.read_text().strip()
        except OSError as exc:
            raise AdminTokenError(
                f"expected a readable admin token file at {settings.admin_token_file}, "
                f"got {exc.strerror}"
            ) from exc
    elif settings.admin_token is not None:
        token = settings.admin_token.get_secret_value().strip()
    else:
        return None
    bits = token_bits(token)
    if bits < MIN_ADMIN_TOKEN_BITS:
        raise AdminTokenError(
            f"expected an admin token of at least {MIN_ADMIN_TOKEN_BITS} bits of entropy (e.g. "
            "python -c 'import secrets; print(secrets.token_hex(32))'), got one of about "
            f"{bits:.0f} bits ({len(token)} characters)"
        )
    return token


def bootstrap_admin(session: Session, settings: Settings) -> Path | None:
    """Make sure an admin credential exists; returns the token file written, if any.

    With an admin token configured (``configured_admin_token``), the admin agent's token
    becomes that one: a new one rotates it, and other processes stop taking the old one within
    ``auth_cache_s``. Otherwise a token is
    generated only when no admin exists yet, and written (never overwritten) to a 0600 file.
    """
    admin = records.agent_by_name(session=session, name=ADMIN_NAME)
    configured = configured_admin_token(settings)
    if configured is not None:
        digest = hash_token(configured)
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
