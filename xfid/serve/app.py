"""The ASGI application: one store (opened per request, in a worker thread), auth, errors, headers.

Every handler is one call into `xfid.api.XfidStore`, as every command is. Errors are the
library's `XfidError` messages (passwords masked, as the CLI's `Error:`) as JSON under /api and
as a page elsewhere: 400 for a bad request, 401/403 for credentials, 404 for an unknown issue
or check, 413 for an upload over the limit, 503 when the database cannot be reached.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from xfid.errors import XfidError
from xfid.serve import pages, routes_api
from xfid.serve.served import (
    DEFAULT_MAX_UPLOAD,
    HEADERS,
    STATIC,
    NotFound,
    Served,
    TooLarge,
    route,
    status_of,
)
from xfid.sqlbackend import mask

__all__ = ["DEFAULT_MAX_UPLOAD", "NotFound", "Served", "TooLarge", "make_app", "route", "status_of"]


def error_response(request: Request, e: Exception) -> Response:
    if isinstance(e, XfidError):
        status, message = status_of(e), mask(str(e))
    else:
        status, message = 500, "internal error: the server could not answer (its log has the details)"
        print(mask("".join(traceback.format_exception(e))), file=sys.stderr)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if request.url.path.startswith("/api"):
        return JSONResponse({"error": message, "status": status}, status, headers=headers)
    if status == 401 and request.method == "GET":
        from starlette.responses import RedirectResponse

        return RedirectResponse(f"/login?next={request.url.path}", 303)
    return pages.render(request, "error.html", {"message": message, "status": status}, status)


class SecurityHeaders:
    """Pure ASGI middleware: the CSP and the other headers on every response."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, send_with)


def make_app(store: str | None = None, config: Any = None, *, max_upload: int = DEFAULT_MAX_UPLOAD) -> Starlette:
    """The server over one store; opens it once now (so a bad store or config fails at start)."""
    served = Served(store, config, max_upload)
    with contextlib.closing(served.open()) as api:
        served.config = api.config
        served.key(api.backend(create=True).conn)
    routes = [*routes_api.routes(served), *pages.routes(served),
              Mount("/static", app=StaticFiles(directory=STATIC), name="static")]

    async def on_error(request: Request, exc: Exception) -> Response:
        return error_response(request, exc)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_response(request, NotFound(f"no page {request.url.path} (see / or /api)"))

    app = Starlette(routes=routes, exception_handlers={XfidError: on_error, Exception: on_error, 404: not_found,
                                                       405: not_found})
    app.add_middleware(SecurityHeaders)
    app.state.served = served
    return app


