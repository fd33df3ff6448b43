"""The noise annotation column by column (`noise.verdicts`, `GroupRepeats.many`) against the
plain versions a row at a time (`noise.verdict`, `GroupRepeats.__call__`) they replace in
`attach_rows`."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from tests.test_check_chunks import TOML, busy_store_steps
from tests.test_engine_helpers import make_store
from xfid.engine import keys
from xfid.tracker import noise
from xfid.tracker.noise import COUNT_MISMATCH, RAW_OPS_MERGED, GroupRepeats, verdict, verdicts


def test_verdicts_equal_verdict_of_each_row():
    numbers = [-0.3, -0.1, -0.05, 0.0, 0.05, 0.1, 0.3, np.nan]
    grid = [(k, r, t, lo, hi) for k in ("ok", "over_tolerance", "bound_violation")
            for r, t, lo, hi in itertools.product([-0.2, 0.05, 0.2], [0.1, 0.0], numbers, numbers)]
    kind, rel, tol, low, high = (np.array(c, dtype=object if j == 0 else float) for j, c in enumerate(zip(*grid, strict=True)))
    got = verdicts(kind, rel, tol, low, high)
    assert got.dtype == object
    assert got.tolist() == [verdict(*g) for g in grid]
    assert {"ok", "over_tolerance", noise.UNCERTAIN, "bound_violation"} <= set(got.tolist())


V3, V2, W3 = np.array([1.0, 1.1, 0.9]), np.array([2.0, 2.2]), np.array([5.0, 5.5, 4.5])
GROUPS = {
    ("rtl", "t", "w", "op1", "latency", "r1"): {"median": V3},
    ("measured", "t", "w", "op1", "latency", "m1"): {"median": W3},
    ("rtl", "t", "w", "op2", "latency", "r1"): {"median": V3},
    ("measured", "t", "w", "op2", "latency", "m1"): {"mean": W3},  # another stat, the engine's count
    ("measured", "t", "w", "op3", "latency", "m1"): {"mean": W3, "p50": V3},  # two stats fit: none chosen
    ("rtl", "t", "w", "op3", "latency", "r1"): {"median": V2},
}


def plain_lookup(groups: dict[tuple, dict[str, np.ndarray]]):
    """The lookup a row at a time over a dict of the groups (what xfid did before GroupRepeats)."""
    def side(r, s):
        stats = groups.get((str(r[s]), *(str(r[k]) for k in ("target", "workload", "op", "metric")),
                            str(r[f"{s}_run"])), {})
        n = int(r[f"{s}_n"])
        got = stats.get(str(r["stat"]))
        if got is None or len(got) != n:
            fits = [v for v in stats.values() if len(v) == n]
            got = fits[0] if len(fits) == 1 else None
        return got

    def look(r):
        if r.get("note") and "raw ops" in str(r["note"]):
            return RAW_OPS_MERGED
        c, ref = side(r, "candidate"), side(r, "reference")
        return COUNT_MISMATCH if c is None or ref is None else (c, ref)
    return look


def from_groups(groups: dict[tuple, dict[str, np.ndarray]]) -> GroupRepeats:
    """GroupRepeats of records that make these groups (interleaved, so that a group's records are
    not adjacent: their order must be kept all the same)."""
    records = [(*key, stat, i, v) for key, stats in groups.items() for stat, vs in stats.items()
               for i, v in enumerate(vs)]
    records.sort(key=lambda rec: (rec[-2], rec[:-2]))  # every group's first value, then every second...
    names = [[*sorted({rec[c] for rec in records}), None] for c in range(7)]
    codes = [np.array([names[c].index(rec[c]) for rec in records]) for c in range(7)]
    return GroupRepeats(codes, names, np.array([rec[-1] for rec in records]))


def same(got, want) -> bool:
    if isinstance(want, tuple):
        return isinstance(got, tuple) and all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    return got == want


def _row(op, *, cand_n=3, ref_n=3, stat="median", note=None, run="r1", **kw):
    r = {"target": "t", "workload": "w", "op": op, "metric": "latency", "stat": stat, "candidate": "rtl",
         "reference": "measured", "candidate_run": run, "reference_run": "m1", "candidate_n": cand_n,
         "reference_n": ref_n, "note": note}
    return {**r, **kw}


@pytest.mark.parametrize("limit", [keys._LIMIT, 8])  # 8: the keys ranked at every column
def test_many_equals_the_plain_lookup_of_each_row(monkeypatch, limit):
    monkeypatch.setattr(keys, "_LIMIT", limit)
    look, plain = from_groups(GROUPS), plain_lookup(GROUPS)
    rows = [_row("op1"), _row("op2"), _row("op3"), _row("op3", cand_n=2), _row("op1", ref_n=2.0),
            _row("op9"), _row("op1", note="mean of 2 raw ops"), _row("op1", note=float("nan")),
            _row("op1", note="converted"), _row("op1", run=None), _row(None),
            _row("op1", cand_n=3.0, stat="p50"), _row("op1", workload="w2"), _row("op2", reference="rtl")]
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    got, want = look.many(cols), [plain(r) for r in rows]
    assert len(got) == len(want) == len(rows)
    assert all(same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    assert all(same(look(r), w) for r, w in zip(rows, want, strict=True))
    assert same(got[0], (V3, W3)) and same(got[1], (V3, W3)) and got[2] == got[3] == COUNT_MISMATCH
    assert got[4] == got[5] == COUNT_MISMATCH and got[6] == RAW_OPS_MERGED and same(got[7], (V3, W3))
    assert got[9] == got[10] == got[12] == got[13] == COUNT_MISMATCH and same(got[11], (V3, W3))
    assert look.many({k: [] for k in cols}) == []
    empty = GroupRepeats([np.zeros(0, np.int64)] * 7, [[None]] * 7, np.zeros(0))
    assert empty.many(cols) == [plain_lookup({})(r) for r in rows]


@pytest.mark.parametrize("seed", (1, 6))
def test_attach_rows_gives_the_same_frame_with_the_column_lookup_and_the_plain_one(tmp_path, seed):
    """A check's lookup (GroupRepeats, arrays, column by column) against the plain lookup a row at
    a time over a dict of the records' groups, on a store with repeats, reasons and missing records."""
    from xfid.api import XfidStore

    first, later = busy_store_steps(tmp_path, seed)
    make_store(tmp_path, {"a.csv": first, "b.csv": later[0]}, name="s").close()
    (tmp_path / "xfid.toml").write_text(TOML)
    with XfidStore(tmp_path / "s", tmp_path / "xfid.toml") as s:
        rows = s.correlate(engine="local").rows
        look = noise.store_repeats(s.backend(), s.config, rows)
        plain = plain_lookup(plain_groups(s, rows))
    assert isinstance(look, GroupRepeats)
    got, n_got = noise.attach_rows(rows, look)
    want, n_want = noise.attach_rows(rows, plain)  # a row at a time, the groups in a dict
    pd.testing.assert_frame_equal(got, want)
    assert n_got == n_want > 5
    assert (got["noise"].str.startswith("interval:")).sum() == n_got


