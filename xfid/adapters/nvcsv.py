"""Shared reading for NVIDIA tool CSVs (ncu, nsys): preamble, header, physical lines, numbers."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xfid.adapters.base import ReadContext

PREAMBLE_LINES = 400
"""How far into a file the CSV header may start (tool messages and program output come first)."""
PREAMBLE_PREFIXES = ("==PROF==", "==WARNING==", "==ERROR==", "==DEBUG==", "Generating SQLite",
                     "Processing [", "Exporting ", "NOTICE:", "SKIPPED:", "** ")
"""Tool lines before a header (nsys prints ` ** CUDA API Summary (cuda_api_sum):` above a report
on the console; it is matched without its leading space)."""
_NUM = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d*)?(?:[eE][+-]?\d+)?$")


@dataclass
class Header:
    """Where the CSV header is: its 1-based physical line, byte offset and fields."""

    line: int
    offset: int
    fields: list[str]
    preamble: list[str] = field(default_factory=list)


def split_line(text: str) -> list[str]:
    """The fields of one CSV line (quotes honoured)."""
    return next(csv.reader([text]), [])


def find_header(ctx: ReadContext, is_header: Callable[[list[str]], bool], what: str, expected: str,
                fix: str) -> Header:
    """Skip tool preamble lines and return the header line the predicate accepts.

    Raises:
        InputError: the file is empty, not UTF-8, ends before a header, or has no such header.
    """
    preamble: list[str] = []
    first_other: tuple[int, str] | None = None
    last = 0
    in_message = False
    with ctx.path.open("rb") as f:
        offset = 0
        for lineno in range(1, PREAMBLE_LINES + 1):
            raw = f.readline()
            if not raw:
                break
            start = offset
            offset += len(raw)
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw, start = raw[3:], start + 3
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise ctx.error(f"line {lineno}", "not UTF-8 text", "save the file as UTF-8") from None
            if not text.strip():
                continue
            last = lineno
            fields = split_line(text)
            if is_header(fields):
                return Header(lineno, start, fields, preamble)
            # an indented line continues a tool message (nsys: "NOTICE: Existing SQLite export
            # found: ...\n        It is assumed file was previously exported from: ...")
            continued = text[:1].isspace() and in_message
            in_message = text.lstrip().startswith(PREAMBLE_PREFIXES) or continued
            preamble.append(text)
            if first_other is None and not in_message:
                first_other = (lineno, text)
    if not preamble and first_other is None:
        raise ctx.error(None, "the file is empty")
    skipped = next((p for p in preamble if p.startswith("SKIPPED")), None)
    if first_other is None or skipped:
        why = f" (the tool says {skipped!r})" if skipped else " (truncated?)"
        raise ctx.error(f"line {last}", f"the file ends before the {what} header{why}", fix)
    lineno, text = first_other
    raise ctx.error(f"line {lineno}", f"not a {what} header: {shorten(text)!r}; expected a line like {expected}", fix)


def shorten(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def iter_rows(ctx: ReadContext, header: Header) -> Iterator[tuple[int, list[str]]]:
    """(physical line, fields) of every non-blank row after the header; tool lines skipped.

    Raises:
        InputError: a byte sequence that is not UTF-8 (naming the line).
    """
    with ctx.path.open("rb") as fb:
        fb.seek(header.offset)
        fb.readline()
        text = io.TextIOWrapper(fb, encoding="utf-8", newline="")
        reader = csv.reader(text)
        last = 0
        try:
            for fields in reader:
                line = header.line + last + 1
                last = reader.line_num
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                if len(fields) == 1 and fields[0].startswith(("==PROF==", "==WARNING==")):
                    continue
                yield line, fields
        except UnicodeDecodeError:
            raise ctx.error(f"line {header.line + last + 1}", "not UTF-8 text", "save the file as UTF-8") from None
        except csv.Error as e:
            raise ctx.error(f"line {header.line + last + 1}", f"not valid CSV: {e}") from None


def field_count_error(ctx: ReadContext, line: int, fields: Sequence[str], expected: int):
    """The InputError for a row whose field count does not match the header."""
    got = len(fields)
    hint = "every row needs one field per header column"
    if got == 1 and fields[0].startswith("Processing ["):
        hint = "one report per file: write them with `nsys stats -f csv -o PREFIX`"
    elif got < expected:
        hint += "; the file may be truncated"
    return ctx.error(f"line {line}", f"expected {expected} fields, got {got}", hint)


def is_number(text: str) -> bool:
    """True for a decimal number as NVIDIA tools print it (thousands separators allowed)."""
    t = text.strip()
    return bool(t) and any(c.isdigit() for c in t) and bool(_NUM.match(t))


def number(text: str) -> float:
    """A number as NVIDIA tools print it: `"1,215,000,000.00"` -> 1215000000.0.

    Raises:
        ValueError: not a number.
    """
    if not is_number(text):
        raise ValueError(text)
    return float(text.strip().replace(",", ""))


def line_locs(first: int, n: int) -> pa.Array:
    """`line N` labels for n consecutive physical lines starting at `first` (vectorised)."""
    nums = pc.cast(pa.array(np.arange(first, first + n, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(pa.scalar("line"), nums, " ")


def const(value: str | None, n: int) -> pa.DictionaryArray:
    """A dictionary column holding one value n times (costs n int32 zeros)."""
    idx = pa.array(np.zeros(n, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(idx, pa.array([value], pa.string()))


def unit_in_header(name: str) -> tuple[str, str | None]:
    """`"Duration (ns)"` -> ("Duration", "ns"); `"Name"` -> ("Name", None)."""
    m = re.match(r"^(.*?)\s*\(([^()]*)\)$", name.strip())
    return (m.group(1), m.group(2)) if m else (name.strip(), None)


BLOCK_BYTES = 1 << 27
"""pyarrow CSV block size: ~128 MiB, about a million nsys trace rows per batch."""


def stream_csv(ctx: ReadContext, header: Header, types: dict[str, pa.DataType],
               block_size: int | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Stream the CSV after `header` with pyarrow: (physical line of the first row, batch).

    Only the columns in `types` are converted. Blank lines are kept as all-empty rows so that
    row k of the stream is physical line `header.line + 1 + k`; callers drop them.

    Raises:
        InputError: a row with the wrong field count or a non-numeric number, naming its line.
    """
    import pyarrow.csv as pcsv

    bad: list[Any] = []

    def on_invalid(row: Any) -> str:
        bad.append(row)
        return "error"

    with ctx.path.open("rb") as f:
        f.seek(header.offset)
        try:
            reader = pcsv.open_csv(
                f,
                read_options=pcsv.ReadOptions(block_size=block_size or BLOCK_BYTES),
                parse_options=pcsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=False,
                                                invalid_row_handler=on_invalid),
                convert_options=pcsv.ConvertOptions(column_types=types, include_columns=list(types),
                                                    strings_can_be_null=False,
                                                    quoted_strings_can_be_null=False),
            )
            line = header.line + 1
            for batch in reader:
                yield line, batch
                line += batch.num_rows
        except pa.ArrowInvalid as e:
            raise locate_bad_row(ctx, header, types, e) from None


