"""Options shared by the commands, each defined once with the same name, multiplicity and help.

Selection options (which records a command reads) repeat everywhere: `--target`, `--run` and
`--as-of` mean the same in correlate, calibrate, check, snapshot, compare and report. `ingest`'s
--target/--run are different things (the value given to records that do not carry one) and so
are defined where they are used.
"""

from __future__ import annotations

import functools
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


def request(targets: tuple[str, ...] = (), runs: tuple[str, ...] = (), as_of: str | None = None, *,
            pairs: tuple[str, ...] = (), include_missing: bool = False, **flags: Any) -> Any:
    """The engine's Request (xfid.engine.request) of the selection options, built once here and
    passed whole to the API; `flags` are its other fields (fingerprints=, ...)."""
    from xfid.engine.request import Request

    return Request.of(targets=targets, runs=runs, as_of=as_of, pairs=pairs, include_missing=include_missing,
                      **flags)


def engine(f: F) -> F:
    """`--engine local|spark` and `--master URL` -> `engine`: None when neither is given (the
    configured engine), else an xfid.engine.engines.EngineChoice with the master among the
    engine's own options (Spark's master: local[2], spark://HOST:7077, yarn, ...)."""

    @functools.wraps(f)
    def with_engine(*args: Any, engine: str | None = None, master: str | None = None, **kwargs: Any) -> Any:
        choice = None
        if engine is not None or master is not None:
            from xfid.engine.engines import EngineChoice

            choice = EngineChoice(engine, {"master": master} if master else {})
        return f(*args, engine=choice, **kwargs)

    g = click.option("--master", metavar="URL",
                     help="Spark master for --engine spark (default env XFID_SPARK_MASTER, else "
                          "[engine.spark] master, else local[*]).")(with_engine)
    return click.option("--engine", type=click.Choice(["local", "spark"]), default=None,
                        help="Correlate in this process (local) or on Apache Spark (default [engine] name, "
                             "else local; spark needs pip install 'xfid[spark]').")(g)


def actor(f: F) -> F:
    """`--actor NAME` -> `actor_opt`: who is recorded as acting (on commands that change the tracker)."""
    return click.option("--actor", "actor_opt", metavar="NAME",
                        help="Who is acting (default: env XFID_ACTOR, else the login name).")(f)


def output_format(*choices: str, default: str | None = None) -> Callable[[F], F]:
    """`--format` among `choices` (default: the first) -> `fmt`."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default or choices[0],
                        show_default=True, help="Output format.")


def output(help: str = "Write to FILE instead of stdout.", required: bool = False) -> Callable[[F], F]:
    """`-o/--output FILE` -> `output` (written by xfid.outfile: atomic, never a half-written file;
    a path into the store or an empty name is refused when the option is read, before the
    command does anything)."""
    return click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE", required=required,
                        help=help, callback=guarded_output)


def guarded_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: `xfid.outfile.guard` on an output path (a file; `folder` for a folder
    option whose metavar is DIR), raising its Error: before the command runs."""
    if value is not None:
        from xfid.outfile import guard

        flag = max(param.opts, key=len) if param.opts else "-o"
        guard(value, folder=isinstance(param.type, click.Path) and not param.type.file_okay, flag=flag)
    return value


def parse_kv(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """`k=v` pairs from a repeated option; a usage error on a pair without '='."""
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise click.UsageError(f"{flag} expects KEY=VALUE, got {p!r}")
        out[k.strip()] = v.strip()
    return out
