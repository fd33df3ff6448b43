"""The command line as a client of `xfid serve`: `--server URL` (env XFID_SERVER) with env
XFID_TOKEN makes `ingest`, `check`, `issues ...` and `compare` talk to the server instead of the
store, with the same output and exit codes. A CI runner then needs a URL and a token, never a
database password.

`RemoteStore` has the methods of `xfid.api.XfidStore` those commands call, each one HTTP request
to the server's JSON API (docs/serve.md); the answers become the same objects (IngestReport,
CheckSummary, issue dicts), so the commands format them exactly as they do for a local store.
Uploads are streamed from disk (a multipart body read file by file, never held in memory); the
server caps them (413). An error answer is the server's `Error:` text, exit 2.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from xfid.errors import XfidError

TIMEOUT_S = 600.0
"""Per request: an ingest of a large upload or a check of a large store takes a while."""
CHUNK = 1 << 20


class ServerError(XfidError):
    """The server refused the request (its message), or could not be reached."""


def server_url(url: str) -> str:
    """`url` without a trailing slash, if it is an http(s) URL with a host.

    Raises:
        XfidError: anything else.
    """
    u = urlsplit(url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise XfidError(f"--server {url!r}: give the server's http:// or https:// URL, e.g. http://xfid.internal:8470")
    if u.username or u.password:
        raise XfidError("--server: do not put credentials in the URL; set the token in env XFID_TOKEN")
    return url.strip().rstrip("/")


class RemoteStore:
    """The subset of XfidStore that `ingest`, `check`, `issues` and `compare` use, over HTTP."""

    def __init__(self, url: str, token: str | None):
        self.url = server_url(url)
        if not token:
            raise XfidError(f"--server {self.url}: set env XFID_TOKEN to a token from `xfid token create NAME "
                            "--role writer` (readers may list, show and compare only)")
        self._token = token

    # --- transport -------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                 length: int | None = None) -> Any:
        h = {"Authorization": f"Bearer {self._token}", "Accept": "application/json", **(headers or {})}
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if length is not None:
            h["Content-Length"] = str(length)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            with e:
                raw = e.read()
            try:
                msg = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                msg = f"{method} {path}: the server answered {e.code} {e.reason}"
            raise ServerError(str(msg)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ServerError(f"cannot reach the xfid server at {self.url}: {reason} (is `xfid serve` running "
                              "there? check --server / XFID_SERVER)") from None

    # --- what the commands call ------------------------------------------------------
    def ingest(self, paths: Sequence[str | os.PathLike[str]], progress: Any = None, *, adapter: str = "auto",
               target: str | None = None, workload: str | None = None, run: str | None = None,
               fidelity: str | None = None, meta: dict[str, str] | None = None,
               options: dict[str, str] | None = None) -> Any:
        """Upload the files (directories walked, relative names kept) and ingest them on the
        server, all or nothing; the report's paths are the local ones."""
        from xfid.ingest import FileResult, IngestReport

        files, skipped = _collect(paths)
        if not files:
            raise XfidError("nothing to upload: " + ("; ".join(f"{p}: {r}" for p, r in skipped) or "no files given"))
        fields: list[tuple[str, str]] = [(k, v) for k, v in (("target", target), ("workload", workload),
                                                             ("run", run), ("fidelity", fidelity)) if v]
        if adapter and adapter != "auto":
            fields.append(("adapter", adapter))
        fields += [("meta", f"{k}={v}") for k, v in (meta or {}).items()]
        fields += [("option", f"{k}={v}") for k, v in (options or {}).items()]
        body = Multipart(fields, files)
        doc = self._request("POST", "/api/ingest", body, length=body.length,
                            headers={"Content-Type": f"multipart/form-data; boundary={body.boundary}"})
        local = {rel: str(p) for rel, p in files}

        def back(path: str) -> str:  # the server's upload path -> the local file it came from
            for rel, p in local.items():
                if path == rel or path.endswith("/" + rel):
                    return p
            return path

        report = IngestReport(files=[FileResult(**{**f, "path": back(f["path"])}) for f in doc["files"]],
                              skipped=[(back(s["path"]), s["reason"]) for s in doc["skipped"]] + skipped)
        report.files.sort(key=lambda f: f.path)
        return report

    def check(self, targets: Sequence[str] | None = None, run: Any = None, as_of: Any = None, *,
              actor: str | None = None, label: str | None = None, resolve_after: int | None = None,
              engine: Any = None, request: Any = None) -> Any:
        from xfid.tracker import CheckSummary

        _no_actor(actor)
        if request is not None:  # the command line's Request (xfid.engine.request)
            targets, run, as_of = request.targets, request.runs, request.as_of
        if engine:
            raise XfidError("--engine chooses how the server's store is correlated: the server's config decides; "
                            "leave --engine out with --server")
        body: dict[str, Any] = {"target": list(targets or []), "run": list(run or []), "label": label,
                                "resolve_after": resolve_after}
        if as_of is not None:
            body["as_of"] = str(as_of)
        d = self._request("POST", "/api/check", {k: v for k, v in body.items() if v not in (None, [])})
        d.pop("counts", None)
        return CheckSummary(**d)

    def issue_list(self, state: str | None = None, *, target: Sequence[str] | None = None, kind: str | None = None,
                   severity_min: float | None = None) -> list[dict[str, Any]]:
        q: list[tuple[str, Any]] = [("state", state), ("kind", kind), ("severity_min", severity_min)]
        q += [("target", t) for t in target or []]
        return self._request("GET", "/api/issues?" + urlencode([(k, v) for k, v in q if v is not None]))

    def issue(self, issue_id: str) -> dict[str, Any]:
        return self._request("GET", f"/api/issues/{quote(issue_id, safe='')}")

    def links(self, issue_id: str) -> list[dict[str, Any]]:
        return self.issue(issue_id).get("links", [])

    def act(self, issue_id: str, action: str, *, actor: str | None = None, **details: Any) -> dict[str, Any]:
        _no_actor(actor)
        body = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in details.items() if v is not None}
        return self._request("POST", f"/api/issues/{quote(issue_id, safe='')}/{action}", body)

    def link(self, issue_id: str, url: str, *, actor: str | None = None) -> dict[str, Any]:
        _no_actor(actor)
        return self._request("POST", f"/api/issues/{quote(issue_id, safe='')}/link", {"url": url})

    def compare(self, baseline: Any, *, against: str | None, fmt: str, fail_on: str,
                targets: Sequence[str] | None = None, run: Any = None, as_of: Any = None,
                request: Any = None) -> tuple[str, int]:
        """The server's `compare`: (the formatted report, the exit code); `request` (a Request)
        gives the selection instead of targets, run and as_of."""
        if request is not None:
            targets, run, as_of = request.targets, request.runs, request.as_of
        body: dict[str, Any] = {"format": fmt, "fail_on": fail_on, "target": list(targets or []),
                                "run": list(run or [])}
        if against:
            body["against"] = against
        else:
            from xfid.drift.snapshot import read_snapshot

            body["baseline"] = read_snapshot(baseline)
        if as_of is not None:
            body["as_of"] = str(as_of)
        d = self._request("POST", "/api/compare", body)
        return d["text"], int(d["exit_code"])

    def close(self) -> None:
        pass


