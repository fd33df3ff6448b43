"""Checks shared by the commands: finite numeric options, and a warning for an unknown target."""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from xfid.errors import XfidError

SIDECAR = "xfid-source.toml"
"""The context file beside data files (as `xfid.ingest.SIDECAR`; kept here so help stays light)."""


class FiniteFloat(click.FloatRange):
    """A float option that refuses NaN and infinities, with an optional range (click's alone lets NaN through)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(rv, param, ctx)


ALPHA = FiniteFloat(0, 1, min_open=True, max_open=True)
"""A significance level: 0 < alpha < 1."""
NON_NEGATIVE = FiniteFloat(min=0)
"""A severity, relative error or tolerance: a finite number >= 0."""


def sidecar_targets(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The `target` names the xfid-source.toml files beside or under `paths` give (unreadable ones skipped).

    Symlinked folders are not followed; ingest reports a sidecar it cannot read.
    """
    sides: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for d, _dirs, files in os.walk(p):
                sides += [Path(d) / SIDECAR] if SIDECAR in files else []
        else:
            sides.append(p.parent / SIDECAR)
    names: list[str] = []
    for side in dict.fromkeys(sides):
        try:
            doc = tomllib.loads(side.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeError, tomllib.TOMLDecodeError):
            continue
        per_file = doc.get("files")
        tables = [doc, *(per_file.values() if isinstance(per_file, dict) else ())]
        names += [t["target"] for t in tables if isinstance(t, dict) and isinstance(t.get("target"), str)]
    return list(dict.fromkeys(names))


def warn_unknown_target(config: Any, name: str | None, store: Any = None,
                        paths: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
    """Warn on stderr for each target that is neither configured nor already in the store.

    `name` is the --target given; without it, the targets of the sidecars under `paths`.
    Returns the warnings. The names are still used: a new target is legitimate, a typo
    (`h100-sxm5`) is not, and only the user can tell them apart.
    """
    names = [name] if name else sidecar_targets(paths)
    from xfid.config import is_unknown_target

    names = [n for n in names if n and n not in config.targets and not is_unknown_target(n)]
    if not names:
        return []
    seen: list[str] = []
    if store is not None:
        try:
            import pyarrow.compute as pc

            seen = [t for t in pc.unique(store.read(columns=["target"]).column("target")).to_pylist() if t]
        except (XfidError, OSError):  # the warning is advice; a store problem is the command's to report
            seen = []
    from xfid.textsafe import terminal

    out = []
    for n in names:
        if n in seen:
            continue
        close = config.close_targets(n, seen)
        where = "neither a configured target nor in the store" if store is not None else "not a configured target"
        hint = (f"did you mean {' or '.join(close)}?" if close
                else f"configured targets: {', '.join(sorted(config.targets))}")
        msg = f"warning: target {terminal(repr(n))} is {where}: its records start a new target; {hint}"
        click.echo(msg, err=True)
        out.append(msg)
    return out
