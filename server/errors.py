"""Domain errors with their HTTP status, and the handlers that give every error one shape:
``{"error": {"code", "message", "details"}}`` (unknown paths, 405, 422 and 500 included). Codes
are ``world.contract.ErrorCode``'s: a bare string is refused by the types."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from world.contract import ErrorCode
from world.store import StoreError

log = logging.getLogger("bigworld.server")


class ApiError(Exception):
    """Raised by services for a request that cannot be served; carries its HTTP status."""

    status = 400
    code = ErrorCode.BAD_REQUEST

    def __init__(
        self,
        message: str,
        *,
        details: Any = None,
        code: ErrorCode | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers
        if code is not None:
            self.code = code


class Unauthorized(ApiError):
    status, code = 401, ErrorCode.UNAUTHORIZED


class Forbidden(ApiError):
    status, code = 403, ErrorCode.FORBIDDEN


class NotFound(ApiError):
    status, code = 404, ErrorCode.NOT_FOUND


class Conflict(ApiError):
    status, code = 409, ErrorCode.CONFLICT


class Unprocessable(ApiError):
    status, code = 422, ErrorCode.INVALID_REQUEST


class RateLimited(ApiError):
    status, code = 429, ErrorCode.RATE_LIMITED


class Unavailable(ApiError):
    status, code = 503, ErrorCode.UNAVAILABLE


_CODES = {  # the code of an error that names none, by its status
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.BODY_TOO_LARGE,
    422: ErrorCode.INVALID_REQUEST,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.UNAVAILABLE,
}


def own_error(exc: BaseException) -> ApiError | None:
    """``exc`` as the request's own error (the one its answer names), or None for a failure
    that is not the request's: the database or the world unavailable, or a fault. A batch
    answers each item's own error in its place and fails whole on any other."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, IntegrityError):
        return Conflict("the request conflicts with what is stored")
    if isinstance(exc, DataError):  # e.g. a NUL character, which PostgreSQL text cannot hold
        return Unprocessable(
            "a value in the request cannot be stored or compared", code=ErrorCode.INVALID_VALUE
        )
    return None


def schema_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic's errors as a ``validation_error`` answer's details: where, what, which kind."""
    return [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ]


def error_body(
    status: int, message: str, *, code: ErrorCode | None = None, details: Any = None
) -> dict[str, Any]:
    return {
        "error": {
            "code": str(code or _CODES.get(status, ErrorCode.ERROR)),
            "message": message,
            "details": details,
        }
    }


def error_response(
    status: int,
    message: str,
    *,
    code: ErrorCode | None = None,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(status, message, code=code, details=details), status_code=status, headers=headers
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    @app.exception_handler(IntegrityError)
    @app.exception_handler(DataError)
    async def _own(_: Request, raised: Exception) -> JSONResponse:
        exc = own_error(raised)
        assert exc is not None  # every exception this handles is the request's own
        return error_response(
            exc.status, exc.message, code=exc.code, details=exc.details, headers=exc.headers
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = schema_errors(exc.errors())
        if any(e["type"] == "json_invalid" for e in errors):
            return error_response(
                400,
                "the request body is not valid JSON",
                code=ErrorCode.MALFORMED_JSON,
                details=errors,
            )
        return error_response(
            422,
            "the request does not match the schema",
            code=ErrorCode.VALIDATION_ERROR,
            details=errors,
        )

    @app.exception_handler(OperationalError)
    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        log.warning("database unavailable: %s", exc.__class__.__name__)
        return error_response(
            503,
            "the database is unavailable; retry later",
            code=ErrorCode.DATABASE_UNAVAILABLE,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSONResponse:
        return error_response(
            503, str(exc), code=ErrorCode.WORLD_UNAVAILABLE, headers={"Retry-After": "1"}
        )

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal error", code=ErrorCode.INTERNAL_ERROR)
