"""The `xfid` command line: a thin click layer over the Python API; one place maps errors to exit 2."""

from __future__ import annotations

import contextlib
import importlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import click

from xfid import __version__
from xfid.app import App
from xfid.errors import Interrupted, XfidError, XfidWarning
from xfid.sqlbackend import mask
from xfid.textsafe import safe_output, terminal

COMMANDS: dict[str, str] = {
    "adapters": "xfid.commands.adapters",
    "calibrate": "xfid.commands.calibrate",
    "check": "xfid.commands.check",
    "compare": "xfid.commands.compare",
    "correlate": "xfid.commands.correlate",
    "demo": "xfid.commands.demo",
    "doctor": "xfid.commands.doctor",
    "export": "xfid.commands.export",
    "history": "xfid.commands.history",
    "ingest": "xfid.commands.ingest",
    "issues": "xfid.commands.issues",
    "profile": "xfid.commands.profile",
    "report": "xfid.commands.report",
    "roofline": "xfid.commands.roofline",
    "rtl": "xfid.commands.rtl",
    "serve": "xfid.commands.serve",
    "snapshot": "xfid.commands.snapshot",
    "sources": "xfid.commands.sources",
    "store": "xfid.commands.store",
    "summary": "xfid.commands.store_summary",
    "token": "xfid.commands.token",
}
"""Command name -> the module whose `cli` it is (imported when the command runs or help lists it).
The help shown for a command is its own docstring: one place."""
REMOTE_COMMANDS = ("ingest", "check", "issues", "compare")
"""The commands that `--server URL` sends to `xfid serve` (xfid.client)."""


FLAGS: dict[str, str] = {"targets": "--target", "target": "--target", "pairs": "--pair", "period": "PERIOD",
                         "fmt": "--format", "output": "-o", "path": "--store",
                         "records": "--to-records", "candidate": "--candidate", "reference": "--reference"}
"""The flag of each library parameter whose flag is not `--` + its name with dashes (xfid.errors)."""


def flag(param: str) -> str:
    """The command line's name for a library parameter an error is about: `as_of` -> `--as-of`."""
    return FLAGS.get(param, "--" + param.replace("_", "-"))


SHORT_HELP_LIMIT = 10_000
"""click cuts a command's short help at `limit` characters with "..."; the first sentence is always shorter."""


class UserError(click.ClickException):
    """An XfidError as click shows it: `Error: ...` on stderr, exit 2."""

    exit_code = 2


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """The library's XfidWarnings as `warning: ...` lines on stderr (escaped), once each; other
    warnings are passed on as they came."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", XfidWarning)
        try:
            yield
        finally:
            shown = list(seen)
    for w in shown:
        if issubclass(w.category, XfidWarning):
            click.echo(f"warning: {terminal(mask(str(w.message)))}", err=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class LazyGroup(click.Group):
    """A group whose subcommands live in their own modules, imported on use.

    It is also the one place that turns the library's `XfidError` into `Error: ...` + exit 2.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """click's main with every command's output, whatever prints it, through one sanitising
        stream, and any text of an exception raised outside `invoke` (while parsing the global
        options, opening the App) masked as well."""
        with safe_output():
            try:
                return super().main(*args, **kwargs)
            except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError,
                    SystemExit, KeyboardInterrupt):
                raise
            except Exception as e:
                raise SystemExit(internal_error(e).exit_code) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _warnings_on_stderr():
                return super().invoke(ctx)
        except XfidError as e:
            # names and excerpts from files escaped; any password of a database or bucket URL masked
            raise UserError(terminal(mask(e.render(flag)))) from None
        except KeyboardInterrupt as e:
            # Ctrl-C: say what it left (a command that knows raises Interrupted with that), exit 130
            what = str(e) if isinstance(e, Interrupted) and str(e) else "Ctrl-C"
            click.echo(f"Interrupted: {terminal(mask(what))}", err=True)
            ctx.exit(130)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise
        except Exception as e:  # a bug: its traceback is shown for the report, never with a password in it
            raise internal_error(e) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return importlib.import_module(COMMANDS[name]).cli

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with the first sentence of its docstring, whole (wrapped, never cut with "...")."""
        rows = [(name, importlib.import_module(COMMANDS[name]).cli.get_short_help_str(SHORT_HELP_LIMIT))
                for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def internal_error(e: BaseException) -> click.exceptions.Exit:
    """Print `e`'s traceback masked and escaped (the last line of defence: whatever text it
    carries, a URL's password is never shown) and give the exit of an internal error (1)."""
    import traceback

    click.echo(terminal(mask("".join(traceback.format_exception(e)))).rstrip("\n"), err=True)
    click.echo(terminal(mask(f"Error: internal error ({type(e).__name__}); this is a bug in xfid: please report "
                             "it with the traceback above")), err=True)
    return click.exceptions.Exit(1)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xfid")
@click.option("--store", "store_opt", metavar="DIR", envvar="XFID_STORE",
              help="Store directory (default .xfid/, or [store].path in xfid.toml; env XFID_STORE).")
@click.option("--config", "config_opt", metavar="FILE", envvar="XFID_CONFIG",
              help="xfid.toml to use (default ./xfid.toml, else the config of the store's last check, "
                   "else the bundled targets).")
@click.option("--server", "server_opt", metavar="URL", envvar="XFID_SERVER",
              help="Talk to `xfid serve` at URL instead of the store (ingest, check, issues, compare); "
                   "the token comes from env XFID_TOKEN (env XFID_SERVER).")
@click.pass_context
def cli(ctx: click.Context, store_opt: str | None, config_opt: str | None, server_opt: str | None) -> None:
    """xfid: multi-fidelity correlation and discrepancy tracker for accelerator performance numbers.

    Ingest roofline, architecture-model, RTL and measured numbers into one store, correlate
    them, track every discrepancy, render reports and gate CI on fidelity drift.
    """
    from xfid import outfile

    if server_opt and ctx.invoked_subcommand not in REMOTE_COMMANDS:
        raise click.UsageError(f"--server (or env XFID_SERVER) works with {', '.join(REMOTE_COMMANDS)}; "
                               f"`xfid {ctx.invoked_subcommand}` runs on a store: unset XFID_SERVER for it")
    app = App(store_opt, config_opt, server_opt or None)
    ctx.obj = app
    outfile.protect(app, app.store_areas)  # no -o of any command may write into this store
    ctx.call_on_close(app.close)


def main(argv: list[str] | None = None) -> None:
    """Entry point for the console script and `python -m xfid`."""
    try:
        cli.main(args=argv, prog_name="xfid")
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
