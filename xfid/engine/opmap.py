"""Op maps: raw op names (kernel names, layer ids) -> canonical ops, and the coverage table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from xfid.config import OpMapRule
from xfid.engine.contract import COVERAGE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

COVERAGE_EXTRA = ("has_rules", "rule")
"""Added columns: whether any rule applies to the source at all, and the index of the rule."""


def map_name(raw: str, source: str, rules: Sequence[OpMapRule]) -> tuple[str, int]:
    """The canonical op for one raw name: the first rule (re.search) that matches, or the name."""
    for i, r in enumerate(rules):
        if r.applies_to(source) and r.match.search(raw):
            return r.op, i
    return raw, -1


def apply_op_maps(src: np.ndarray, src_names: list[str | None], o_raw: np.ndarray, raw_names: list[str],
                  rules: Sequence[OpMapRule]) -> tuple[np.ndarray, list[str], bool, pd.DataFrame]:
    """Map every record's raw op through the rules of its source adapter.

    Returns:
        (op codes, canonical op names (sorted), merges, coverage DataFrame) where `merges` says
        whether some canonical op receives two or more distinct raw ops (they are then combined
        per run: see selection.ADDITIVE).
    """
    import pandas as pd

    ns, nr = max(len(src_names), 1), max(len(raw_names), 1)
    if ns == 1:  # one source adapter (the common case): no per-record source arithmetic
        s = None
        counts = np.bincount(o_raw, minlength=nr).reshape(1, nr) if len(src) else np.zeros((ns, nr), np.int64)
    else:
        s = np.where(src < 0, 0, src)
        counts = np.bincount(s * nr + o_raw, minlength=ns * nr).reshape(ns, nr) if len(src) else np.zeros((ns, nr), np.int64)
    mapped: dict[tuple[int, int], tuple[str, int]] = {}
    cov = []
    for si in range(ns):
        name = str(src_names[si]) if si < len(src_names) else ""
        has_rules = any(r.applies_to(name) for r in rules)
        for ri in np.flatnonzero(counts[si]):
            raw = raw_names[ri]
            if raw == "":
                continue
            op, rule = map_name(raw, name, rules) if has_rules else (raw, -1)
            if rule >= 0:
                mapped[(si, int(ri))] = (op, rule)
            cov.append((name, raw, op, rule >= 0, int(counts[si, ri]), has_rules, rule))
    names = sorted(set(raw_names) | {op for op, _ in mapped.values()})
    pos = {v: i for i, v in enumerate(names)}
    base = np.array([pos[v] for v in raw_names], dtype=np.int64) if raw_names else np.zeros(1, np.int64)
    table = np.tile(base, (ns, 1))
    for (src_i, raw_i), (op, _) in mapped.items():
        table[src_i, raw_i] = pos[op]
    if not len(src):
        codes = np.zeros(0, np.int64)
    elif not mapped and names == list(raw_names):
        codes = o_raw  # nothing renamed: the raw codes are the canonical codes
    elif s is None:
        codes = table[0][o_raw]
    else:
        codes = table[s, o_raw]
    used = counts > 0
    per_canon: dict[int, set[int]] = {}
    for si, ri in zip(*np.nonzero(used), strict=True):
        per_canon.setdefault(int(table[si, ri]), set()).add(int(ri))
    merges = any(len(v) > 1 for v in per_canon.values())
    coverage = pd.DataFrame(cov, columns=[*COVERAGE_COLUMNS, *COVERAGE_EXTRA])
    coverage = coverage.sort_values(["source", "matched", "raw_op"], kind="stable").reset_index(drop=True)
    return codes, names, merges, coverage
