"""One root error for user mistakes; the CLI turns it into `Error: ...` and exit 2."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class XfidError(Exception):
    """A user mistake or bad input: the message names the thing and the fix.

    An error about an argument names it the way the caller spelt it: the library raises it with
    the Python parameter's name as a `{placeholder}` of the message, e.g.
    `ReportError("{until} {value!r} is not a date", params=("until",), value=text)`; `str(e)` reads
    "until '...' is not a date" (what a Python caller passed), and the command line renders the
    same error with its flag ("--until '...'") through `render` (xfid.cli.FLAGS). The values are
    substituted by `str.format`, so braces in them are kept as they are.
    """

    exit_code = 2

    def __init__(self, message: str = "", *, params: Sequence[str] = (), **values: Any):
        self.template = message
        self.params = tuple(params)
        self.values = values
        super().__init__(self.render() if self.params else message)

    def render(self, name: Callable[[str], str] | None = None) -> str:
        """The message with each parameter named by `name(param)` (default: the Python name)."""
        if not self.params:
            return str(self)
        return self.template.format(**{p: name(p) if name else p for p in self.params}, **self.values)


class XfidWarning(UserWarning):
    """Advice that is not an error (a filter that matches nothing, with the names close to it): a
    Python warning for the library's callers; the command line prints it as `warning: ...`."""


class UnitError(XfidError):
    """An unknown unit, or a unit that does not belong to a metric."""


class SchemaError(XfidError):
    """Records that do not fit the normalized schema."""


class InputError(XfidError):
    """A source file that an adapter cannot read."""

    def __init__(self, path: object, loc: str | None, what: str, fix: str | None = None):
        where = f"{path}" + (f", {loc}" if loc else "")
        msg = f"{where}: {what}"
        if fix:
            msg += f" ({fix})"
        super().__init__(msg)
        self.path = str(path)
        self.loc = loc
        self.what = what


class AdapterError(XfidError):
    """An unknown adapter, or a file no adapter (or more than one) recognises."""


class ConfigError(XfidError):
    """A bad xfid.toml or a missing target field."""


class StoreError(XfidError):
    """A store that cannot be opened, read or written."""


class EngineError(XfidError):
    """A correlation request that cannot be answered."""


class TrackerError(XfidError):
    """An unknown issue id, an invalid transition or a bad date."""


class RTLError(XfidError):
    """A missing simulator, top module, parameter or a Verilog syntax error."""


class ReportError(XfidError):
    """A report that cannot be rendered from what is in the store."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what it left behind: the CLI prints the message and exits 130."""
