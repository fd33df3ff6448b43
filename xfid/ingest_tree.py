"""What ingest may read: the files of the tree it was given, their sidecars, and the paths a
sidecar or `--option` names, each confined to that tree.

A directory argument is its own tree; a file named on the command line has its folder as
tree. Nothing outside the tree is read: a symbolic link out of it (a data file, a sidecar, a
results.xml) is not followed and is listed, and a path option pointing out of it is refused
before anything is looked up there, so the error tells nothing about the file named.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xfid.errors import InputError
from xfid.schema import FIDELITIES, is_valid_fidelity

SIDECAR = "xfid-source.toml"
CONTEXT_KEYS = ("adapter", "fidelity", "target", "workload", "run")
MAX_NAME_CHARS = 1000
"""The longest target, workload, run, fidelity, meta key or text value accepted (a name, not a file)."""


@dataclass(frozen=True)
class Found:
    """One file to ingest: its path, whether it was named itself, and the tree it belongs to."""

    path: Path
    explicit: bool
    root: Path


def expand(paths: Iterable[str | Path]) -> tuple[list[Found], list[tuple[str, str]]]:
    """Files to ingest and the entries left out, (path, reason).

    A directory yields the files under it, sorted; hidden entries are left out, and no
    symbolic link is followed out of the directory named (nor into a linked directory).
    """
    out: list[Found] = []
    left_out: list[tuple[str, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            files, skipped = _walk(p)
            root = p.resolve()
            out.extend(Found(f, False, root) for f in files)
            left_out.extend(skipped)
        elif p.is_file():
            root = p.absolute().parent.resolve()
            out.append(Found(p, True, root))
            side = p.parent / SIDECAR
            if side.is_symlink() and not _inside(side, root):
                left_out.append((str(side), f"a symbolic link out of {p.parent}: not followed"))
        elif p.is_symlink():
            raise InputError(p, None, "a symbolic link to nothing readable (a loop, or its target is missing)")
        elif p.exists():
            raise InputError(p, None, f"{_kind(p)}, not a regular file", "name a file or a folder of files")
        else:
            raise InputError(p, None, "no such file or directory")
    return out, left_out


def _kind(p: Path) -> str:
    """What a non-regular file is, in words."""
    try:
        mode = p.lstat().st_mode
    except OSError:
        return "unreadable"
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _inside(p: Path, root: Path) -> bool:
    """Whether `p`, every link followed, lies inside `root` (a loop is outside)."""
    try:
        return p.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop
        return False


def _walk(top: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """The regular files under `top` (links only to files inside it), and what was left out."""
    root = top.resolve()
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for d, dirs, names in os.walk(top, followlinks=False):
        base = Path(d)
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for x in dirs:
            if (base / x).is_symlink():
                skipped.append((str(base / x), "a symbolic link to a directory: not followed"))
        for x in sorted(names):
            if x.startswith("."):
                continue
            f = base / x
            if f.is_symlink():
                try:
                    target = f.resolve()
                except (OSError, RuntimeError):
                    skipped.append((str(f), "a symbolic link that loops: not followed"))
                    continue
                if not target.is_relative_to(root):
                    skipped.append((str(f), f"a symbolic link out of {top}: not followed"))
                    continue
                if not target.is_file():
                    skipped.append((str(f), "a symbolic link to no regular file: not followed"))
                    continue
            elif not f.is_file():
                skipped.append((str(f), f"{_kind(f)}: not read"))
                continue
            files.append(f)
    files.sort()
    return files, skipped


def resolve_inside(value: Any, base: Path, roots: tuple[Path, ...], file: Path, key: str) -> Path:
    """The path `value` (relative to `base`) names, refused unless it lies inside one of `roots`.

    Refused on the path alone, before anything is looked up there: the message says nothing
    about whether the file outside exists or what it holds.

    Raises:
        InputError: not a non-empty string, or a path that leaves the tree.
    """
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise InputError(file, key, f"must be a path (a non-empty string), got {short(value)}",
                         "name a file inside the folder being ingested")
    p = Path(value)
    p = p if p.is_absolute() else base / p
    if not any(_inside(p, r) for r in roots):
        where = ", ".join(map(str, roots))
        raise InputError(file, key, f"{short(value, 80)} is outside the folder being ingested ({where}): "
                         "xfid reads no file outside it",
                         "copy the file into that folder, or ingest a folder that holds both")
    return p


def sidecar_for(path: Path, root: Path) -> Path | None:
    """The `xfid-source.toml` that applies to `path`: the one beside it, when it is a regular
    file inside the tree (a link out of the tree is not followed)."""
    side = path.parent / SIDECAR
    if not side.is_file() or (side.is_symlink() and not _inside(side, root)):
        return None
    return side


def load_sidecar(path: Path, root: Path | None = None) -> dict[str, Any]:
    """Context for `path` from `xfid-source.toml` beside it: top-level keys, then [files."NAME"].

    Raises:
        InputError: not TOML, an unknown key, or a value of the wrong type (naming the key).
    """
    side = sidecar_for(path, root if root is not None else path.absolute().parent.resolve())
    if side is None:
        return {}
    try:
        doc = tomllib.loads(side.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(side, None, f"not valid TOML: {e}") from None
    except (OSError, RecursionError) as e:
        raise InputError(side, None, f"cannot be read: {type(e).__name__}") from None
    files = doc.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise InputError(side, "key 'files'", "must be a table of tables", '[files."NAME"] with keys for one file')
    ctx = {k: v for k, v in doc.items() if k != "files"}
    per_file = files.get(path.name, {})
    where = f'[files."{path.name}"]'
    _check_sidecar(side, ctx, "")
    _check_sidecar(side, per_file, where + ".")
    for k in ("meta", "options"):
        merged = dict(ctx.get(k, {}))
        merged.update(per_file.get(k, {}))
        if merged:
            per_file = {**per_file, k: merged}
    ctx.update(per_file)
    return ctx


_SCALAR = (str, int, float, bool)


def _check_sidecar(side: Path, table: Mapping[str, Any], prefix: str) -> None:
    """Each key of a sidecar table known and of its type."""
    allowed = (*CONTEXT_KEYS, "meta", "options", "skip")
    for k, v in table.items():
        key = f"key {prefix}{k!r}"
        if k not in allowed:
            raise InputError(side, key, "unknown key", f"allowed: {', '.join(allowed)}")
        if k == "skip":
            if not isinstance(v, bool):
                raise InputError(side, key, f"must be true or false, got {short(v)}", "write skip = true")
        elif k in ("meta", "options"):
            if not isinstance(v, dict):
                raise InputError(side, key, "must be a table", f"write {k} = {{ name = value }}")
            for m, x in v.items():
                check_value(x, side, f"{key}.{m!r}", k)
        elif k != "adapter":
            check_name(k, v, side, key)
        elif not isinstance(v, str) or not v:
            raise InputError(side, key, f"must be an adapter name, got {short(v)}", "see `xfid adapters`")


def check_value(x: Any, file: Path | str, key: str | None, table: str) -> None:
    """A meta or option value: a string, a finite number or a boolean, of bounded length."""
    if not isinstance(x, _SCALAR):
        raise InputError(file, key, f"must be a string, number or boolean, got {short(x)}",
                         f'write {table} = {{ name = "value" }}')
    if isinstance(x, float) and not math.isfinite(x):
        raise InputError(file, key, f"must be a finite number, got {x!r}", "write the value as a number or a string")
    if isinstance(x, str) and len(x) > MAX_NAME_CHARS:
        raise InputError(file, key, f"is {len(x):,} characters long; at most {MAX_NAME_CHARS:,} are accepted",
                         "keep long descriptions out of the records")


def check_name(key: str, v: Any, file: Path | str, where: str | None) -> str:
    """A target, workload, run or fidelity: a non-empty string of bounded length (a known
    fidelity for `fidelity`).

    Raises:
        InputError: naming `where` (a sidecar key or a command-line flag).
    """
    if not isinstance(v, str):
        raise InputError(file, where, f"must be a string, got {short(v)}", f'write {key} = "..."')
    if not v.strip():
        raise InputError(file, where, "must not be empty", f"give a {key} name, or leave the key out")
    if len(v) > MAX_NAME_CHARS:
        raise InputError(file, where, f"is {len(v):,} characters long; at most {MAX_NAME_CHARS:,} are accepted")
    if key == "fidelity" and not is_valid_fidelity(v):
        raise InputError(file, where, f"{short(v)} is not a fidelity",
                         f"use one of {', '.join(FIDELITIES)} (or a derived one like roofline-cal)")
    return v


def short(v: Any, limit: int = 40) -> str:
    """A value for an error message: its repr (escaped), cut to `limit` characters."""
    r = ascii(v)
    return r if len(r) <= limit else r[: limit - 3] + "..."
