"""`Request`: what one correlation is asked for, built once and passed whole to the engine.

The command line builds it from the shared options (xfid.commands.options.request), the API
from its arguments (`Request.of`); every engine reads the same fields under the same names, so
`runs` is `runs` and `as_of` is `as_of` from the flag to the selection.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

Runs = str | Mapping[str, str] | Sequence[str] | None


@dataclass(frozen=True)
class Request:
    """One correlation's selection and what it brings back.

    Attributes:
        targets: only these targets (empty: every target in the store).
        runs: prefer this run over the latest: `"R"`, `("archmodel=R", ...)` or `{"archmodel": "R"}`.
        as_of: ignore records newer than this date (the whole day) or ISO date-time.
        pairs: `"cand->ref"` strings or Pair objects (empty: `[[compare]]`, else the defaults).
        include_missing: list missing_reference rows among the discrepancies too.
        kendall, bootstrap: compute Kendall tau and the bootstrap CIs.
        fingerprints: "all" rows, or only "discrepancies" other than missing_reference.
        provenance: read source_loc for every row.
        track: fingerprints whose rows come back whatever their kind (an engine that returns
            only some rows, Spark, keeps them; the tracker's open issues).
        keep: rows whose columns hold one of the given values come back too (column -> values:
            the rows a calibration fits).
        exclude_keys: keys (target, workload, op, metric, stat, candidate, reference) whose rows
            stay in the rows but leave the comparisons (the statistics): the tracker's issues
            marked invalid (the data is wrong). Recorded in `settings["excluded_keys"]`.
        out: write the discrepancies as Parquet parts into this new folder instead of bringing
            them back (xfid.engine.dataset; the API's `correlate(out=...)` gives a temp folder
            here and renames it into place).
        out_ordered: the parts, read one after the other in name order, hold the rows in the
            order the rows would come back in (pair, then key); an engine whose writers hold
            rows in another order sorts them for it (Spark: a range sort). `check` reads its
            scratch dataset back in that order; `-o` needs no order and pays for none.
    """

    targets: tuple[str, ...] = ()
    runs: Runs = None
    as_of: Any = None
    pairs: tuple[Any, ...] = ()
    include_missing: bool = False
    kendall: bool = True
    bootstrap: bool = True
    fingerprints: str = "all"
    provenance: bool = True
    track: tuple[str, ...] = ()
    keep: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    exclude_keys: tuple[tuple[str, ...], ...] = ()
    out: str | None = None
    out_ordered: bool = False

    @classmethod
    def of(cls, *, targets: Iterable[str] | None = None, runs: Runs = None, as_of: Any = None,
           pairs: Iterable[Any] | None = None, track: Iterable[str] | None = None,
           keep: Mapping[str, Sequence[str]] | None = None,
           exclude_keys: Iterable[Sequence[Any]] | None = None, **flags: Any) -> Request:
        """A request from loose arguments (lists, None for "not given"; one string is one name);
        `flags` are the other fields."""
        return cls(targets=_names(targets), runs=_runs(runs), as_of=as_of, pairs=_names(pairs), track=_names(track), keep={str(k): tuple(str(x) for x in v) for k, v in (keep or {}).items()},
                   exclude_keys=key_set(exclude_keys), **flags)

    def but(self, **changes: Any) -> Request:
        """This request with some fields changed (a frozen copy)."""
        return replace(self, **changes)


def key_set(keys: Iterable[Sequence[Any]] | None) -> tuple[tuple[str, ...], ...]:
    """Keys (target, workload, op, metric, stat, candidate, reference) in one form: text (None as
    ""), distinct, sorted — what `Request.exclude_keys` holds."""
    return tuple(sorted({tuple(str(x or "") for x in k) for k in keys or ()}))


def _names(values: Iterable[Any] | None) -> tuple[Any, ...]:
    """Names as a tuple: one string is one name (not its characters), None none."""
    return (values,) if isinstance(values, str) else tuple(values or ())


def _runs(runs: Runs) -> Runs:
    """A run preference in one form: a string or mapping as given, a list as a tuple, none as None."""
    if runs is None or isinstance(runs, (str, Mapping)):
        return runs
    return tuple(runs) or None
