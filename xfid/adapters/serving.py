"""Per-request arrays of serving benchmarks (vLLM `--save-detailed`, SGLang `--output-details`).

Both tools can save, beside their summary keys, one entry per request: `input_lens`,
`output_lens`, `ttfts` (seconds), `itls` (a list of seconds per request), `errors` ("" when
the request succeeded) and `generated_texts`. xfid keeps the per-request rows in compact form:
as distribution stats of the successful requests (mean, median, std, min, max, p90, p95, p99,
computed as both tools compute their summaries: numpy's linear percentiles, population std)
with the request or sample count in `n_samples`, and `source_loc` naming the array they were
computed from, so each number can be re-derived from the file (its bytes are identified by the
record's source_id). Stats the summary keys already give are not computed again; they are
checked against the arrays instead, and a disagreement (e.g. seconds read as ms) is a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from xfid.adapters.base import ReadContext

DIST_STATS = ("mean", "median", "std", "min", "max", "p90", "p95", "p99")
READ = ("input_lens", "output_lens", "ttfts", "itls", "errors")
"""The per-request arrays xfid reads; `generated_texts` is not read (it is listed as skipped)."""
# array -> (metric, unit of the array's numbers)
METRICS: dict[str, tuple[str, str]] = {"ttfts": ("ttft", "s"), "itls": ("itl", "s"),
                                       "input_lens": ("input_tokens", "tokens"),
                                       "output_lens": ("output_tokens", "tokens")}


@dataclass
class Requests:
    """The successful requests' values of one result object's per-request arrays."""

    total: int
    ok: int
    failed: int | None
    """Requests with a non-empty error; None when the file has no `errors` array."""
    values: dict[str, np.ndarray]
    """Array name -> the successful requests' numbers (`itls` flattened), in the array's unit."""


def read_requests(ctx: ReadContext, obj: Mapping[str, Any], loc: Callable[[str], str]) -> Requests | None:
    """The per-request arrays of `obj`, checked; None when it has none.

    Raises:
        InputError: an array that is not a list, of another length than the others, or holding
            something other than non-negative numbers (itls: lists of them; errors: text or null).
    """
    present = [k for k in READ if k in obj]
    if not any(k in obj for k in ("ttfts", "itls", "input_lens", "output_lens")):
        return None
    lengths: dict[str, int] = {}
    for k in present:
        if not isinstance(obj[k], list):
            raise ctx.error(loc(k), f"{k!r} must be a list (one entry per request), got {type(obj[k]).__name__}")
        lengths[k] = len(obj[k])
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k} {n}" for k, n in lengths.items())
        raise ctx.error(loc(present[0]), f"per-request arrays differ in length ({detail})",
                        "the file may be truncated or edited; write it again with the benchmark")
    total = next(iter(lengths.values()))
    errors = obj.get("errors")
    if errors is not None:
        for i, e in enumerate(errors):
            if e is not None and not isinstance(e, str):
                raise ctx.error(f"{loc('errors')}[{i}]", f"expected the error text or \"\", got {e!r}")
        ok_mask = np.array([not e for e in errors], dtype=bool)
        failed: int | None = int(total - ok_mask.sum())
    else:
        ok_mask = np.ones(total, dtype=bool)
        failed = None
    values: dict[str, np.ndarray] = {}
    for k in ("ttfts", "input_lens", "output_lens"):
        if k in obj:
            values[k] = numbers(ctx, obj[k], loc(k))[ok_mask]
    if "itls" in obj:
        flat: list[np.ndarray] = []
        for i, (per_request, good) in enumerate(zip(obj["itls"], ok_mask, strict=True)):
            if not isinstance(per_request, list):
                raise ctx.error(f"{loc('itls')}[{i}]", f"expected a list of inter-token latencies, got {per_request!r}")
            if good and per_request:
                flat.append(numbers(ctx, per_request, f"{loc('itls')}[{i}]"))
        values["itls"] = np.concatenate(flat) if flat else np.empty(0)
    return Requests(total, int(ok_mask.sum()), failed, values)


def numbers(ctx: ReadContext, items: list[Any], where: str) -> np.ndarray:
    """A list of finite numbers >= 0 as an array; an error naming the first other entry."""
    bad = next((i for i, v in enumerate(items) if isinstance(v, bool) or not isinstance(v, (int, float))), None)
    if bad is None:
        a = np.asarray(items, dtype=np.float64)
        if not a.size or (np.isfinite(a).all() and (a >= 0).all()):
            return a
        bad = int(np.flatnonzero(~np.isfinite(a) | (a < 0))[0])
    raise ctx.error(where, f"entry {bad} is {items[bad]!r}; per-request values are numbers >= 0")


Add = Callable[[str, str, float, str, str, int], None]
"""add(metric, stat, value, unit, source_loc, n_samples): one record of the adapter."""


def emit(ctx: ReadContext, req: Requests, summary: Mapping[tuple[str, str], float], add: Add,
         loc: Callable[[str], str]) -> None:
    """Records for what the arrays add to the summary keys: missing stats and request counts.

    Args:
        summary: (metric, stat) -> value in the metric's canonical unit (s, tokens, count), for
            each record the summary keys gave; those stats are checked, not emitted again.
        add: the adapter's record builder; loc: key -> source_loc prefix (e.g. "line 2: $.ttfts").
    """
    for key, (metric, unit) in METRICS.items():
        a = req.values.get(key)
        if a is None or not a.size:
            continue
        n = int(a.size)
        what = "inter-token latencies of the successful requests" if key == "itls" else "successful requests"
        for stat, value in stats(a).items():
            have = summary.get((metric, stat))
            if have is None:
                add(metric, stat, value, unit, f"{loc(key)}: {stat} of {n} {what}", n)
            elif not agrees(have, value):
                ctx.warn(f"{loc(key)}: {metric} {stat} from the {n} {what} is {value:.6g} {unit}, but the "
                         f"summary key says {have:.6g} {unit}; the summary key is kept")
    if ("requests_completed", "value") not in summary:
        where = (f"{loc('errors')}: requests without an error" if req.failed is not None
                 else f"{loc(next(iter(req.values)))}: entries")
        add("requests_completed", "value", float(req.ok), "count", where, req.ok)
    if req.failed is not None and ("requests_failed", "value") not in summary:
        add("requests_failed", "value", float(req.failed), "count", f"{loc('errors')}: requests with an error",
            req.total)


def stats(a: np.ndarray) -> dict[str, float]:
    """The DIST_STATS of a non-empty array, as vLLM and SGLang compute their summaries."""
    out = {"mean": float(np.mean(a)), "median": float(np.median(a)), "std": float(np.std(a)),
           "min": float(np.min(a)), "max": float(np.max(a))}
    for p in (90, 95, 99):
        out[f"p{p}"] = float(np.percentile(a, p))
    return out


def agrees(summary: float, derived: float) -> bool:
    """A summary value and the same stat re-computed from the arrays, both in one unit."""
    return abs(summary - derived) <= 1e-6 * max(abs(summary), abs(derived)) + 1e-9


__all__ = ["DIST_STATS", "METRICS", "READ", "Requests", "agrees", "emit", "numbers", "read_requests", "stats"]
