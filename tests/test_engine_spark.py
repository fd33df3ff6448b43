"""`--engine spark` gives what the local engine gives, on seeded stores that exercise every rule.

One SparkSession (local[2], a 1 GB heap, 2 shuffle partitions, no UI) serves the module. On
seeded random stores (the generator of test_engine_oracle: several runs, duplicates, nulls,
flags, op maps merging raw ops, bounds in both modes, tolerance rules, config mismatches, missing
references, --run, --as-of, pairs) and on a hand-made store with a cycles<->seconds conversion,
Spark's discrepancies and comparisons equal the local engine's: same groups and fingerprints,
same kinds, strings exactly, floats within 1e-9 relative (1e-12 absolute), the bootstrap CIs
included; the selection counts, the per-pair counts and the coverage table are equal too.

Under CI=true a missing pyspark or Java fails these tests; elsewhere they are skipped, saying why.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.test_engine_helpers import config, make_store, rec, write_csv
from tests.test_engine_oracle import (
    COMPARED_AGGREGATES,
    COMPARED_ROW_COLUMNS,
    assert_frames_equal,
    random_options,
    random_store_files,
)
from xfid.engine import correlate
from xfid.errors import EngineError

CI = os.environ.get("CI", "").lower() == "true"


def _missing_prerequisite() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'xfid[spark]')"
    java = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                                    if os.environ.get("JAVA_HOME") else None)
    if not java or subprocess.run([java, "-version"], capture_output=True).returncode:
        return "Java (17) is not installed or JAVA_HOME is not set"
    return None


@pytest.fixture(scope="module")
def spark():
    why = _missing_prerequisite()
    if why:
        if CI:
            pytest.fail(f"CI=true and {why}: the Spark engine tests must run in CI")
        pytest.skip(why)
    from xfid.engine.spark.session import quiet, spark_session

    with quiet():
        session = spark_session(None, "local[2]", {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2",
                                                   "spark.default.parallelism": "2", "spark.ui.enabled": "false"})
    yield session
    session.stop()


def spark_correlate(store, cfg, session, **kw):
    from xfid.engine.spark import correlate as run

    return run(store, cfg, spark=session, **kw)


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(abs(x - y) <= 1e-9 * abs(y) + 1e-12 for x, y in zip(a, b, strict=True))


def assert_same(got, want, what: str) -> None:
    """Spark's result equals the local engine's (see the module docstring)."""
    assert_frames_equal(got.discrepancies, want.discrepancies, COMPARED_ROW_COLUMNS, f"{what}: discrepancies")
    assert_frames_equal(got.comparisons, want.comparisons, COMPARED_AGGREGATES, f"{what}: comparisons")
    for col in ("mape_ci", "bias_ci", "achieved_ci"):
        for i, (a, b) in enumerate(zip(got.comparisons[col], want.comparisons[col], strict=True)):
            assert _close(a, b), f"{what}: comparisons row {i} {col}: spark {a}, local {b}"
    for k in ("counts", "pairs", "targets", "clock_hz", "run", "as_of", "ci_method"):
        if k in ("targets", "clock_hz") and want.settings["as_of"]:
            # the local engine names every target of the parts' Parquet dictionaries, also one whose
            # records --as-of left out; Spark names the targets of the records it selected
            assert set(got.settings[k]) <= set(want.settings[k]), what
            continue
        assert got.settings[k] == want.settings[k], f"{what}: settings[{k!r}]: {got.settings[k]} vs {want.settings[k]}"
    pd.testing.assert_frame_equal(got.coverage, want.coverage)
    assert got.sources == want.sources and got.config_hash == want.config_hash
    assert got.settings["spark"]["rows"] == len(want.rows), what


SEEDS = (3, 6, 10, 13)


@pytest.mark.parametrize("seed", SEEDS)
def test_spark_equals_local_on_random_stores(spark, tmp_path, seed):
    rnd = random.Random(seed)
    files = random_store_files(rnd)
    user, kw = random_options(rnd)
    store = make_store(tmp_path, files, name=f"r{seed}")
    cfg = config(user)
    want = correlate(store, cfg, **kw)
    got = spark_correlate(store, cfg, spark, **kw)
    assert_same(got, want, f"seed {seed}")
    disc_kinds = {"over_tolerance", "bound_violation", "config_mismatch"} | (
        {"missing_reference"} if kw.get("include_missing") else set())
    assert_frames_equal(got.rows, want.rows[want.rows["kind"].isin(disc_kinds)].reset_index(drop=True),
                        COMPARED_ROW_COLUMNS, f"seed {seed}: rows")


def test_rows_collected_a_few_partitions_at_a_time_equal_one_collect(spark, tmp_path, monkeypatch):
    """The driver brings the rows back in chunks of partitions (bounded driver memory): on a store
    of 24 workloads spread over 12 partitions, with chunks of 5 rows (many collects, categories
    differing per chunk) the result is the local engine's."""
    import xfid.engine.spark.engine as spark_engine

    rnd = random.Random(7)
    arch, meas = [], []
    for w in range(24):
        for op in ("gemm", "attn", "norm"):
            truth = rnd.uniform(1e-4, 1e-2)
            meas.append(rec("measured", op, truth, workload=f"w{w:02d}", run=f"m{w % 3}"))
            arch.append(rec("archmodel", op, truth * rnd.choice((1.0, 1.5, 0.5)), workload=f"w{w:02d}",
                            run=f"a{w % 4}"))
    store = make_store(tmp_path, {"arch.csv": arch, "meas.csv": meas}, name="chunks")
    cfg = config({"compare": [{"candidate": "archmodel", "reference": "measured"}]})
    want = correlate(store, cfg)
    monkeypatch.setattr(spark_engine, "CHUNK_ROWS", 5)
    spark.conf.set("spark.sql.shuffle.partitions", "12")  # rows spread over partitions to group
    seen = []
    real = spark_engine._chunks
    monkeypatch.setattr(spark_engine, "_chunks", lambda sizes, n: seen.append(real(sizes, n)) or seen[-1])
    try:
        got = spark_correlate(store, cfg, spark)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    assert len(seen[0]) > 3, seen
    assert len(want.discrepancies) > 10
    assert_same(got, want, "chunks of 5 rows")


