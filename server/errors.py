"""Domain errors with their HTTP status, and the handlers that give every error one shape:
``{"error": {"code", "message", "details"}}`` (unknown paths, 405, 422 and 500 included)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from world.store import StoreError

log = logging.getLogger("bigworld.server")


class ApiError(Exception):
    """Raised by services for a request that cannot be served; carries its HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        details: Any = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers
        if code is not None:
            self.code = code


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class Unprocessable(ApiError):
    status, code = 422, "invalid_request"


class RateLimited(ApiError):
    status, code = 429, "rate_limited"


class Unavailable(ApiError):
    status, code = 503, "unavailable"


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    503: "unavailable",
}


def error_body(
    status: int, message: str, *, code: str | None = None, details: Any = None
) -> dict[str, Any]:
    return {
        "error": {
            "code": code or _CODES.get(status, "error"),
            "message": message,
            "details": details,
        }
    }


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, code=code, details=details), status_code=status, headers=headers
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(
            exc.status, exc.message, code=exc.code, details=exc.details, headers=exc.headers
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {
                "loc": list(e.get("loc", ())),
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
            for e in exc.errors()
        ]
        if any(e["type"] == "json_invalid" for e in errors):
            return error_response(
                400, "the request body is not valid JSON", code="malformed_json", details=errors
            )
        return error_response(
            422, "the request does not match the schema", code="validation_error", details=errors
        )

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        return error_response(409, "the request conflicts with what is stored", code="conflict")

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        # e.g. a NUL character in a query string, which PostgreSQL text cannot hold
        return error_response(
            422, "a value in the request cannot be stored or compared", code="invalid_value"
        )

    @app.exception_handler(OperationalError)
    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        log.warning("database unavailable: %s", exc.__class__.__name__)
        return error_response(
            503,
            "the database is unavailable; retry later",
            code="database_unavailable",
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSONResponse:
        return error_response(503, str(exc), code="world_unavailable", headers={"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal error", code="internal_error")
