"""The engine equals the plain pandas oracle (tests/oracle.py) on seeded random stores.

Each example draws a seed; the store built from it has several runs (some sharing a timestamp),
duplicates, null values, flagged records, keys missing on one side, stats that only match
through the `value` fallback, raw ops that op maps merge (summed or by median), roofline bounds
in both modes, configurations that disagree, tolerance rules, [[compare]] entries that convert
cycles and latency, and a random pair list, `--run` and `--as-of`. Rows,
discrepancies, comparisons, coverage and the selection counts must be equal: strings exactly, floats within 1e-9 relative
(1e-12 absolute, for correlations near 0). The bootstrap CIs (mape_ci, bias_ci, achieved_ci) are not
compared: the oracle does not resample.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import oracle
from tests.conftest import SLOW_OK
from tests.test_engine_helpers import config, make_store, rec
from xfid.engine import correlate
from xfid.engine.contract import COMPARISON_COLUMNS, ROW_COLUMNS

FIDELITIES = ("roofline", "archmodel", "rtl", "measured")
TARGETS = ("h100-sxm", "t100-a0")  # t100-a0 has a block table (gemm_tile: ROWS = COLS = 4)
WORKLOADS = ("w1", "block/gemm_tile", "w3")
CONFIGS = ({"precision": "bf16"}, {"precision": "fp8"}, {"batch": 8}, {"batch": 8.0}, {"batch": 1, "precision": "bf16"},
           {"params": {"ROWS": 4, "COLS": 4}}, {"params": {"ROWS": 8}}, {"params": {"ROWS": 8}, "block": "dma"},
           {"params": {"BYTES_PER_CYCLE": 32}, "block": "dma"}, {"limiter": "memory"}, {"scope": "run"},
           {"scope": "step"})
RAW_OPS = ("gemm", "gemm_big", "attn.qkv", "attn.qkv_b", "mlp", "")
METRICS = (("latency", "s"), ("cycles", "cycles"), ("throughput_tokens", "tokens/s"), ("utilization", "ratio"),
           ("energy", "J"), ("power", "W"))
STATS = ("value", "value", "value", "median", "mean")
VALUES = (0.5, 0.8, 0.95, 1.0, 1.0, 1.04, 1.2, 2.0, 3.5, 7.0)
RUNS = (("r1", "2026-11-01T00:00:00Z"), ("r2", "2026-11-03T00:00:00Z"), ("r3", "2026-11-03T00:00:00Z"),
        ("r0", "2026-11-05T12:00:00Z"))
COMPARED_ROW_COLUMNS = (*ROW_COLUMNS, "efficiency", "factor", "scope")
COMPARED_AGGREGATES = tuple(c for c in COMPARISON_COLUMNS if c not in ("mape_ci", "bias_ci", "achieved_ci"))
_IDS = itertools.count()  # hypothesis reseeds `random` per example: store names come from a counter


def random_store_files(rnd: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Records of a few fidelities, split over a few files each."""
    fids = rnd.sample(FIDELITIES, rnd.randint(2, 4))
    if rnd.random() < 0.25:
        fids.append("roofline-cal")  # a derived label: compared by default with its base's references
    space = [(t, w, o, m, s) for t in TARGETS[:rnd.randint(1, 2)] for w in WORKLOADS[:rnd.randint(1, 3)]
             for o in RAW_OPS for m in rnd.sample(METRICS, rnd.randint(1, 3)) for s in STATS[:rnd.randint(1, 5)]]
    pool = rnd.sample(space, min(len(space), rnd.randint(4, 24)))  # keys the fidelities share, mostly
    files: dict[str, list[dict[str, Any]]] = {}
    for fid in fids:
        mine = [k for k in pool if rnd.random() < 0.75] or pool[:1]
        scale = rnd.choice((1.0, 1.0, 0.5, 3.0))
        recs = []
        for t, w, o, (m, unit), s in mine:
            if fid == "measured" and s == "value" and rnd.random() < 0.3:
                s = rnd.choice(("median", "mean"))  # a tool's statistic where a model has one number
            for _ in range(rnd.choice((1, 1, 1, 2, 3))):  # duplicates
                run, ts = rnd.choice(RUNS[:rnd.randint(1, 4)])
                value = None if rnd.random() < 0.06 else rnd.choice(VALUES) * scale
                extra: dict[str, Any] = {"null_reason": "not reported"} if value is None else {}
                if rnd.random() < 0.08:
                    extra["flags"] = rnd.choice(("invalid", "failed_test", "warmup"))
                if rnd.random() < 0.25:
                    extra["config"] = rnd.choice(CONFIGS)
                recs.append(rec(fid, o, value, metric=m, unit=unit, target=t, workload=w, stat=s, run=run,
                                timestamp=ts, **extra))
        rnd.shuffle(recs)
        cut = sorted(rnd.sample(range(1, len(recs)), min(rnd.randint(0, 2), len(recs) - 1))) if len(recs) > 1 else []
        for i, part in enumerate(np.split(np.arange(len(recs)), cut)):
            if len(part):
                files[f"{fid}-{i}.csv"] = [recs[j] for j in part]
    return files


