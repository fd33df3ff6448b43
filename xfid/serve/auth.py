"""Who a request is: `Authorization: Bearer TOKEN`, or the browser's signed session cookie.

The session cookie holds the token's name, a prefix of its digest and an expiry, signed with
HMAC(server secret); it is HttpOnly, SameSite=Strict and Secure over TLS. Revoking the token
ends its sessions at their next request. Every form carries a CSRF value derived from the
session (HMAC(secret, "csrf" + cookie)); the sign-in form uses a double-submit cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

from xfid.errors import XfidError
from xfid.serve import tokens
from xfid.serve.tokens import Identity
from xfid.sqlbackend import Database

SESSION_COOKIE = "xfid_session"
LOGIN_COOKIE = "xfid_login"
SESSION_S = 12 * 3600


class AuthError(XfidError):
    """No valid credentials (401) or a role too low for the action (403)."""

    def __init__(self, message: str, status: int = 401):
        super().__init__(message)
        self.status = status


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()[:40]


def session_value(key: bytes, who: Identity, now: float | None = None) -> str:
    payload = {"n": who.name, "d": who.digest[:32], "e": int((now or time.time()) + SESSION_S)}
    body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{body}.{_sign(key, 'session|' + body)}"


def from_session(conn: Database, key: bytes, value: str) -> Identity | None:
    body, _, sig = value.partition(".")
    if not body or not hmac.compare_digest(sig, _sign(key, "session|" + body)):
        return None
    try:
        payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        name, prefix, expiry = str(payload["n"]), str(payload["d"]), int(payload["e"])
    except (ValueError, KeyError, TypeError):
        return None
    if expiry < time.time():
        return None
    who = tokens.by_name(conn, name)
    if who is None or not hmac.compare_digest(who.digest[:32], prefix):
        return None
    return who


def csrf_for(key: bytes, session: str) -> str:
    return _sign(key, "csrf|" + session)


def new_login_nonce() -> str:
    return secrets.token_urlsafe(24)


def identify(conn: Database, key: bytes, headers: Any, cookies: dict[str, str]) -> tuple[Identity | None, str | None]:
    """(the identity, the session cookie it came from or None for a bearer token / nobody).

    Raises:
        AuthError: a bearer token was given but is unknown or revoked (401).
    """
    auth = headers.get("authorization", "")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("the Authorization header must be `Bearer TOKEN` (a token from `xfid token create`)")
        who = tokens.verify(conn, key, token.strip())
        if who is None:
            raise AuthError("unknown or revoked token (ask an admin for one: `xfid token create NAME --role ROLE`)")
        return who, None
    value = cookies.get(SESSION_COOKIE)
    if value:
        who = from_session(conn, key, value)
        if who is not None:
            return who, value
    return None, None


def require(who: Identity | None, role: str, what: str) -> Identity:
    """`who`, if it may act as `role`; else AuthError 401 (nobody) or 403 (a lower role)."""
    if who is None:
        raise AuthError(f"sign in to {what}: send `Authorization: Bearer TOKEN` (a token from `xfid token create`)")
    if not who.may(role):
        raise AuthError(f"token {who.name!r} has the role {who.role}; to {what} needs {role} or above", 403)
    return who
