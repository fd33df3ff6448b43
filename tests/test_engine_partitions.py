"""Selection one fidelity partition at a time equals selection over the whole store; threads agree."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import xfid.engine.pipeline
from tests.test_engine_helpers import config, make_store, rec
from xfid.engine.align import Aligner
from xfid.engine.partitions import select_store
from xfid.engine.selection import load, select

OPMAP = {"op_map": [{"source": "xfid-records", "match": "qkv", "op": "attn.qkv_proj"}]}


def _records(seed: int) -> dict[str, list[dict]]:
    rnd = random.Random(seed)
    files: dict[str, list[dict]] = {}
    for fid in ("roofline", "archmodel", "rtl", "measured"):
        rows = []
        for run, day in (("r1", 1), ("r2", 3)):
            for w in ("w1", "w2", "NA"):
                for op in ("attn.qkv_proj", "gemm_qkv_a", "gemm_qkv_b", "mlp.down", f"{fid}-only"):
                    for metric, unit in (("latency", "s"), ("bytes", "B"), ("utilization", "ratio")):
                        if rnd.random() < 0.25:
                            continue  # some keys missing in some fidelities / runs
                        for _ in range(rnd.choice((1, 1, 2, 3))):  # duplicates
                            v = None if rnd.random() < 0.05 else rnd.uniform(0.1, 2.0)
                            extra = {"flags": "invalid"} if rnd.random() < 0.05 else {}
                            if v is None:
                                extra["null_reason"] = "n/a in file"
                            rows.append(rec(fid, op, v, metric=metric, unit=unit, workload=w, run=f"{fid}-{run}",
                                            target=rnd.choice(("h100-sxm", "a100-sxm")),
                                            timestamp=f"2026-11-0{day}T00:00:00Z",
                                            config={"precision": "bf16", "run": run}, **extra))
        rnd.shuffle(rows)
        half = len(rows) // 2
        files[f"{fid}-1.csv"], files[f"{fid}-2.csv"] = rows[:half], rows[half:]  # two files per fidelity
    return files


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_partitioned_selection_equals_whole_store_selection(tmp_path, seed):
    store = make_store(tmp_path, _records(seed), name=f"s{seed}")
    cfg = config(OPMAP)
    whole_sel = select(load(store), cfg)
    part_sel = select_store(store, cfg)
    whole, part = whole_sel.entries, part_sel.entries
    assert part.fidelities == whole.fidelities and part.dims == whole.dims
    for k in whole.codes:
        np.testing.assert_array_equal(part.codes[k], whole.codes[k], err_msg=k)
    for k in ("key", "ref_value"):
        np.testing.assert_array_equal(getattr(part_sel.keys, k), getattr(whole_sel.keys, k), err_msg=k)
    for k in ("value", "n", "flagged"):
        np.testing.assert_array_equal(getattr(part, k), getattr(whole, k), err_msg=k)
    assert part.notes == whole.notes and any("sum of 2 raw ops" in v for v in whole.notes.values())
    assert part.counts == whole.counts
    assert part.coverage.equals(whole.coverage)
    # the chosen records' provenance: the same strings at each entry's representative record
    for col in ("unit", "run", "source_path", "source_loc", "config", "timestamp"):
        a = part_sel.records.column(col).take(pa.array(part.rep)).to_pylist()
        b = whole_sel.records.column(col).take(pa.array(whole.rep)).to_pylist()
        assert a == b, col


def test_partitioned_selection_of_an_empty_or_filtered_store(tmp_path):
    store = make_store(tmp_path, {"a.csv": [rec("archmodel", "op1", 1.0, target="a100-sxm")],
                                  "m.csv": [rec("measured", "op1", 2.0)]})
    only = select_store(store, config(), targets=["h100-sxm"])
    assert only.entries.fidelities == ["measured"] and len(only.entries.value) == 1
    assert only.records.column("source_path").to_pylist()[0].endswith("m.csv")
    none = select_store(store, config(), targets=["mi300x"])
    assert len(none.entries.value) == 0 and none.records.num_rows == 0


def test_one_thread_and_two_threads_agree(tmp_path, monkeypatch):
    from xfid.engine import correlate

    store = make_store(tmp_path, _records(5), name="threads")
    cfg = config(OPMAP)
    mod = xfid.engine.pipeline
    monkeypatch.setattr(mod, "THREADS", 2)
    two = correlate(store, cfg)
    monkeypatch.setattr(mod, "THREADS", 1)
    one = correlate(store, cfg)
    assert len(two.comparisons) > 10 and len(two.discrepancies) > 10
    assert one.comparisons.equals(two.comparisons)
    assert one.rows.equals(two.rows) and one.discrepancies.equals(two.discrepancies)


def test_an_error_while_aligning_stops_the_worker(tmp_path, monkeypatch):
    import threading

    from xfid.engine import correlate
    from xfid.errors import EngineError

    store = make_store(tmp_path, _records(6), name="err")
    real = Aligner.align
    calls = []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise EngineError("boom in the third pair")
        return real(*a, **k)

    monkeypatch.setattr(Aligner, "align", failing)
    monkeypatch.setattr(xfid.engine.pipeline, "THREADS", 2)
    before = threading.active_count()
    with pytest.raises(EngineError, match="third pair"):
        correlate(store, config(OPMAP))
    assert threading.active_count() == before  # the worker returned and the pool is gone
