"""The dashboard page at ``/`` and its script and style sheet under ``/static/``.

The files are static and need no token: the page asks for one (``/#token=…``, a fragment the
browser never sends, or a form) and calls the API with it from the browser. No build step and
nothing fetched from elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from server.errors import NotFound

STATIC = Path(__file__).resolve().parents[1] / "static"
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
# The page loads only its own files; the token stays out of referrers.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

router = APIRouter(tags=["dashboard"], include_in_schema=False)


def _file(name: str) -> FileResponse:
    path = STATIC / name
    media_type = MEDIA_TYPES.get(path.suffix)
    if media_type is None or not path.is_file():
        raise NotFound(f"no static file {name!r}")
    return FileResponse(path, media_type=f"{media_type}; charset=utf-8", headers=HEADERS)


@router.get("/")
def dashboard() -> FileResponse:
    return _file("index.html")


@router.get("/static/{name}")
def static_file(
    name: Annotated[str, PathParam(max_length=64, pattern=r"^[a-z][a-z0-9_-]*\.[a-z]+$")],
) -> FileResponse:
    return _file(name)
