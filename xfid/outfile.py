"""Output files (`-o`): written through what the user named, never replaced by something else.

A regular file (or a missing one) is written atomically: a temp file in the same folder,
fsync, then a rename over the target, so a reader sees the old bytes or the new ones and a
failed write leaves the old file as it was. The new file keeps the old file's mode (a new
one gets the umask's mode, as `>` would). A symlink is written through (the file it points
at follows the same rules); a character device or FIFO (`/dev/stdout`, `/dev/null`, a named
pipe) is written directly. A missing folder is an error, never created. (A file with several
hard links gets a new inode: the other names keep the old bytes.)

No output may land in a store: `guard` (called by `open_output`, and by every command that
writes a file or a folder some other way) refuses, before anything is written, a path that
resolves into a store's folder, its database or its records location (after `..`, symlinks,
bind mounts and hard links: folders and files are compared by device and inode). The stores
known are those this process has opened or been pointed at (`protect`), any folder that holds
an `xfid.db`, and any `fidelity=*` folder that holds parts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from xfid.errors import XfidError

_FD_DIR = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd$")
"""`/dev/stdout` -> `/proc/self/fd/1` -> the open file itself: written directly, appended to."""

_OWN_FD = re.compile(r"^/proc/(\d+)(?:/task/\d+)?/fd/(\d+)$")
_MAX_LINKS = 40
STORE_DB = "xfid.db"
"""A folder holding a file of this name is a store's folder, whether this process knows it or not
(and a `fidelity=*` folder holding `part-*.parquet` files is a store's records)."""


@dataclass(frozen=True)
class StoreArea:
    """Where one store keeps its files: no output may be written inside.

    Attributes:
        label: how the store is named in messages (its folder).
        dirs: its folders (the store folder, the records folder, the checks folder).
        urls: object-store prefixes of its records (`s3://bucket/prefix`).
    """

    label: str
    dirs: tuple[Path, ...] = ()
    urls: tuple[str, ...] = ()


def store_area(root: Path, records: Path | None = None, url: str | None = None) -> StoreArea:
    """A store's folder, records and checks as `guard` protects them: records in a folder
    (default `root/records`, its checks beside it), or in a bucket at `url` (`scheme://bucket/prefix`,
    its checks then in the store's folder)."""
    root = Path(root)
    if url is not None:
        return StoreArea(str(root), (root, root / "checks"), urls=(url,))
    records = Path(records) if records is not None else root / "records"
    return StoreArea(str(root), (root, records, records.parent / "checks"))


_areas: dict[int, StoreArea] = {}
_area_sources: dict[int, Callable[[], Iterable[StoreArea]]] = {}


def protect(owner: object, area: StoreArea | Callable[[], Iterable[StoreArea]]) -> None:
    """Register a store's area (or a function giving areas, asked only when an output is
    guarded) for as long as `owner` (a Store, the CLI's App) has not called `unprotect`."""
    if callable(area):
        _area_sources[id(owner)] = area
    else:
        _areas[id(owner)] = area


def unprotect(owner: object) -> None:
    _areas.pop(id(owner), None)
    _area_sources.pop(id(owner), None)


def _known_areas() -> list[StoreArea]:
    out = list(_areas.values())
    for source in list(_area_sources.values()):
        with contextlib.suppress(XfidError, OSError, ValueError):
            out.extend(source())
    return out


def _ident(p: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _existing_ancestors(p: Path) -> Iterator[Path]:
    """`p` (when it exists) and each folder above it, real paths, nearest first."""
    for a in (p, *p.parents):
        if a.exists():
            yield a


def guard(path: str | os.PathLike[str], *, folder: bool = False, flag: str = "output",
          error: type[XfidError] = XfidError) -> None:
    """Refuse an output path that would write into a store, before anything is written.

    Args:
        path: the file (or, with `folder`, the folder) the user named.
        folder: the output is a folder the command fills: it must neither lie in a store nor
            hold one.
        flag: the option (or parameter) that named it, for the message.
        error: the XfidError subclass raised.

    Raises:
        XfidError (or `error`): an empty name, or a path into a store's folder, database,
            records location or one of its files (through a symlink, `..` or a hard link).
    """
    shown = os.fspath(path)
    if not shown.strip():
        raise error(f"{flag}: an empty name; give a file name (or leave the option out for its default: stdout, "
                    "or the default file)")
    areas = _known_areas()
    for a in areas:
        for url in a.urls:
            if shown.rstrip("/") == url.rstrip("/") or shown.startswith(url.rstrip("/") + "/"):
                raise error(_refusal(shown, flag, f"is inside the records of the store {a.label}"))
    try:
        real, fd_link = resolve(path)
    except OSError:
        return  # open_output names the error
    if fd_link:
        return  # an open descriptor (/dev/stdout): what it is was decided by the shell
    if str(real) != os.path.abspath(shown):
        shown = f"{shown} (= {real})"
    dirs = [(d, ident, a.label) for a in areas for d in a.dirs if (ident := _ident(d)) is not None]
    labels = {ident: label for _d, ident, label in reversed(dirs)}
    for anc in _existing_ancestors(real):
        if anc != real or folder:
            label = labels.get(_ident(anc) or (-1, -1))
            if label is None and _looks_like_a_store(anc):
                label = str(anc)
            if label is not None:
                raise error(_refusal(shown, flag, f"is inside the store {label}"))
    if folder and real.is_dir():
        _refuse_holding(real, shown, flag, dirs, error)
    _refuse_same_file(real, shown, flag, areas, error)


def _looks_like_a_store(d: Path) -> bool:
    """A store's folder (it holds an xfid.db) or a records partition (`fidelity=*` holding parts),
    whether this process knows the store or not."""
    if (d / STORE_DB).is_file():
        return True
    return d.name.startswith("fidelity=") and next(iter(d.glob("part-*.parquet")), None) is not None


def _refuse_holding(real: Path, shown: str, flag: str, dirs: list[tuple[Path, tuple[int, int], str]],
                    error: type[XfidError]) -> None:
    """A folder output that holds a store: the files written into it could take a store file's name.
    (Looked for among the known stores' folders, and one level down for an unknown store's xfid.db.)"""
    here = _ident(real)
    for d, _ident_d, label in dirs:
        if here in {_ident(p) for p in Path(os.path.realpath(d)).parents}:
            raise error(_refusal(shown, flag, f"holds {d}, a folder of the store {label}"))
    for db in (real / STORE_DB, *real.glob(f"*/{STORE_DB}")):
        if db.is_file():
            raise error(_refusal(shown, flag, f"holds the store {db.parent}"))


def _refuse_same_file(real: Path, shown: str, flag: str, areas: list[StoreArea], error: type[XfidError]) -> None:
    """The target is one of a store's files under another name (a hard link, a mount)."""
    try:
        st = os.stat(real)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    ident = (st.st_dev, st.st_ino)
    for a in areas:
        for d in a.dirs:
            # every file when it has other names; else the files right in the store's folders (the
            # database and its -wal, the check files): one bind-mounted elsewhere has one link
            walk = os.walk(d) if st.st_nlink > 1 else [(str(d), [], _names(d))]
            for top, _subdirs, names in walk:
                for n in names:
                    if _ident(os.path.join(top, n)) == ident:
                        raise error(_refusal(shown, flag, f"is another name (a hard link or mount) of "
                                                          f"{os.path.join(top, n)}, a file of the store {a.label}"))


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def _refusal(shown: str, flag: str, why: str) -> str:
    return (f"cannot write {flag} {shown}: it {why}, and writing there would destroy the store's data; nothing "
            "was written (write the output outside the store)")


def resolve(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The file `path` finally names (symlinks followed) and whether it is an open fd's link."""
    p = os.path.abspath(os.fspath(path))
    for _ in range(_MAX_LINKS):
        d, name = os.path.split(p)
        d = os.path.realpath(d)
        p = os.path.join(d, name)
        if _FD_DIR.match(d):
            return Path(p), True
        if not os.path.islink(p):
            return Path(p), False
        p = os.path.normpath(os.path.join(d, os.readlink(p)))
    raise OSError(errno.ELOOP, "too many levels of symbolic links")


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str], *, text: bool = False,
                error: type[XfidError] = XfidError, store_file: bool = False) -> Iterator[IO[Any]]:
    """A file object for writing `path`; the file appears only when the block ends without error.

    Args:
        path: the file the user named (`-o`).
        text: a UTF-8 text stream instead of a binary one.
        error: the XfidError subclass raised for an unwritable path.
        store_file: the store writing a file of its own (calibration write-back, generated
            records): not guarded, as a user's output is.

    Raises:
        XfidError (or `error`): a missing folder, a folder or other non-file target, or an OS
            error while writing (no space, I/O error, permission); the target is then untouched
            and no temp file is left.
    """
    shown = os.fspath(path)
    if store_file:
        if not shown:
            raise error("cannot write a file with an empty name")
    else:
        guard(path, error=error)
    try:
        real, fd_link = resolve(path)
        try:
            st: os.stat_result | None = os.stat(real)
        except FileNotFoundError:
            st = None
    except OSError as e:
        raise error(f"cannot write {shown}: {e.strerror or e} (check -o)") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise error(f"cannot write {shown}: it is a folder (give a file name with -o)")
    if fd_link or (st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode))):
        with _direct(real, shown, fd_link, text, error) as f:
            yield f
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise error(f"cannot write {shown}: not a regular file, character device or FIFO")
    if not real.parent.is_dir():
        raise error(f"cannot write {shown}: folder {real.parent} does not exist (create it first)")
    with _atomic(real, shown, st, text, error) as f:
        yield f


