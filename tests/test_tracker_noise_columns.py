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


def _row(op, *, cand_n=3, ref_n=3, stat="median", note=None, run="r1", **kw):
    r = {"target": "t", "workload": "w", "op": op, "metric": "latency", "stat": stat, "candidate": "rtl",
         "reference": "measured", "candidate_run": run, "reference_run": "m1", "candidate_n": cand_n,
         "reference_n": ref_n, "note": note}
    return {**r, **kw}


def test_many_equals_the_lookup_of_each_row():
    look = GroupRepeats(GROUPS)
    rows = [_row("op1"), _row("op2"), _row("op3"), _row("op3", cand_n=2), _row("op1", ref_n=2.0),
            _row("op9"), _row("op1", note="mean of 2 raw ops"), _row("op1", note=float("nan")),
            _row("op1", note="converted"), _row("op1", run=None), _row(None),
            _row("op1", cand_n=3.0, stat="p50")]
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    got, want = look.many(cols), [look(r) for r in rows]
    assert len(got) == len(want) == len(rows)
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w)
        if isinstance(w, tuple):
            assert all(a is b for a, b in zip(g, w, strict=True))
        else:
            assert g == w
    assert got[0][0] is V3 and got[1][1] is W3 and got[2] == got[3] == COUNT_MISMATCH  # count; two stats fit
    assert got[4] == got[5] == COUNT_MISMATCH and got[6] == RAW_OPS_MERGED and got[7][0] is V3
    assert got[8][1] is W3 and got[9] == got[10] == COUNT_MISMATCH and got[11][0] is V3 and got[11][1] is W3
    assert look.many({k: [] for k in cols}) == []


@pytest.mark.parametrize("seed", (1, 6))
def test_attach_rows_gives_the_same_frame_with_the_column_lookup_and_a_row_lookup(tmp_path, seed):
    """A check's lookup (GroupRepeats, column by column) against the same lookup given a row at a
    time (any Repeats callable is), on a store with repeats, reasons and missing records."""
    from xfid.api import XfidStore

    first, later = busy_store_steps(tmp_path, seed)
    make_store(tmp_path, {"a.csv": first, "b.csv": later[0]}, name="s").close()
    (tmp_path / "xfid.toml").write_text(TOML)
    with XfidStore(tmp_path / "s", tmp_path / "xfid.toml") as s:
        rows = s.correlate(engine="local").rows
        look = noise.store_repeats(s.backend(), s.config, rows)
    assert isinstance(look, GroupRepeats)
    got, n_got = noise.attach_rows(rows, look)
    want, n_want = noise.attach_rows(rows, lambda r: look(r))
    pd.testing.assert_frame_equal(got, want)
    assert n_got == n_want > 5
    assert (got["noise"].str.startswith("interval:")).sum() == n_got


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