def test_no_chunk_is_the_empty_rows_frame():
    from xfid.engine.contract import ROW_COLUMNS
    from xfid.engine.rows import ROW_EXTRA
    from xfid.engine.spark.engine import _local_rows

    empty = _local_rows([])
    assert list(empty.columns) == [*ROW_COLUMNS, *ROW_EXTRA] and len(empty) == 0
    assert isinstance(empty["kind"].dtype, pd.CategoricalDtype)


def test_chunks_group_consecutive_partitions():
    from xfid.engine.spark.engine import _chunks

    assert _chunks([(0, 3), (1, 3), (2, 3), (3, 10), (4, 1)], 6) == [[0, 1], [2], [3], [4]]
    assert _chunks([], 6) == []
    assert _chunks([(0, 0), (1, 0)], 6) == [[0, 1]]


def rule_store(tmp_path):
    """Every rule once: cycles->latency conversion (and a native latency winning over a converted
    one), duplicates, several runs, op maps summing raw ops, bounds (held and violated), a flagged
    reference, a missing reference, a stat-value fallback, an RTL config that disagrees with the
    target's block table."""
    ts1, ts2 = "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"
    arch = [
        rec("archmodel", "gemm", 1.755e6, metric="cycles", unit="cycles", run="a1", timestamp=ts1),
        rec("archmodel", "gemm", 1.9e6, metric="cycles", unit="cycles", run="a2", timestamp=ts2),  # newer run
        rec("archmodel", "mlp", 3.0e6, metric="cycles", unit="cycles", run="a2", timestamp=ts2),
        rec("archmodel", "mlp", 1.6e-3, run="a2", timestamp=ts2),  # native latency wins over converted cycles
        rec("archmodel", "softmax", 2e-4, run="a2", timestamp=ts2),  # no reference
        rec("archmodel", "attn.qkv_proj", 7e-4, run="a2", timestamp=ts2),
        rec("archmodel", "norm", 1e-4, run="a2", timestamp=ts2),  # stat value vs the reference median
        rec("archmodel", "gemm", 100.0, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile",
            run="a2", timestamp=ts2),
    ]
    meas = [
        *(rec("measured", "gemm", v, run="m1", timestamp=ts2) for v in (1.0e-3, 1.2e-3, 1.1e-3)),  # duplicates
        rec("measured", "mlp", 1.5e-3, run="m1", timestamp=ts2),
        rec("measured", "attn_qkv_a", 3e-4, run="m1", timestamp=ts2),  # two raw ops -> attn.qkv_proj, summed
        rec("measured", "attn_qkv_b", 4e-4, run="m1", timestamp=ts2),
        rec("measured", "norm", 1.3e-4, stat="median", run="m1", timestamp=ts2),
        rec("measured", "flagged", 1e-3, run="m1", timestamp=ts2, flags="invalid"),
    ]
    roof = [
        rec("roofline", "gemm", 0.9e-3, run="f1", timestamp=ts1),  # bound holds
        rec("roofline", "mlp", 2.0e-3, run="f1", timestamp=ts1),  # beaten by the measurement: violation
        rec("roofline", "flagged", 5e-4, run="f1", timestamp=ts1),
    ]
    rtl = [rec("rtl", "gemm", 120.0, metric="cycles", unit="cycles", target="t100-a0", workload="block/gemm_tile",
               run="t1", timestamp=ts2, config={"params": {"ROWS": 8, "COLS": 4}})]
    store = make_store(tmp_path, {"arch.csv": arch, "meas.csv": meas, "roof.csv": roof, "rtl.csv": rtl}, name="rules")
    cfg = config({"op_map": [{"source": "*", "match": "^attn_qkv", "op": "attn.qkv_proj"}],
                  "compare": [{"candidate": "archmodel", "reference": "measured", "convert": "cycles->latency"},
                              {"candidate": "roofline", "reference": "measured"},
                              {"candidate": "archmodel", "reference": "rtl"}]})
    return store, cfg


