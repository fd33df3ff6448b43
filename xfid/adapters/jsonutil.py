"""Strict, bounded JSON reading shared by the JSON-based adapters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from xfid.adapters.base import ReadContext, read_text

MAX_DEPTH = 64


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _depth(obj: Any, limit: int = MAX_DEPTH) -> int:
    stack = [(obj, 1)]
    deepest = 0
    while stack:
        o, d = stack.pop()
        deepest = max(deepest, d)
        if d > limit:
            return d
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)
    return deepest


def loads(ctx: ReadContext, text: str, loc: str | None) -> Any:
    """json.loads that rejects NaN/Infinity and absurd nesting, naming the line on error."""
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ctx.error(loc, "JSON nested too deeply") from None
    except ValueError as e:
        raise ctx.error(loc, f"not valid JSON: {e}",
                        "NaN/Infinity are not JSON; write null" if "not a number" in str(e) else None) from None
    if _depth(obj) > MAX_DEPTH:
        raise ctx.error(loc, f"JSON nested deeper than {MAX_DEPTH} levels")
    return obj


def objects(ctx: ReadContext) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """The JSON object(s) of a file: one object, or JSON lines. Yields (line label, object)."""
    text = read_text(ctx)
    stripped = text.strip()
    try:
        whole = json.loads(stripped, parse_constant=_reject_constant) if stripped.startswith("{") else None
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