@contextlib.contextmanager
def _direct(real: Path, shown: str, append: bool, text: bool, error: type[XfidError]) -> Iterator[IO[Any]]:
    """Write a device, FIFO or open descriptor in place: no temp file, no truncation of a device.

    One of our own descriptors (`/dev/stdout` is `/proc/self/fd/1`) is duplicated, so that the
    file offset is shared with what the process prints there before and after.
    """
    own = _OWN_FD.match(str(real))
    try:
        if own and int(own.group(1)) == os.getpid():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    stream.flush()
            fd = os.dup(int(own.group(2)))
        else:
            fd = os.open(real, os.O_WRONLY | (os.O_APPEND if append else 0))
    except OSError as e:
        raise error(f"cannot write {shown}: {e.strerror or e}") from None
    f = os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8", "newline": ""} if text else {}))
    try:
        yield f
        f.flush()
    except OSError as e:
        _close_quietly(f)
        raise error(f"cannot write {shown}: {e.strerror or e}") from None
    except BaseException:
        _close_quietly(f)
        raise
    try:
        f.close()
    except OSError as e:
        raise error(f"cannot write {shown}: {e.strerror or e}") from None


@contextlib.contextmanager
def _atomic(real: Path, shown: str, st: os.stat_result | None, text: bool,
            error: type[XfidError]) -> Iterator[IO[Any]]:
    """Temp file beside `real` (0666 & ~umask, or the old file's mode), fsync, rename."""
    tmp = _beside(real, secrets.token_hex(6), "tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        why = (f" (the file is written as a temp file in {real.parent} and renamed over it, so that folder must "
               "be writable)" if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else "")
        raise error(f"cannot write {shown}: {e.strerror or e}{why}") from None
    f = os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8", "newline": ""} if text else {}))
    try:
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):  # only root may give it back; others keep theirs
                    os.fchown(fd, st.st_uid, st.st_gid)
        yield f
        f.flush()
        os.fsync(fd)
        f.close()
        os.replace(tmp, real)
    except OSError as e:
        _close_quietly(f)
        tmp.unlink(missing_ok=True)
        raise error(f"cannot write {shown}: {e.strerror or e}") from None
    except BaseException:
        _close_quietly(f)
        tmp.unlink(missing_ok=True)
        raise
    _sync_folder(real.parent)