@pytest.mark.parametrize("kw", [{}, {"runs": {"archmodel": "a1"}, "include_missing": True}, {"as_of": "2026-11-02"}],
                         ids=["default", "run-per-fidelity-include-missing", "as-of"])
def test_spark_equals_local_on_every_rule(spark, tmp_path, kw):
    store, cfg = rule_store(tmp_path)
    want = correlate(store, cfg, **kw)
    got = spark_correlate(store, cfg, spark, **kw)
    assert_same(got, want, str(kw))
    if not kw:  # the store exercises what it says it does
        notes = " | ".join(str(n) for n in want.rows["note"])
        for needle in ("converted cycles->latency", "median of 3 records", "sum of 2 raw ops",
                       "stat value compared with the reference median", "reference flagged", "config mismatch",
                       "roofline bound"):
            assert needle in notes, needle
        assert {"ok", "over_tolerance", "bound_violation", "config_mismatch", "missing_reference"} <= set(
            want.rows["kind"])


def test_a_raw_op_only_an_older_run_has_contributes_nothing(spark, tmp_path):
    """Per key the latest run that has it (or the --run choice), and of the raw ops an op map
    merges only that run's (its duplicates, flags and nulls too); older runs' records
    (duplicates with other medians among them) count as history. The Spark selection and the
    local engine agree."""
    ts1, ts2, ts3 = "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"
    meas = [
        rec("measured", "attn_qkv_a", 3e-4, run="m1", timestamp=ts1),
        rec("measured", "attn_qkv_b", 4e-4, run="m1", timestamp=ts1, flags="invalid"),  # only the older run
        rec("measured", "attn_qkv_c", 9e-4, run="m1", timestamp=ts1),  # only the older run
        *(rec("measured", "attn_qkv_a", v, run="m2", timestamp=ts3) for v in (3.5e-4, 3.9e-4)),
        rec("measured", "attn_qkv_a", None, run="m2", timestamp=ts3, null_reason="not reported"),
        rec("measured", "attn_qkv_d", 1e-4, run="m2", timestamp=ts3),  # only the newer run
        rec("measured", "gemm", 1e-3, run="m1", timestamp=ts1, flags="invalid"),  # the newer run has no gemm
        rec("measured", "gemm", 1.4e-3, run="m1", timestamp=ts1),
        rec("measured", "mlp", 2e-3, run="m1", timestamp=ts1, flags="invalid"),  # flagged in the older run only
        rec("measured", "mlp", 2.2e-3, run="m2", timestamp=ts3),
        # three runs of one key, each with duplicates of another median: the latest run's only
        *(rec("measured", "norm", v, run="m0", timestamp=ts1) for v in (9e-5, 8e-5, 7e-5, 6e-5)),
        *(rec("measured", "norm", v, run="mx", timestamp=ts2) for v in (5e-5, 1e-4, 2e-4)),
        *(rec("measured", "norm", v, run="m2", timestamp=ts3) for v in (1.2e-4, 1.1e-4, 1.1e-4, 1.3e-4)),
    ]
    arch = [rec("archmodel", op, v, run="a1", timestamp=ts1)
            for op, v in (("attn.qkv_proj", 8e-4), ("gemm", 1.1e-3), ("mlp", 2.1e-3), ("norm", 1e-4))]
    store = make_store(tmp_path, {"arch.csv": arch, "meas.csv": meas}, name="older-raw-ops")
    cfg = config({"op_map": [{"source": "*", "match": "^attn_qkv", "op": "attn.qkv_proj"}],
                  "compare": [{"candidate": "archmodel", "reference": "measured"}]})
    for kw in ({}, {"runs": {"measured": "mx"}}):
        want = correlate(store, cfg, include_missing=True, **kw)
        got = spark_correlate(store, cfg, spark, include_missing=True, **kw)
        assert_same(got, want, f"raw ops of older runs {kw}")
    want = correlate(store, cfg, include_missing=True)
    notes = " | ".join(str(n) for n in want.rows["note"])
    assert "sum of 2 raw ops: attn_qkv_a, attn_qkv_d" in notes and "attn_qkv_b" not in notes, notes
    assert "median of 4 records" in notes, notes
    assert want.settings["counts"]["history_records"] == 4 + 4 + 3  # attn_qkv_a/b/c and mlp of m1; norm of m0, mx


