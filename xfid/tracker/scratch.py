"""The scratch folders of checks: where an engine writes a check's discrepancies (`.check-rows-*`
in the store's checks folder), read back in chunks by the tracker, removed when the check ends.

A check that is killed (SIGKILL, power loss) cannot remove its folder. So each check holds an
exclusive lock (`flock`) on a file in its folder while it runs, and every later check sweeps the
folders whose lock it can take: the kernel drops a lock when its process dies, so a folder that
can be locked is one no running check uses. A folder without that file (killed before it was
written, or made by an older xfid) is swept once untouched for the temps' grace period
(xfid.committed.temp_grace_s). Where `fcntl` is missing (not POSIX), the grace period alone decides.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import IO

from xfid.committed import temp_grace_s

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

PREFIX = ".check-rows-"
HELD = "held"
"""The file a running check locks inside its scratch folder."""
SETTLE_S = 60.0
"""A held file younger than this is left alone (its check may be between creating and locking it)."""


def _lock(f: IO[str]) -> bool:
    """Take `f`'s exclusive lock without waiting; whether it was taken."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def folder(home: Path, stack: contextlib.ExitStack) -> Path:
    """A new scratch folder in `home` (a store's checks folder), held until `stack` closes, then
    removed (a check sweeps the abandoned ones of earlier checks first: `sweep`)."""
    made = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=PREFIX, dir=home, ignore_cleanup_errors=True)))
    # closed, so unlocked, just before the folder's removal (the stack closes in reverse order)
    held = stack.enter_context(open(made / HELD, "w", encoding="utf-8"))  # noqa: SIM115
    _lock(held)
    return made


def _abandoned(d: Path, now: float) -> tuple[bool, IO[str] | None]:
    """Whether scratch folder `d` is no running check's, and the locked file that proves it
    (keep it open while removing, so that no check can take the folder meanwhile)."""
    try:
        f = open(d / HELD, "r+", encoding="utf-8")  # noqa: SIM115 (returned open: the caller closes it)
    except FileNotFoundError:
        try:
            return now - d.stat().st_mtime > temp_grace_s(), None
        except FileNotFoundError:
            return False, None
    except OSError:
        return False, None
    try:
        young = now - os.fstat(f.fileno()).st_mtime <= SETTLE_S
        if fcntl is None:
            return now - os.fstat(f.fileno()).st_mtime > temp_grace_s(), f
        if young or not _lock(f):
            f.close()
            return False, None
        return True, f
    except OSError:
        f.close()
        return False, None


def sweep(home: Path) -> list[Path]:
    """Remove the scratch folders in `home` that no running check holds; returns them."""
    removed: list[Path] = []
    try:
        found = [e for e in os.scandir(home) if e.name.startswith(PREFIX) and e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return removed
    now = time.time()
    for entry in found:
        d = Path(entry.path)
        gone, held = _abandoned(d, now)
        if not gone:
            continue
        try:
            shutil.rmtree(d, ignore_errors=True)
        finally:
            if held is not None:
                held.close()
        if not d.exists():
            removed.append(d)
    return removed
