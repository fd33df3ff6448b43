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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from xfid.errors import XfidError
from xfid.serve import auth, catalog
from xfid.serve.tokens import Identity
from xfid.sqlbackend import ServerLost, mask

DEFAULT_MAX_UPLOAD = 512 * 1024 * 1024
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
           (b"cache-control", b"no-store")]
STATIC = Path(__file__).parent / "static"


class TooLarge(XfidError):
    """An upload over the server's limit (413)."""


class NotFound(XfidError):
    """An unknown page, issue or check (404)."""


@dataclass
class Served:
    """What the server serves: the store and config every request opens, the upload limit."""

    store: str | None
    config: Any
    max_upload: int = DEFAULT_MAX_UPLOAD
    webhook_timeout: float = 5.0
    _key: bytes | None = field(default=None, repr=False)

    def open(self) -> Any:
        from xfid.api import open_store

        return open_store(self.store, self.config)

    def key(self, conn: Any) -> bytes:
        if self._key is None:
            catalog.setup(conn)
            self._key = catalog.secret(conn)
        return self._key

    @contextlib.contextmanager
    def session(self, request: Request, role: str | None, what: str,
                create: bool = False) -> Iterator[tuple[Any, Identity | None]]:
        """(the opened XfidStore, who is asking), after checking `who` may act as `role`."""
        api = self.open()
        try:
            conn = api.backend(create=create).conn
            who, _ = auth.identify(conn, self.key(conn), request.headers, request.cookies)
            if role is not None:
                auth.require(who, role, what)
            request.state.who = who
            yield api, who
        finally:
            api.close()

    def csrf(self, request: Request) -> str:
        session = request.cookies.get(auth.SESSION_COOKIE, "")
        return auth.csrf_for(self._key or b"", session) if session else ""


def status_of(e: XfidError) -> int:
    from xfid.errors import TrackerError

    if isinstance(e, auth.AuthError):
        return e.status
    if isinstance(e, TooLarge):
        return 413
    if isinstance(e, ServerLost):
        return 503
    if isinstance(e, NotFound) or (isinstance(e, TrackerError) and str(e).startswith(("unknown issue",
                                                                                      "unknown check"))):
        return 404
    return 400


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
    from xfid.serve.pages import render

    return render(request, "error.html", {"message": message, "status": status}, status)


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
    from xfid.serve import pages, routes_api

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


def route(path: str, fn: Any, methods: list[str] | None = None) -> Route:
    return Route(path, fn, methods=methods or ["GET"])