def _no_actor(actor: str | None) -> None:
    if actor:
        raise XfidError(f"--actor {actor!r}: on a server the actor recorded is the token's name (XFID_TOKEN); "
                        "leave --actor out, or use a token created under that name")


def _collect(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[tuple[str, Path]], list[tuple[str, str]]]:
    """(upload name, local file) for every regular file of `paths` (directories walked, links
    not followed: the server reads nothing outside what is sent), and what was left out."""
    files: list[tuple[str, Path]] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        p = Path(raw)
        try:
            st = p.lstat()
        except OSError as e:
            raise XfidError(f"{p}: {e.strerror or e}") from None
        if stat.S_ISREG(st.st_mode):
            files.append((p.name, p))
        elif stat.S_ISDIR(st.st_mode):
            for f in sorted(p.rglob("*")):
                rel = f"{p.name}/{f.relative_to(p).as_posix()}" if p.name else f.relative_to(p).as_posix()
                if f.is_symlink() or not f.is_file():
                    if not f.is_dir() or f.is_symlink():
                        skipped.append((str(f), "not a regular file (a link, FIFO or socket): not uploaded"))
                    continue
                files.append((rel, f))
        else:
            skipped.append((str(p), "not a regular file or directory: not uploaded"))
    return files, skipped


class Multipart:
    """A multipart/form-data body read part by part (files streamed from disk); `length` known first."""

    def __init__(self, fields: list[tuple[str, str]], files: list[tuple[str, Path]]):
        self.boundary = "xfid-" + secrets.token_hex(16)
        self._pieces: list[bytes | Path] = []
        for name, value in fields:
            self._pieces.append(self._head(f'name="{name}"') + value.encode() + b"\r\n")
        for rel, path in files:
            self._pieces.append(self._head(f'name="file"; filename="{_quoted(rel)}"',
                                           "Content-Type: application/octet-stream\r\n"))
            self._pieces.append(path)
            self._pieces.append(b"\r\n")
        self._pieces.append(f"--{self.boundary}--\r\n".encode())
        self.length = sum(len(x) if isinstance(x, bytes) else x.stat().st_size for x in self._pieces)
        self._iter = self._chunks()
        self._buf = b""

    def _head(self, disposition: str, extra: str = "") -> bytes:
        return f"--{self.boundary}\r\nContent-Disposition: form-data; {disposition}\r\n{extra}\r\n".encode()

    def _chunks(self) -> Iterator[bytes]:
        for x in self._pieces:
            if isinstance(x, bytes):
                yield x
            else:
                with x.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        yield chunk

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            try:
                self._buf += next(self._iter)
            except StopIteration:
                break
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _quoted(name: str) -> str:
    if any(c in name for c in '"\r\n\\'):
        raise XfidError(f"{name!r}: a file name with quotes, backslashes or line breaks cannot be uploaded; rename it")
    return name