def locate_bad_row(ctx: ReadContext, header: Header, types: dict[str, pa.DataType], err: Exception):
    """Find, with a slow exact scan (error path only), the line pyarrow could not read."""
    ncols = len(header.fields)
    names = [f.strip() for f in header.fields]
    numeric = [i for i, n in enumerate(names) if n in types and not pa.types.is_dictionary(types[n])
               and not pa.types.is_string(types[n])]
    for line, fields in iter_rows(ctx, header):
        if len(fields) != ncols:
            return field_count_error(ctx, line, fields, ncols)
        for i in numeric:
            v = fields[i].strip()
            if v and not is_number(v):
                return ctx.error(f"line {line}", f"{names[i]!r} value {fields[i]!r} is not a number")
    return ctx.error(None, f"not a readable CSV: {err}", "the file may be truncated inside a quoted field")


def check_tail(ctx: ReadContext) -> None:
    """Reject a file cut inside a quoted field: CSV readers would take the cut name as whole.

    Raises:
        InputError: the last line has an unbalanced quote (the file was truncated).
    """
    size = ctx.path.stat().st_size
    with ctx.path.open("rb") as f:
        f.seek(max(0, size - (1 << 20)))
        tail = f.read()
        if tail.endswith(b"\n"):
            return
        last = tail.rsplit(b"\n", 1)[-1]
        if last.count(b'"') % 2 == 0:
            return
        f.seek(0)
        lines = 1 + sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    raise ctx.error(f"line {lines}", "the file ends inside a quoted field (truncated?)",
                    "export the report again; the last row is incomplete")
