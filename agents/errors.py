"""Errors raised by the bigworld client: one hierarchy, one class per documented HTTP status."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Raised when the server answers with an error, or cannot be reached at all.

    ``status`` is the HTTP status (``None`` when no answer came); ``code``, ``message`` and
    ``details`` are the fields of the server's ``{"error": {...}}`` body (design §6).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        details: Any = None,
    ) -> None:
        super().__init__(message if status is None else f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class BadRequestError(ClientError):
    """Raised on 400: the request was malformed."""


class AuthenticationError(ClientError):
    """Raised on 401: no token, or a token the server does not know."""


class ForbiddenError(ClientError):
    """Raised on 403: the token's role may not do this, or the episode is someone else's."""


class NotFoundError(ClientError):
    """Raised on 404: no such route, episode, thing, place or task."""


class ConflictError(ClientError):
    """Raised on 409: a step index that is neither the next one nor a replay, an ended
    episode, or a second open episode for the same avatar."""


class PayloadTooLargeError(ClientError):
    """Raised on 413: the request body is over the server's limit (64 KiB)."""


class ValidationError(ClientError):
    """Raised on 422: the body or query did not match the route's schema."""


class RateLimitedError(ClientError):
    """Raised on 429 once the client's retries are spent."""


class ServerError(ClientError):
    """Raised on a 5xx answer once the client's retries are spent."""


class UnavailableError(ServerError):
    """Raised on 503 (database unavailable) once the client's retries are spent."""


class UnreachableError(ClientError):
    """Raised when no HTTP answer came (refused connection, dropped connection, timeout)
    once the client's retries are spent."""


_BY_STATUS: dict[int, type[ClientError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    503: UnavailableError,
}


def error_for(status: int, body: Any, fallback_text: str = "") -> ClientError:
    """Build the error for an HTTP answer with ``status`` and decoded JSON ``body``.

    A body that is not the documented error shape still gives an error, with the raw text as
    its message, so that a proxy's HTML page does not hide the status.
    """
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ClientError)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return cls(
            str(error.get("message", "")),
            status=status,
            code=str(error.get("code", "error")),
            details=error.get("details"),
        )
    text = fallback_text.strip()[:500] or "the server gave no error body"
    return cls(
        f"expected an error body {{'error': {{code, message, details}}}}, got: {text}",
        status=status,
        code="http_error",
    )
