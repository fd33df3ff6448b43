"""What every handler of `xfid serve` shares: the store it serves, its errors and status codes, routes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from xfid.errors import XfidError
from xfid.serve import auth, catalog
from xfid.serve.tokens import Identity
from xfid.sqlbackend import ServerLost

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
                                                                                      "unknown check",
                                                                                      "unknown summary"))):
        return 404
    return 400



def route(path: str, fn: Any, methods: list[str] | None = None) -> Route:
    return Route(path, fn, methods=methods or ["GET"])
