"""Where a store's Parquet parts live: a local or network directory, or a bucket (s3://, gs://).

A local path (or file:///…) is read and written with the operating system, so parts are
renamed into place after their commit. A bucket is reached through pyarrow's filesystems;
it has no atomic rename, so a part is uploaded once under its unique final name and becomes
visible only when the catalog registers it (xfid.store).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from xfid.errors import StoreError
from xfid.sqlbackend import mask

OBJECT_SCHEMES = ("s3", "gs", "gcs")
TIMEOUT_ENV = "XFID_OBJECT_TIMEOUT_S"
TIMEOUT_S = 60.0
"""The longest one request to a bucket may take, retries included (env XFID_OBJECT_TIMEOUT_S)."""


def object_timeout_s() -> float:
    """XFID_OBJECT_TIMEOUT_S, bounded to [1, 3600] s (an unreadable value: the default)."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, TIMEOUT_S))
    except ValueError:
        return TIMEOUT_S
    return min(max(value, 1.0), 3600.0) if value == value else TIMEOUT_S


def bounded(label: str, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, given up after object_timeout_s() with a StoreError naming the location.

    pyarrow's own timeouts bound an S3 request (connect/request timeouts, set in `resolve`), but
    not a GCS client that waits for credentials or for a server that accepts and never answers:
    the call runs on a daemon thread, so a command never hangs behind it (nor holds a lock)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    limit = object_timeout_s()
    t = threading.Thread(target=run, name="xfid-object-request", daemon=True)
    t.start()
    t.join(limit + 5)
    if t.is_alive():
        raise StoreError(f"{label}: no answer within {limit:g} s when asked to {what} (check the endpoint, the "
                         f"network and the credentials; {TIMEOUT_ENV} sets the limit); nothing more was done")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def with_timeouts(fs: Any) -> Any:
    """The same bucket filesystem with request timeouts: an S3 request (3 attempts) ends within
    object_timeout_s(), a GCS client stops retrying after it."""
    import datetime

    import pyarrow.fs as pafs

    limit = object_timeout_s()
    ctor, args = fs.__reduce__()
    if isinstance(fs, pafs.S3FileSystem):
        kwargs = dict(args[0])
        kwargs.update(connect_timeout=min(10.0, limit / 3), request_timeout=limit / 3)
        return ctor(kwargs)
    if isinstance(fs, pafs.GcsFileSystem):
        kwargs = dict(args[0])
        given = kwargs.get("retry_time_limit")
        mine = datetime.timedelta(seconds=limit)
        kwargs["retry_time_limit"] = min(given, mine) if given else mine
        return ctor(kwargs)
    return fs


@dataclass(frozen=True)
class FileEntry:
    """One file under the records location: its path relative to it, its size and mtime (epoch s)."""

    rel: str
    size: int
    mtime: float


@dataclass
class Location:
    """The records location of a store.

    Attributes:
        base: the directory (Path) or the bucket/prefix (PurePosixPath) of the parts.
        fs: the pyarrow filesystem of a bucket; None for a local or network directory.
        label: where it is, for messages (credentials masked).
    """

    base: Path | PurePosixPath
    fs: Any = None
    label: str = ""

    @property
    def object_store(self) -> bool:
        return self.fs is not None

    def list(self) -> list[FileEntry]:
        """Every file under `fidelity=*/` (one listing request on a bucket)."""
        if self.fs is None:
            return _list_local(Path(self.base))
        import pyarrow.fs as pafs

        try:
            infos = self.bounded("list the records", self.fs.get_file_info,
                                 pafs.FileSelector(str(self.base), recursive=True, allow_not_found=True))
        except OSError as e:
            raise StoreError(f"{self.label}: cannot list the records: {mask(e)} (check the bucket, the endpoint "
                             "and the credentials)") from None
        base = str(self.base).rstrip("/") + "/"
        out = []
        for i in infos:
            if i.type != pafs.FileType.File or not i.path.startswith(base):
                continue
            rel = i.path[len(base):]
            if rel.count("/") == 1 and rel.startswith("fidelity="):
                out.append(FileEntry(rel, int(i.size or 0), i.mtime.timestamp() if i.mtime else 0.0))
        return sorted(out, key=lambda e: e.rel)

    def list_marks(self) -> dict[str, int]:
        """The bucket's commit marks (xfid.committed): records-relative part -> the mark's size
        (one listing request; {} for a directory, whose names carry the same)."""
        if self.fs is None:
            return {}
        import pyarrow.fs as pafs

        from xfid.committed import MARKS

        base = f"{str(self.base).rstrip('/')}/{MARKS}"
        try:
            infos = self.bounded("list the commit marks", self.fs.get_file_info,
                                 pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError as e:
            raise StoreError(f"{self.label}: cannot list the commit marks: {mask(e)} (check the bucket, the endpoint "
                             "and the credentials)") from None
        return {i.path[len(base) + 1:]: int(i.size or 0) for i in infos
                if i.type == pafs.FileType.File and i.path.startswith(base + "/")}

    def put(self, path: Path | PurePosixPath, data: bytes) -> None:
        """Write a small object (a commit mark) in one request; OSError when it fails."""
        def put() -> None:
            with self.fs.open_output_stream(str(path)) as f:
                f.write(data)

        self.bounded(f"write {path}", put)

    def bounded(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One request to this bucket, bounded in time (module `bounded`)."""
        return bounded(self.label, what, fn, *args)

    @contextlib.contextmanager
    def reading(self, path: Path | PurePosixPath) -> Iterator[Any]:
        """A readable file for pyarrow (a local path as it is; a bucket's reader closed afterwards:
        a ParquetFile does not close a reader it was handed)."""
        if self.fs is None:
            yield path
            return
        with self.fs.open_input_file(str(path)) as f:
            yield f

    def exists(self, path: Path | PurePosixPath) -> bool:
        if self.fs is None:
            return Path(path).exists()
        import pyarrow.fs as pafs

        info = self.bounded(f"look for {path}", self.fs.get_file_info, str(path))
        return bool(info.type == pafs.FileType.File)

    def delete(self, path: Path | PurePosixPath) -> None:
        """Remove one file; one already gone is no error."""
        if self.fs is None:
            Path(path).unlink(missing_ok=True)
            return
        try:
            self.bounded(f"remove {path}", self.fs.delete_file, str(path))
        except FileNotFoundError:
            pass
        except OSError as e:
            if self.exists(path):
                raise StoreError(f"{self.label}: cannot remove {path}: {mask(e)}") from None

    def copy_in(self, src: Path, rel: str) -> None:
        """Upload (or copy) a local file to `rel` under this location."""
        import pyarrow.fs as pafs

        dest = self.base / rel
        if self.fs is None:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            pafs.copy_files(str(src), str(dest))
            return
        self.bounded(f"upload {rel}", pafs.copy_files, str(src), str(dest), None, self.fs)


def _list_local(base: Path) -> list[FileEntry]:
    out: list[FileEntry] = []
    try:
        dirs = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return out
    for d in dirs:
        if not (d.name.startswith("fidelity=") and d.is_dir()):
            continue
        for f in os.scandir(d.path):
            try:
                st = f.stat()
            except FileNotFoundError:
                continue
            out.append(FileEntry(f"{d.name}/{f.name}", st.st_size, st.st_mtime))
    return sorted(out, key=lambda e: e.rel)


def resolve(explicit: str | os.PathLike[str] | None, root: Path) -> Location:
    """The records location: the argument, then env XFID_RECORDS_URL, then `<root>/records`.

    Accepts a path, `file:///path`, `s3://bucket/prefix` (options such as
    `?endpoint_override=host:port&scheme=http` and credentials from the AWS environment, as
    pyarrow's S3 filesystem takes them) or `gs://bucket/prefix`.

    Raises:
        StoreError: an unknown scheme, a bucket without a name, or a filesystem pyarrow cannot open.
    """
    from xfid.locations import env_records_url

    value = explicit if explicit is not None else env_records_url()
    if value is None:
        return Location(root / "records", None, str(root / "records"))
    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError as e:
        raise StoreError(f"records {mask(text)!r}: cannot read this URL: {mask(e)} (percent-encode any of "
                         "@ : / % [ ] in a user or password)") from None
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        path = Path(unquote(parts.path)) if scheme == "file" else Path(text)
        return Location(path, None, str(path))
    if scheme not in OBJECT_SCHEMES:
        raise StoreError(f"records {mask(text)!r}: unknown location scheme {scheme!r}; write a directory path, "
                         "file:///PATH, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX")
    if not parts.hostname:
        raise StoreError(f"records {mask(text)!r}: the bucket name is missing (s3://BUCKET/PREFIX)")
    import pyarrow.fs as pafs

    try:
        fs, path = bounded(mask(text), "open the bucket", pafs.FileSystem.from_uri, text)
        fs = with_timeouts(fs)
    except (OSError, ValueError) as e:
        raise StoreError(f"records {mask(text)!r}: cannot open this bucket: {mask(e)}") from None
    return Location(PurePosixPath(path.rstrip("/")), fs, mask(text))


__all__ = ["TIMEOUT_ENV", "TIMEOUT_S", "FileEntry", "Location", "bounded", "object_timeout_s", "resolve",
           "with_timeouts"]