def test_tracked_fingerprints_come_back_whatever_their_kind(spark, tmp_path):
    store, cfg = rule_store(tmp_path)
    want = correlate(store, cfg)
    ok = want.rows[want.rows["kind"] == "ok"]
    track = [*ok["fingerprint"][:2], "0123456789abcdef"]  # two clean rows and one nobody has
    got = spark_correlate(store, cfg, spark, track=track)
    back = got.rows[got.rows["fingerprint"].isin(track)].reset_index(drop=True)
    assert_frames_equal(back, ok[ok["fingerprint"].isin(track)].reset_index(drop=True), COMPARED_ROW_COLUMNS,
                        "tracked rows")
    assert got.settings["spark"]["tracked"] == 3 and len(got.rows) == len(got.discrepancies) + 2


def test_check_under_spark_files_and_resolves_like_local(spark, tmp_path, monkeypatch):
    from xfid.api import XfidStore

    (tmp_path / "xfid.toml").write_text('[[compare]]\ncandidate = "archmodel"\nreference = "measured"\n')
    ts1, ts2 = "2026-11-01T00:00:00Z", "2026-11-05T00:00:00Z"
    first = [rec("archmodel", "gemm", 2.0, timestamp=ts1), rec("archmodel", "mlp", 1.0, timestamp=ts1),
             rec("measured", "gemm", 1.0, timestamp=ts1), rec("measured", "mlp", 1.0, timestamp=ts1)]
    fixed = [rec("archmodel", "gemm", 1.02, run="r2", timestamp=ts2)]  # the model is fixed: gemm now within
    results = {}
    for engine in ("local", "spark"):
        d = tmp_path / engine
        d.mkdir()
        make_store(d, {"a.csv": first}, name="s").close()
        with XfidStore(d / "s", tmp_path / "xfid.toml") as s:
            one = s.check(actor="t", engine=engine)
            s.ingest(write_csv(d / "fix.csv", fixed), adapter="xfid-records")
            two = s.check(actor="t", engine=engine, resolve_after=1)
            results[engine] = (one.new, two.resolved, two.total_open, list(s.issues()["state"]))
    assert results["spark"] == results["local"]
    assert results["spark"][0] and results["spark"][1] == results["spark"][0] and results["spark"][2] == 0


