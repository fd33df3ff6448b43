"""Output files (`-o`): written through what the user named, never replaced by something else.

A regular file (or a missing one) is written atomically: a temp file in the same folder,
fsync, then a rename over the target, so a reader sees the old bytes or the new ones and a
failed write leaves the old file as it was. The new file keeps the old file's mode (a new
one gets the umask's mode, as `>` would). A symlink is written through (the file it points
at follows the same rules); a character device or FIFO (`/dev/stdout`, `/dev/null`, a named
pipe) is written directly. A missing folder is an error, never created. (A file with several
hard links gets a new inode: the other names keep the old bytes.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from xfid.errors import XfidError

_FD_DIR = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd$")
"""`/dev/stdout` -> `/proc/self/fd/1` -> the open file itself: written directly, appended to."""

_OWN_FD = re.compile(r"^/proc/(\d+)(?:/task/\d+)?/fd/(\d+)$")
_MAX_LINKS = 40


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
                error: type[XfidError] = XfidError) -> Iterator[IO[Any]]:
    """A file object for writing `path`; the file appears only when the block ends without error.

    Args:
        path: the file the user named (`-o`).
        text: a UTF-8 text stream instead of a binary one.
        error: the XfidError subclass raised for an unwritable path.

    Raises:
        XfidError (or `error`): a missing folder, a folder or other non-file target, or an OS
            error while writing (no space, I/O error, permission); the target is then untouched
            and no temp file is left.
    """
    shown = os.fspath(path)
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
    tmp = real.parent / f".{real.name}.xfid-{secrets.token_hex(6)}.tmp"
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
    with contextlib.suppress(OSError):  # the rename itself survives a crash
        dfd = os.open(real.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _close_quietly(f: IO[Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        f.close()


def write_output(path: str | os.PathLike[str], data: bytes | str, *,
                 error: type[XfidError] = XfidError) -> None:
    """Write all of `data` to `path` by the rules of `open_output`."""
    with open_output(path, text=isinstance(data, str), error=error) as f:
        f.write(data)