def random_options(rnd: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """(xfid.toml as a dict, correlate keyword arguments)."""
    user: dict[str, Any] = {"op_map": [{"source": "xfid-records", "match": "qkv", "op": "attn.qkv_proj"},
                                       {"source": "xfid-records", "match": "^gemm", "op": "gemm"},
                                       {"source": "other-adapter", "match": "mlp", "op": "never"}][:rnd.randint(0, 3)],
                            "tolerance": [{"metric": "latency", "stat": "value", "rel": 0.05},
                                          {"pair": "*->measured", "op": "attn*", "rel": 0.3, "abs": 0.2},
                                          {"metric": "utilization", "rel": 0.01}][:rnd.randint(0, 3)],
                            "settings": {}}
    s = user["settings"]
    if rnd.random() < 0.3:
        s["roofline_tolerance"] = "tolerance"
    if rnd.random() < 0.3:
        s["roofline_min_efficiency"] = 0.6
    if rnd.random() < 0.2:
        s["bound_tolerance"] = 0.1
    if rnd.random() < 0.2:
        s["value_matches"] = rnd.choice(([], ["mean"], ["mean", "median"]))
    if rnd.random() < 0.3:
        s["default_rel_tolerance"] = 0.25
    if rnd.random() < 0.35:
        user["compare"] = rnd.sample([{"candidate": "archmodel", "reference": "measured", "convert": "cycles->latency"},
                                      {"candidate": "rtl", "reference": "archmodel", "convert": "latency->cycles"},
                                      {"candidate": "roofline", "reference": "measured", "bounds": "tolerance"},
                                      {"candidate": "roofline", "reference": "rtl", "convert": "cycles->latency"},
                                      {"candidate": "archmodel", "reference": "rtl"}], rnd.randint(1, 3))
    kw: dict[str, Any] = {}
    if rnd.random() < 0.4:
        all_pairs = [f"{c}->{r}" for c, r in itertools.permutations(FIDELITIES, 2)]
        kw["pairs"] = rnd.sample(all_pairs, rnd.randint(1, 4))
    if rnd.random() < 0.3:
        kw["runs"] = rnd.choice(("r1", "r2", {"archmodel": "r1"}, {"measured": "r3", "roofline": "r1"}))
    if rnd.random() < 0.2:
        kw["targets"] = [rnd.choice(TARGETS)]
    if rnd.random() < 0.25:
        kw["as_of"] = rnd.choice(("2026-11-01", "2026-11-03", "2026-11-04T00:00:00Z"))
    if rnd.random() < 0.3:
        kw["include_missing"] = True
    return user, kw


def _oracle(store, cfg, kw: dict[str, Any]) -> oracle.Result:
    pairs = None
    if "pairs" in kw:
        pairs = [oracle.OraclePair(*p.split("->")) for p in kw["pairs"]]
    run = kw.get("runs")
    prefer = None if run is None else ({"*": run} if isinstance(run, str) else dict(run))
    return oracle.correlate(store, cfg, pairs=pairs, run=prefer, as_of=kw.get("as_of"),
                            include_missing=kw.get("include_missing", False), targets=kw.get("targets"))


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def assert_frames_equal(got: pd.DataFrame, want: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    """Same length and, column by column and row by row, the same values (floats within 1e-9)."""
    assert len(got) == len(want), f"{what}: {len(got)} rows, oracle {len(want)}"
    if not len(want):
        return
    for col in columns:
        a = got[col].astype(object).tolist()
        b = want[col].astype(object).tolist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if _missing(x) or _missing(y):
                ok = _missing(x) and _missing(y)
            elif isinstance(y, float) or isinstance(x, float):
                ok = bool(np.isclose(float(x), float(y), rtol=1e-9, atol=1e-12))
            else:
                ok = x == y
            assert ok, (f"{what} row {i} column {col}: engine {x!r}, oracle {y!r}\n"
                        f"engine row: {got.iloc[i].to_dict()}\noracle row: {want.iloc[i].to_dict()}")


def check(tmp_path, seed: int) -> tuple[Any, oracle.Result]:
    rnd = random.Random(seed)
    files = random_store_files(rnd)
    user, kw = random_options(rnd)
    store = make_store(tmp_path, files, name=f"oracle-{next(_IDS)}")
    cfg = config(user)
    got = correlate(store, cfg, **kw)
    want = _oracle(store, cfg, kw)
    assert_frames_equal(got.rows, want.rows, COMPARED_ROW_COLUMNS, "rows")
    assert_frames_equal(got.discrepancies, want.discrepancies, COMPARED_ROW_COLUMNS, "discrepancies")
    assert_frames_equal(got.comparisons, want.comparisons, COMPARED_AGGREGATES, "comparisons")
    assert_frames_equal(got.coverage, want.coverage, tuple(want.coverage.columns), "coverage")
    assert {k: got.settings["counts"][k] for k in want.counts} == want.counts
    return got, want


@settings(max_examples=20, deadline=None, suppress_health_check=SLOW_OK)
@given(st.integers(0, 2**32 - 1))
def test_engine_equals_the_oracle_on_random_stores(tmp_path, seed):
    check(tmp_path, seed)


RULES = {"ok", "over_tolerance", "bound_violation", "missing_reference", "config_mismatch", "duplicates",
         "summed raw ops", "merged raw ops", "stat fallback", "flags", "kendall", "older runs", "null keys",
         "power shown", "conversions", "derived label", "not comparable", "bound aggregates with violations"}


def test_the_random_stores_exercise_every_rule(tmp_path):
    """The generator is not vacuous: within 120 fixed seeds (each also checked against the
    oracle) every rule the oracle models occurs."""
    seen: set[str] = set()
    for seed in range(120):
        if seen >= RULES:
            break
        got, want = check(tmp_path, seed)
        notes = " | ".join(str(n) for n in want.rows.get("note", []))
        kinds = set(want.rows.get("kind", []))
        seen |= {k for k in ("ok", "over_tolerance", "bound_violation", "missing_reference", "config_mismatch")
                 if k in kinds}
        for needle, name in (("median of", "duplicates"), ("sum of", "summed raw ops"),
                             ("raw ops", "merged raw ops"), ("compared with the reference", "stat fallback"),
                             ("flagged", "flags"), ("roofline_min_efficiency", "min efficiency"),
                             ("not a bound", "power shown"), ("converted", "conversions"),
                             ("not comparable", "not comparable")):
            if needle in notes:
                seen.add(name)
        if len(want.rows) and (want.rows["candidate"] == "roofline-cal").any():
            seen.add("derived label")
        if len(got.comparisons) and got.comparisons["kendall"].notna().any():
            seen.add("kendall")
        if len(got.comparisons) and (got.comparisons["violations"].fillna(0) > 0).any():
            seen.add("bound aggregates with violations")
        if got.settings["counts"]["history_records"]:
            seen.add("older runs")
        if got.settings["counts"]["null_keys"]:
            seen.add("null keys")
    assert seen >= RULES, f"never exercised: {sorted(RULES - seen)}"
