"""API tokens and their roles: created, listed, revoked, verified; stored as HMAC digests only.

A token is `xfid_` + 43 URL-safe characters (256 random bits), shown once at creation. The
catalog keeps HMAC-SHA256(server secret, token): with 256 random bits a slow hash adds nothing
(nobody can enumerate the token space), and a digest alone never authenticates.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from xfid.errors import XfidError
from xfid.serve import catalog
from xfid.sqlbackend import Database
from xfid.store import write_tx

ROLES = ("reader", "writer", "admin")
RANK = {r: i for i, r in enumerate(ROLES)}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
PREFIX = "xfid_"


class TokenError(XfidError):
    """A bad token name or role, a name taken or unknown."""


@dataclass(frozen=True)
class Identity:
    """Who a request acts as: the token's name (the recorded actor) and its role."""

    name: str
    role: str
    digest: str

    def may(self, role: str) -> bool:
        return RANK[self.role] >= RANK[role]


def digest(secret: bytes, token: str) -> str:
    return hmac.new(secret, token.encode("utf-8"), hashlib.sha256).hexdigest()


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise TokenError(f"token name {name!r}: use 1-64 letters, digits and . _ @ - (starting with a letter "
                         "or digit), e.g. ci-runner or alice")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise TokenError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    return role


def create(conn: Database, name: str, role: str, created_by: str) -> str:
    """A new token for `name` with `role`; returns the token (the only time it exists in clear).

    Raises:
        TokenError: a bad name or role, or a token of that name exists (revoke it first).
    """
    check_name(name)
    check_role(role)
    catalog.setup(conn)
    key = catalog.secret(conn)
    token = PREFIX + secrets.token_urlsafe(32)
    with write_tx(conn):
        if conn.execute("SELECT 1 FROM serve_tokens WHERE name=?", (name,)).fetchone():
            raise TokenError(f"a token named {name!r} exists; revoke it first (`xfid token revoke {name}`)")
        conn.execute("INSERT INTO serve_tokens (name, role, digest, created_at, created_by) VALUES (?,?,?,?,?)",
                     (name, role, digest(key, token), catalog.now_stamp(), created_by))
    return token


def listing(conn: Database) -> list[dict[str, Any]]:
    """The tokens by name: name, role, created_at, created_by (never a digest)."""
    catalog.setup(conn)
    return catalog.rows(conn, "SELECT name, role, created_at, created_by FROM serve_tokens ORDER BY name")


def revoke(conn: Database, name: str) -> None:
    """Remove the token `name`; its sessions end at their next request.

    Raises:
        TokenError: no token of that name.
    """
    catalog.setup(conn)
    with write_tx(conn):
        if not conn.execute("SELECT 1 FROM serve_tokens WHERE name=?", (name,)).fetchone():
            known = [r[0] for r in conn.execute("SELECT name FROM serve_tokens ORDER BY name")]
            raise TokenError(f"no token named {name!r}; tokens: {', '.join(known) or 'none'} (see `xfid token list`)")
        conn.execute("DELETE FROM serve_tokens WHERE name=?", (name,))


def verify(conn: Database, key: bytes, token: str) -> Identity | None:
    """The identity of a presented token, or None (unknown, revoked, malformed)."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    d = digest(key, token)
    row = conn.execute("SELECT name, role, digest FROM serve_tokens WHERE digest=?", (d,)).fetchone()
    if row is None or not hmac.compare_digest(row[2], d):
        return None
    return Identity(row[0], row[1], row[2])


def by_name(conn: Database, name: str) -> Identity | None:
    """The token `name`'s identity (for a session: the caller compares the digest it signed)."""
    row = conn.execute("SELECT name, role, digest FROM serve_tokens WHERE name=?", (name,)).fetchone()
    return None if row is None else Identity(row[0], row[1], row[2])
