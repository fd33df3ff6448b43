"""Strict, bounded JSON reading shared by the JSON-based adapters."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

from xfid.adapters.base import ReadContext

MAX_DEPTH = 64
MAX_LINE_BYTES = 256 << 20
"""Longest line read (a one-line JSON document included); a longer one is refused before it
is held in memory. Serving results with per-request arrays are one line of tens of MB."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_CHUNK = 1 << 22


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """How deep the brackets of a JSON text nest (strings ignored), counted without recursion.

    json.loads recurses once per level and raises RecursionError on deep input; this costs
    one regex pass, one byte translation and a running sum, and stops once `limit` is passed.
    """
    import numpy as np

    code = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    brackets = code.translate(_STEPS, _NOT_BRACKET)  # +1 per opening, -1 per closing bracket
    steps = np.frombuffer(brackets, dtype=np.int8)
    depth = deepest = 0
    for i in range(0, len(steps), _CHUNK):
        run = np.cumsum(steps[i:i + _CHUNK], dtype=np.int64) + depth
        deepest = max(deepest, int(run.max()))
        if deepest > limit:
            break
        depth = int(run[-1])
    return deepest


def loads(ctx: ReadContext, text: str, loc: str | None) -> Any:
    """json.loads that rejects NaN/Infinity and absurd nesting, naming the line on error."""
    if nesting_depth(text) > MAX_DEPTH:
        raise ctx.error(loc, f"JSON nested deeper than {MAX_DEPTH} levels",
                        "no serving benchmark writes such nesting; check that this is the tool's own file")
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ctx.error(loc, "JSON nested too deeply") from None
    except ValueError as e:
        raise ctx.error(loc, f"not valid JSON: {e}",
                        "NaN/Infinity are not JSON; write null" if "not a number" in str(e) else None) from None
    return obj


def _size(limit: int) -> str:
    """A byte count as the error messages write it: `2,097,152 bytes (2 MiB)`, `100 bytes`."""
    return f"{limit:,} bytes ({limit >> 20} MiB)" if limit >= 1 << 20 else f"{limit:,} bytes"


def bounded_lines(ctx: ReadContext, limit: int, fix: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file (a BOM is accepted), each line read with a bounded
    readline: a line longer than `limit` bytes is refused before it is held whole (`fix` is the
    hint of that error). The one bounded line reader of the adapters (`read_bounded`, xfid-records
    JSON lines)."""
    with ctx.path.open("rb") as f:
        for lineno in itertools.count(1):
            raw = f.readline(limit + 1)
            if not raw:
                return
            if len(raw) > limit:
                raise ctx.error(f"line {lineno}", f"line longer than {_size(limit)}", fix)
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ctx.error(f"line {lineno}", f"not UTF-8 text (byte {e.start} of the line)",
                                "save the file as UTF-8") from None


def read_bounded(ctx: ReadContext, limit: int = MAX_LINE_BYTES) -> str:
    """The whole file as text (as `read_text`), read line by line with a bounded readline."""
    text = "".join(line for _, line in bounded_lines(
        ctx, limit, "is this the tool's own output? no result line is that long"))
    if not text.strip():
        raise ctx.error(None, "the file is empty")
    return text


def objects(ctx: ReadContext) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """The JSON object(s) of a file: one object, or JSON lines. Yields (line label, object)."""
    text = read_bounded(ctx)
    stripped = text.strip()
    try:
        whole = (json.loads(stripped, parse_constant=_reject_constant)
                 if stripped.startswith("{") and nesting_depth(stripped) <= MAX_DEPTH else None)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        yield None, loads(ctx, stripped, None)
        return
    n = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        obj = loads(ctx, line, f"line {lineno}")
        if not isinstance(obj, dict):
            raise ctx.error(f"line {lineno}", f"expected a JSON object, got {type(obj).__name__}")
        n += 1
        yield f"line {lineno}", obj
    if n == 0:
        raise ctx.error(None, "no JSON object found")


def number(ctx: ReadContext, obj: dict[str, Any], key: str, loc: str) -> float | None:
    """A numeric field, None when absent/null; an error naming the key when not a number."""
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ctx.error(loc, f"{key!r} must be a number, got {v!r}")
    return float(v)


def bench_date(ctx: ReadContext, obj: dict[str, Any], loc: str) -> str | None:
    """The `date` of a serving benchmark result (`%Y%m%d-%H%M%S`, UTC) as ISO text, or None."""
    from datetime import UTC, datetime

    d = obj.get("date")
    if not isinstance(d, str):
        return None
    try:
        return datetime.strptime(d, "%Y%m%d-%H%M%S").replace(tzinfo=UTC).isoformat()
    except ValueError:
        raise ctx.error(loc, f"date {d!r} is not %Y%m%d-%H%M%S") from None


def check_request_rate(ctx: ReadContext, obj: dict[str, Any], loc: str) -> None:
    """`request_rate` is a number, or the string "inf" (an unbounded rate)."""
    rate = obj.get("request_rate")
    if isinstance(rate, str) and rate != "inf":
        raise ctx.error(loc, f"request_rate must be a number or \"inf\", got {rate!r}")