def test_team_store_catalog_in_postgresql(spark, pg_url, tmp_path, monkeypatch):
    """The team store's catalog on a real PostgreSQL: Spark reads the parts that catalog lists
    and gives the local engine's result; `check --engine spark` files the same issues in it."""
    from xfid.api import XfidStore

    monkeypatch.setenv("XFID_DATABASE_URL", pg_url)
    store, cfg = rule_store(tmp_path)
    assert not (tmp_path / "rules" / "xfid.db").exists()  # nothing of the catalog is local
    want = correlate(store, cfg)
    got = spark_correlate(store, cfg, spark)
    assert_same(got, want, "PostgreSQL catalog")
    store.close()
    (tmp_path / "xfid.toml").write_text('[[compare]]\ncandidate = "archmodel"\nreference = "measured"\n'
                                        'convert = "cycles->latency"\n')
    with XfidStore(tmp_path / "rules", tmp_path / "xfid.toml") as s:
        summary = s.check(actor="t", engine="spark")
        filed = s.issues()
        local = s.correlate(engine="local").discrepancies
    assert len(summary.new) == len(filed) > 0
    assert set(filed["fingerprint"]) == set(local.loc[local["kind"] != "missing_reference", "fingerprint"])


def test_cli_engine_spark_and_config(spark, tmp_path, monkeypatch):
    from xfid.cli import cli

    store, _ = rule_store(tmp_path)
    store.close()
    toml = tmp_path / "xfid.toml"
    toml.write_text('[[op_map]]\nsource = "*"\nmatch = "^attn_qkv"\nop = "attn.qkv_proj"\n\n'
                    '[[compare]]\ncandidate = "archmodel"\nreference = "measured"\nconvert = "cycles->latency"\n\n'
                    '[engine]\nname = "spark"\n\n[engine.spark]\nmaster = "local[2]"\n')
    runner = CliRunner()
    base = ["--store", str(tmp_path / "rules"), "--config", str(toml), "correlate", "--format", "json"]
    spark_out = runner.invoke(cli, base, catch_exceptions=False)  # [engine] name = "spark"
    local_out = runner.invoke(cli, [*base, "--engine", "local"], catch_exceptions=False)
    assert spark_out.exit_code == 0 and local_out.exit_code == 0, spark_out.output + local_out.output
    got, want = json.loads(spark_out.stdout), json.loads(local_out.stdout)
    assert got["settings"]["engine"] == "spark" and "engine" not in want["settings"]
    assert got["discrepancies"] == want["discrepancies"]
    assert len(got["comparisons"]) == len(want["comparisons"])


def test_calibrate_under_spark_fits_the_same_factors(spark, tmp_path):
    from xfid.api import XfidStore

    rows = []
    for wi, w in enumerate(("w1", "w2", "w3")):
        for oi, (op, lim, eff) in enumerate([("gemm[m=64,n=64,k=64]", "compute", 0.8),
                                             ("gemm[m=8,n=64,k=64]", "memory", 0.5), ("attn.sdpa", "memory", 0.5)]):
            v = 1e-5 * (wi + 1) * (oi + 1)
            rows += [rec("roofline", op, v, workload=w, config={"limiter": lim}), rec("measured", op, v / eff, workload=w)]
    make_store(tmp_path, {"rows.csv": rows}, name="cal").close()
    with XfidStore(tmp_path / "cal") as s:
        local = s.calibrate("roofline", "measured", "h100-sxm", engine="local")
        remote = s.calibrate("roofline", "measured", "h100-sxm", engine="spark")
    pd.testing.assert_frame_equal(remote.factors, local.factors)
    pd.testing.assert_frame_equal(remote.cv, local.cv)


