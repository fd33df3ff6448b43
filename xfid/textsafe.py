"""Untrusted text made safe to print or to open in a spreadsheet.

File names, op names and error excerpts come from files xfid did not write. Printed raw, a
control character can move the cursor, clear the screen or retitle the terminal, and a bidi
override can make `evil.exe\u202etxt.csv` read as something else; `terminal()` shows each
such character as a visible escape instead. A CSV cell that starts with `=`, `+`, `-`, `@`,
a tab or a carriage return is a formula to a spreadsheet; `csv_cell()` prefixes it with a
single quote (as OWASP advises), and `csv_safe_table()` does so for every text column of a
table, never for numbers.
"""

from __future__ import annotations

import re
from typing import Any

import click

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls except tab and newline; bidi marks, embeddings, overrides and isolates."""

_FORMULA = re.compile(r"^[=+\-@\t\r]")
FORMULA_START = "=+-@\t\r"
"""First characters that make a spreadsheet read a cell as a formula."""


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def terminal(text: Any) -> str:
    """`text` with control and bidi characters replaced by visible `\\xNN` / `\\uNNNN` escapes."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s


def echo(text: Any = "", **kwargs: Any) -> None:
    """click.echo of `terminal(text)`."""
    click.echo(terminal(text), **kwargs)


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: a leading `'` before a formula-like start."""
    return "'" + text if text and text[0] in FORMULA_START else text


def csv_safe_table(table: Any) -> Any:
    """A pyarrow table whose string columns have `csv_cell` applied (numbers untouched)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = []
    for col in table.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            hit = pc.fill_null(pc.match_substring_regex(col, _FORMULA.pattern), False)
            if pc.any(hit).as_py():
                col = pc.if_else(hit, pc.binary_join_element_wise(pa.scalar("'", col.type), col, ""), col)
        cols.append(col)
    return pa.Table.from_arrays(cols, names=table.column_names)


def csv_safe_frame(df: Any) -> Any:
    """A pandas frame whose text columns (object or categorical) have `csv_cell` applied.

    Numeric columns are never changed; a frame without a formula-like cell is returned as is.
    """
    import pandas as pd

    out = None
    for c in df.columns:
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = list(s.cat.categories)
            new = [csv_cell(v) if isinstance(v, str) else v for v in cats]
            if new == cats:
                continue
            fixed = (s.cat.rename_categories(new) if len(set(new)) == len(new)
                     else s.astype(object).map(lambda v: csv_cell(v) if isinstance(v, str) else v))
        elif s.dtype == object or isinstance(s.dtype, pd.StringDtype):
            if not _object_hit(s):
                continue
            fixed = s.map(lambda v: csv_cell(v) if isinstance(v, str) else v)
        else:
            continue
        if out is None:
            out = df.copy()
        out[c] = fixed
    return df if out is None else out


def _object_hit(s: Any) -> bool:
    """Whether an object column holds a string with a formula-like start (fast through Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = pa.array(s.to_numpy(), type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed values: look at each
        return bool(s.map(lambda v: isinstance(v, str) and bool(v) and v[0] in FORMULA_START).any())
    return bool(pc.any(pc.match_substring_regex(arr, _FORMULA.pattern)).as_py())


# --- the one output path ------------------------------------------------------------------

_STREAM_UNSAFE = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What `stream_safe` escapes: as `_UNSAFE`, but a CR that ends a CRLF line (CSV) is kept."""


def stream_safe(text: str) -> str:
    """`text` with every control and bidi character written as a `\\uNNNN` escape.

    This is the last line of defence under every command's output: whatever a command prints
    (tables, CSV, Markdown, JUnit, JSON) reaches the terminal through it. The `\\uNNNN` form is
    also a valid JSON string escape that decodes to the same character, so JSON output stays
    valid and means the same; a CRLF line end is kept, a lone CR (which moves the cursor back
    over what was printed) is not.
    """
    if not _STREAM_UNSAFE.search(text):
        return text
    return _STREAM_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class SafeStream:
    """A text stream whose `write` passes everything through `stream_safe`.

    Binary writes (`.buffer`, e.g. Parquet to a pipe) pass untouched: they are data, not text
    for a terminal. Everything else is delegated to the wrapped stream.
    """

    def __init__(self, inner: Any):
        self._inner = inner

    @property
    def raw_stream(self) -> Any:
        """The wrapped stream, for output that must control the terminal (a progress bar)."""
        return self._inner

    def write(self, s: str) -> int:
        self._inner.write(stream_safe(s) if isinstance(s, str) else s)
        return len(s)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def raw(stream: Any) -> Any:
    """The terminal stream under a `SafeStream` (or `stream` itself)."""
    return stream.raw_stream if isinstance(stream, SafeStream) else stream


class safe_output:
    """Context manager: sys.stdout and sys.stderr are `SafeStream`s while a command runs."""

    def __enter__(self) -> safe_output:
        import sys

        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = SafeStream(sys.stdout) if not isinstance(sys.stdout, SafeStream) else sys.stdout
        sys.stderr = SafeStream(sys.stderr) if not isinstance(sys.stderr, SafeStream) else sys.stderr
        return self

    def __exit__(self, *exc: Any) -> None:
        import sys

        sys.stdout, sys.stderr = self._saved
