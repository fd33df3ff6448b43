"""Options shared by the commands, each defined once with the same name, multiplicity and help.

Selection options (which records a command reads) repeat everywhere: `--target`, `--run` and
`--as-of` mean the same in correlate, calibrate, check, snapshot, compare and report. `ingest`'s
--target/--run are different things (the value given to records that do not carry one) and so
are defined where they are used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

F = Callable[..., Any]


def targets(f: F) -> F:
    """`--target T` (repeatable) -> `targets: tuple[str, ...]`."""
    return click.option("--target", "targets", multiple=True, metavar="TARGET",
                        help="Only this hardware target (repeatable).")(f)


def runs(f: F) -> F:
    """`--run R|FIDELITY=R` (repeatable) -> `runs: tuple[str, ...]`."""
    return click.option("--run", "runs", multiple=True, metavar="RUN|FIDELITY=RUN",
                        help="Prefer this run over the latest (for every fidelity, or one; repeatable).")(f)


def as_of(f: F) -> F:
    """`--as-of DATE` -> `as_of: str | None` (parsed by the engine: one rule everywhere)."""
    return click.option("--as-of", "as_of", metavar="DATE",
                        help="Ignore records newer than DATE (YYYY-MM-DD: the whole day; or an ISO date-time).")(f)


def selection(f: F) -> F:
    """--target, --run and --as-of together."""
    return targets(runs(as_of(f)))


def actor(f: F) -> F:
    """`--actor NAME` -> `actor_opt`: who is recorded as acting (on commands that change the tracker)."""
    return click.option("--actor", "actor_opt", metavar="NAME",
                        help="Who is acting (default: env XFID_ACTOR, else the login name).")(f)


def output_format(*choices: str, default: str | None = None) -> Callable[[F], F]:
    """`--format` among `choices` (default: the first) -> `fmt`."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default or choices[0],
                        show_default=True, help="Output format.")


def output(help: str = "Write to FILE instead of stdout.", required: bool = False) -> Callable[[F], F]:
    """`-o/--output FILE` -> `output` (written by xfid.outfile: atomic, never a half-written file)."""
    return click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE", required=required,
                        help=help)


def parse_kv(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """`k=v` pairs from a repeated option; a usage error on a pair without '='."""
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise click.UsageError(f"{flag} expects KEY=VALUE, got {p!r}")
        out[k.strip()] = v.strip()
    return out
