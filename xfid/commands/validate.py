"""Checks shared by the commands: finite numeric options, and a warning for an unknown target."""

from __future__ import annotations

import math
from typing import Any

import click

from xfid.errors import XfidError


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


def warn_unknown_target(config: Any, name: str | None, store: Any = None) -> str | None:
    """Warn on stderr when `name` is neither a configured target nor one the store already holds.

    Returns the warning (None when the name is known). The name is still used: a new target
    is legitimate, a typo (`h100-sxm5`) is not, and only the user can tell them apart.
    """
    if not name or name in config.targets:
        return None
    seen: list[str] = []
    if store is not None:
        try:
            import pyarrow.compute as pc

            seen = [t for t in pc.unique(store.read(columns=["target"]).column("target")).to_pylist() if t]
        except (XfidError, OSError):  # the warning is advice; a store problem is the command's to report
            seen = []
        if name in seen:
            return None
    close = config.close_targets(name, seen)
    from xfid.textsafe import terminal

    where = "neither a configured target nor in the store" if store is not None else "not a configured target"
    hint = (f"did you mean {' or '.join(close)}?" if close
            else f"configured targets: {', '.join(sorted(config.targets))}")
    msg = f"warning: target {terminal(repr(name))} is {where}: its records start a new target; {hint}"
    click.echo(msg, err=True)
    return msg