def _sync_folder(folder: Path) -> None:
    """fsync a folder after a rename in it, so that the rename itself survives a crash (best
    effort: a file system that cannot sync a folder keeps the rename anyway)."""
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _beside(real: Path, token: str, kind: str) -> Path:
    """The hidden name of a temp (`kind` "tmp") or set-aside ("old") copy of `real`, in its folder."""
    return real.parent / f".{real.name}.xfid-{token}.{kind}"


def _close_quietly(f: IO[Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        f.close()


def write_output(path: str | os.PathLike[str], data: bytes | str, *,
                 error: type[XfidError] = XfidError, store_file: bool = False) -> None:
    """Write all of `data` to `path` by the rules of `open_output`."""
    with open_output(path, text=isinstance(data, str), error=error, store_file=store_file) as f:
        f.write(data)


def check_folder_output(path: str | os.PathLike[str], *, ours: Callable[[Path], bool], what: str,
                        flag: str = "-o", error: type[XfidError] = XfidError) -> tuple[Path, bool]:
    """What `output_folder` checks before anything is written (a command calls it when it
    reads the option, so a refused path costs no work): the real path and whether it exists.

    Raises:
        XfidError (or `error`): a path into a store, a stream, an existing file or folder that
            `ours` does not accept, a missing parent folder.
    """
    shown = os.fspath(path)
    guard(path, folder=True, flag=flag, error=error)
    try:
        real, fd_link = resolve(path)
        exists = real.exists()
    except OSError as e:
        raise error(f"cannot write {flag} {shown}: {e.strerror or e}") from None
    if fd_link:
        raise error(f"cannot write {flag} {shown}: {what} is a folder of files, not a stream (give a folder name)")
    if exists and not (real.is_dir() and ours(real)):
        kind = "a folder" if real.is_dir() else "a file"
        raise error(f"cannot write {flag} {shown}: it exists and is {kind} that is not {what}; nothing was written "
                    "(remove it, or give another name)")
    if not real.parent.is_dir():
        raise error(f"cannot write {flag} {shown}: folder {real.parent} does not exist (create it first)")
    return real, exists


@contextlib.contextmanager
def output_folder(path: str | os.PathLike[str], *, ours: Callable[[Path], bool], what: str, flag: str = "-o",
                  error: type[XfidError] = XfidError) -> Iterator[Path]:
    """A temp folder name beside `path` to fill (not created: the writer creates it); when the
    block ends without error it is renamed into place, else removed with what it holds.

    The same rules as a file output: `guard` (as a folder: not inside a store, not holding one),
    a missing parent folder is an error, never created. An existing `path` is replaced only when
    `ours(path)` says it is a folder written the same way (what: how the message names it);
    anything else there (a file, a folder of other things) is refused before anything is
    written. Replacing renames the old folder aside, the new one into place, then removes the
    old one: a reader sees the old folder or the new one, and only between the two renames none.

    Raises:
        XfidError (or `error`): a refused path, or an OS error while writing or renaming (then
            nothing is left of the new folder and an old one is back in place).
    """
    shown = os.fspath(path)
    real, exists = check_folder_output(path, ours=ours, what=what, flag=flag, error=error)
    token = secrets.token_hex(6)
    tmp, old = _beside(real, token, "tmp"), _beside(real, token, "old")
    try:
        yield tmp
        if not tmp.is_dir():
            raise error(f"cannot write {flag} {shown}: the writer left no folder")
        if exists:
            os.rename(real, old)
        try:
            os.rename(tmp, real)
        except OSError:
            if exists:
                os.rename(old, real)
            raise
    except OSError as e:
        _remove_tree(tmp)
        raise error(f"cannot write {flag} {shown}: {e.strerror or e}") from None
    except BaseException:
        _remove_tree(tmp)
        raise
    _remove_tree(old)
    _sync_folder(real.parent)


def _remove_tree(p: Path) -> None:
    import shutil

    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            p.unlink()
