"""Scopes in the engine: the scope of every entry (`xfid.scope`), and the numbers derived from a
run's totals so that they compare with per-token and per-second numbers.

Both engines call `entry_scopes` (the local one on the chosen records, Spark per group) and the
`Aligner` calls `derive` per fidelity side, so the rule is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from xfid.engine.keys import combine
from xfid.scope import SCOPES, scope_of

SCOPE_NAMES: list[str] = list(SCOPES)
"""Scope codes: index into this list."""
RUN = SCOPE_NAMES.index("run")

DERIVED: tuple[tuple[str, str, str, str, str], ...] = (
    # (derived metric, its unit, numerator, divisor, how the note names it)
    ("energy_per_token", "J/token", "energy", "output_tokens", "run energy / run output_tokens"),
    ("power", "W", "energy", "duration", "run energy / run duration"),
)
"""Where a record carries what is needed, a run's total becomes a per-token or per-second
number: derived in the fidelity that has both totals of the same run, never over a native number
of that metric (any stat) for the same target, workload and op."""
DERIVED_METRICS = tuple(d[0] for d in DERIVED)
DERIVED_UNITS = tuple(d[1] for d in DERIVED)


class EntryScope(NamedTuple):
    """Per entry: its scope code (into SCOPE_NAMES) and its run code (entries of one run share it)."""

    scope: np.ndarray
    run: np.ndarray


def text_codes(values: Sequence[object] | np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Codes into the sorted distinct texts of `values` (None as "")."""
    arr = np.array(["" if v is None else str(v) for v in values], dtype=object)
    if not len(arr):
        return np.zeros(0, np.int64), []
    names, inv = np.unique(arr, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), list(names)


def entry_scopes(parts: dict[str, tuple[np.ndarray, Sequence[str | None]]]) -> np.ndarray:
    """The scope code of every entry from its (codes, names) of `source`, `metric`, `stat`, `op`,
    `unit` and `config` (a code of -1 is a null). One `scope_of` call per distinct combination."""
    order = ("source", "metric", "stat", "op", "unit", "config")
    n = len(parts["metric"][0])
    if not n:
        return np.zeros(0, np.int8)
    codes, names = [], []
    for k in order:
        c, nm = parts[k]
        nm = list(nm)
        if k == "config":  # only a config that states a scope matters: the rest are one code
            keep = [i for i, t in enumerate(nm) if t and '"scope"' in t]
            remap = np.full(len(nm) + 1, 0, np.int64)
            for j, i in enumerate(keep):
                remap[i] = j + 1
            c = remap[np.where(np.asarray(c) < 0, len(nm), c)]
            nm = [None] + [nm[i] for i in keep]
        else:
            c = np.where(np.asarray(c) < 0, len(nm), c)
            nm = [*nm, None]
        codes.append(np.asarray(c, np.int64))
        names.append(nm)
    combo, _ = combine(codes, [len(x) for x in names])
    uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
    out = np.empty(len(uniq), np.int8)
    for j, i in enumerate(first):
        src, metric, stat, op, unit, cfg = (names[k][codes[k][i]] for k in range(len(order)))
        out[j] = SCOPE_NAMES.index(scope_of(src, metric or "", stat or "", bool(op), unit, cfg))
    return out[inv.reshape(-1)]


class Derived(NamedTuple):
    """Entries derived from run totals within one fidelity side."""

    entries: np.ndarray  # the numerator's entry (its codes and provenance stand for the number)
    metric: np.ndarray  # derived metric code
    value: np.ndarray
    ref_value: np.ndarray
    unit: np.ndarray  # unit code
    scope: np.ndarray  # scope code of the derived number
    kind: np.ndarray  # index into DERIVED
    divisor: np.ndarray  # the divisor's value (named in the note)


def derive(e: np.ndarray, codes: dict[str, np.ndarray], dims: dict[str, list[str]], value: np.ndarray,
           ref_value: np.ndarray, es: EntryScope, unit_names: list[str]) -> Derived | None:
    """The per-token and per-second numbers the run totals among entries `e` (one fidelity) give."""
    metric_names = dims["metric"]
    if not len(e) or "energy" not in metric_names or "value" not in dims["stat"]:
        return None
    m, st = codes["metric"][e], codes["stat"][e]
    sv = dims["stat"].index("value")
    run_total = (es.scope[e] == RUN) & (st == sv)
    num = e[run_total & (m == metric_names.index("energy"))]
    if not len(num):
        return None
    t, w, o = codes["target"], codes["workload"], codes["op"]
    cards = [len(dims["target"]), len(dims["workload"]), len(dims["op"]), int(es.run.max(initial=0)) + 2]
    place, _ = combine([t[e], w[e], o[e], es.run[e] + 1], cards)
    twoc, _ = combine([t[e], w[e], o[e]], cards[:3])
    num_place, _ = combine([t[num], w[num], o[num], es.run[num] + 1], cards)
    num_two, _ = combine([t[num], w[num], o[num]], cards[:3])
    out: list[tuple[np.ndarray, ...]] = []
    for k, (dm, du, _, dv, _) in enumerate(DERIVED):
        if dv not in metric_names or dm not in metric_names:
            continue
        div = run_total & (m == metric_names.index(dv))
        native = np.isin(num_two, twoc[m == metric_names.index(dm)])
        dp = place[div]
        order = np.argsort(dp, kind="stable")
        dp = dp[order]
        pos = np.minimum(np.searchsorted(dp, num_place), max(len(dp) - 1, 0))
        hit = (dp[pos] == num_place) if len(dp) else np.zeros(len(num), bool)
        hit &= ~native
        if not hit.any():
            continue
        d_entries = e[div][order][pos[hit]]
        n_entries = num[hit]
        dval = value[d_entries]
        with np.errstate(divide="ignore", invalid="ignore"):
            good = dval > 0
            n_entries, d_entries, dval = n_entries[good], d_entries[good], dval[good]
            val = value[n_entries] / dval
            ref = ref_value[n_entries] / ref_value[d_entries]
        scope = SCOPE_NAMES.index("token" if dm == "energy_per_token" else "second")
        cnt = len(n_entries)
        out.append((n_entries, np.full(cnt, metric_names.index(dm)), val, ref, np.full(cnt, unit_names.index(du)),
                    np.full(cnt, scope, np.int8), np.full(cnt, k, np.int8), dval))
    if not out:
        return None
    return Derived(*(np.concatenate(parts) for parts in zip(*out, strict=True)))


def derived_note(kind: int, divisor: float) -> str:
    """The note of a derived number: the conversion and the divisor it used."""
    dm, _, _, dv, how = DERIVED[kind]
    unit = "tokens" if dv == "output_tokens" else "s"
    return f"{dm} derived: {how} ({dv} {divisor:.6g} {unit}, same run)"
