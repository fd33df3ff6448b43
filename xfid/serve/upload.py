"""Multipart uploads for POST /api/ingest: streamed to disk, capped, names made safe.

The body is counted as it arrives (a Content-Length over the limit is refused before reading);
past the limit the request ends with 413 and nothing is kept. Files are written under
`<store>/uploads/<time>-<actor>-<hex>/`, keeping their relative names (a sidecar
`xfid-source.toml` beside its files works as on disk), and stay there as the ingested sources'
paths; a failed ingest removes its folder.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from pathlib import Path, PurePosixPath
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

from xfid.errors import XfidError

FIELDS = ("target", "workload", "run", "fidelity", "adapter")
SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=,@-]{0,199}$")
CHUNK = 1 << 20


def _too_large(limit: int) -> XfidError:
    from xfid.serve.served import TooLarge

    return TooLarge(f"upload larger than the server's limit of {limit:,} bytes ({limit / 2**20:.0f} MiB); "
                    "split it into several ingests, or start the server with a larger --max-upload")


def capped(request: Request, limit: int) -> Request:
    """`request` whose body stream raises TooLarge once more than `limit` bytes arrived."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise _too_large(limit)
    seen = 0
    receive = request.receive

    async def counting() -> Any:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit)
        return message

    return Request(request.scope, counting)


def safe_name(name: str | None) -> PurePosixPath:
    """A relative upload name, every part plain (no '..', no hidden or odd characters)."""
    p = PurePosixPath((name or "").replace("\\", "/"))
    if not name or p.is_absolute() or not p.parts or any(not SAFE.match(x) for x in p.parts) or len(p.parts) > 8:
        raise XfidError(f"upload file name {name!r}: use relative names of letters, digits and . _ + = , @ - "
                        "(no '..', no leading dot, at most 8 folders), e.g. results/run1.csv")
    return p


def upload_dir(store_root: Path, actor: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    who = re.sub(r"[^A-Za-z0-9._-]", "_", actor)[:40]
    d = store_root / "uploads" / f"{stamp}-{who}-{secrets.token_hex(4)}"
    d.mkdir(parents=True)
    return d


def save(form: Any, into: Path) -> list[Path]:
    """Write every file part of `form` under `into` (from a worker thread: the parts are spooled
    temp files); returns their paths.

    Raises:
        XfidError: no file, a bad or repeated name.
    """
    out: list[Path] = []
    for _, value in form.multi_items():
        if not isinstance(value, UploadFile):
            continue
        rel = safe_name(value.filename)
        dest = into / rel
        if dest.exists():
            raise XfidError(f"upload file name {str(rel)!r} given twice")
        dest.parent.mkdir(parents=True, exist_ok=True)
        value.file.seek(0)
        with dest.open("wb") as fh:
            shutil.copyfileobj(value.file, fh, CHUNK)
        out.append(dest)
    if not out:
        raise XfidError("POST /api/ingest needs at least one file part (multipart/form-data, field `file`)")
    return out


def fields(form: Any) -> dict[str, Any]:
    """The ingest context from the form: target, workload, run, fidelity, adapter, meta (K=V, repeated)
    and option (K=V, repeated), as `XfidStore.ingest` takes them."""
    kw: dict[str, Any] = {k: (str(form.get(k)) or None) if form.get(k) is not None else None for k in FIELDS}
    for name, key in (("meta", "meta"), ("option", "options")):
        pairs: dict[str, str] = {}
        for v in form.getlist(name):
            k, sep, val = str(v).partition("=")
            if not sep or not k.strip():
                raise XfidError(f"{name} {str(v)!r}: expected K=V, e.g. {name}=batch=8")
            pairs[k.strip()] = val
        kw[key] = pairs
    return kw


def discard(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