def test_without_pyspark_the_error_names_the_extra(tmp_path, monkeypatch):
    from xfid.cli import cli
    from xfid.engine.spark.session import require_pyspark

    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark now raises ImportError
    with pytest.raises(EngineError, match=r"pip install 'xfid\[spark\]'"):
        require_pyspark()
    store, _ = rule_store(tmp_path)
    store.close()
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "rules"), "correlate", "--engine", "spark"])
    assert r.exit_code == 2 and "Error:" in r.output and "pip install 'xfid[spark]'" in r.output, r.output


def test_local_engine_stops_early_when_the_store_will_not_fit(tmp_path, monkeypatch):
    from xfid.cli import cli
    from xfid.engine.engines import check_local_fits, local_estimate

    store, _ = rule_store(tmp_path)
    with pytest.raises(EngineError, match=r"\(use engine spark\)"):
        check_local_fits(store, available=local_estimate(10) - 1)
    check_local_fits(store, available=int(local_estimate(10_000) / 0.8))  # a few records fit
    n = sum(int(c or 0) for c in store.counts().values())
    with pytest.raises(EngineError, match=r"more than 80% of the"):  # an estimate just under all of it is refused
        check_local_fits(store, available=int(local_estimate(n) / 0.8) - 1)
    check_local_fits(store, available=int(local_estimate(n) / 0.8) + 1)
    store.close()
    monkeypatch.setenv("XFID_LOCAL_MEMORY", "1M")
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "rules"), "correlate"])
    assert r.exit_code == 2 and "Error:" in r.output and "(use --engine spark)" in r.output, r.output
    assert "Traceback" not in r.output


def test_engine_config_is_validated(tmp_path):
    from xfid.config import load_config
    from xfid.errors import ConfigError

    for text, needle in (('[engine]\nname = "dask"\n', "'local' or 'spark'"),
                         ('[engine.spark]\nmastr = "local[2]"\n', "did you mean 'master'"),
                         ('[engine.spark]\nconf = { "executor.memory" = "8g" }\n', "spark.* key")):
        p = tmp_path / "xfid.toml"
        p.write_text(text)
        with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace(".", r"\.").replace("*", r"\*")):
            load_config(p)


def test_master_precedence(monkeypatch):
    from xfid.engine.spark.session import spark_settings

    cfg = config({"engine": {"spark": {"master": "spark://h:7077", "conf": {"spark.executor.memory": "8g"}}}})
    monkeypatch.delenv("XFID_SPARK_MASTER", raising=False)
    assert spark_settings(cfg)[0] == "spark://h:7077"
    assert spark_settings(cfg)[1]["spark.executor.memory"] == "8g"
    monkeypatch.setenv("XFID_SPARK_MASTER", "yarn")
    assert spark_settings(cfg)[0] == "yarn"
    assert spark_settings(cfg, "local[2]")[0] == "local[2]"


def test_sorted_codes_are_text_codes():
    """groups.sorted_codes (Arrow dictionary encoding) gives xfid.engine.scopes.text_codes' codes
    and texts (None as ""), on texts with nulls, empty and non-ASCII ones, in chunks; with
    null=None a null gets the code after the sorted non-null texts (how the alignment codes units)."""
    import numpy as np
    import pyarrow as pa

    from xfid.engine.scopes import text_codes
    from xfid.engine.spark.groups import sorted_codes

    rnd = random.Random(5)
    pool = ["run-b", "run-a", "", "µs", "日本", "Z", "a b", "run-a "]
    for size in (0, 1, 7, 200):
        values = [rnd.choice([*pool, None]) for _ in range(size)]
        half = size // 2
        col = pa.chunked_array([pa.array(values[:half], pa.string()), pa.array(values[half:], pa.string())])
        codes, texts = sorted_codes(col)
        want_codes, want_texts = text_codes(values)
        assert texts == want_texts and codes.tolist() == want_codes.tolist(), values
        codes, texts = sorted_codes(col, null=None)
        present = sorted({v for v in values if v is not None})
        assert texts == present
        assert codes.tolist() == [present.index(v) if v is not None else len(present) for v in values]
        assert codes.dtype == np.int64