def plain_groups(s, rows) -> dict[tuple, dict[str, np.ndarray]]:
    """The records of the rows' targets and runs grouped by a loop over every record (in order),
    the ops after the op maps: {(fidelity, target, workload, op, metric, run): {stat: values}}."""
    from xfid.engine.keys import encode, raw_codes
    from xfid.engine.opmap import apply_op_maps
    from xfid.engine.selection import load

    targets, runs = noise.repeats_needed(rows)
    table = load(s.backend(), targets=sorted(targets), runs=sorted(runs))
    src, src_names = raw_codes(table.column("source"))
    o_raw, raw_names = encode(table.column("op"))
    o, on, _, _ = apply_op_maps(src, src_names, o_raw, raw_names, s.config.op_maps)
    lists: dict[tuple, dict[str, list[float]]] = {}
    records = table.select(["fidelity", "target", "workload", "metric", "run", "stat", "value"]).to_pylist()
    for r, op in zip(records, np.asarray(o).tolist(), strict=True):
        if r["value"] is None or not np.isfinite(r["value"]):
            continue
        key = (r["fidelity"], r["target"], r["workload"], on[op], r["metric"], r["run"])
        lists.setdefault(key, {}).setdefault(r["stat"], []).append(r["value"])
    return {k: {st: np.array(v) for st, v in stats.items()} for k, stats in lists.items()}


def test_load_with_runs_and_columns_equals_the_whole_load_filtered(tmp_path):
    """What the repeats lookup reads: the records of the rows' runs, some columns, filtered in the
    scan; the same rows in the same order (the bootstrap draws by position) as a whole load filtered."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from xfid.engine.selection import load
    from xfid.store import Store

    first, later = busy_store_steps(tmp_path, 3)
    make_store(tmp_path, {"a.csv": first, "b.csv": later[0], "c.csv": later[1]}, name="s").close()
    store = Store(tmp_path / "s")
    whole = load(store, source_loc=False)
    runs = sorted({r for r in whole.column("run").to_pylist() if r})[1::2]
    targets = sorted(set(whole.column("target").to_pylist()))[:1]
    columns = (*noise.GROUP_COLUMNS, "value", "source")
    got = load(store, targets=targets, runs=runs, columns=columns)
    keep = pc.and_(pc.is_in(whole.column("run").cast(pa.string()), value_set=pa.array(runs)),
                   pc.is_in(whole.column("target").cast(pa.string()), value_set=pa.array(targets)))
    want = whole.filter(keep).select(list(columns))
    assert got.column_names == list(columns) and 0 < got.num_rows < whole.num_rows
    assert got.equals(want)
    assert load(store, runs=[], columns=columns).num_rows == 0
