"""One root error for user mistakes; the CLI turns it into `Error: ...` and exit 2."""

from __future__ import annotations


class XfidError(Exception):
    """A user mistake or bad input: the message names the thing and the fix."""

    exit_code = 2


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
