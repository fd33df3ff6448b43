"""The engine contract without Java: one Request from the options to the engine, engines
registered by name, Spark's settings as its own object (no environment side channel)."""

from __future__ import annotations

import os

import pytest

from tests.test_engine_helpers import config
from xfid.config import ENGINES as CONFIG_ENGINES
from xfid.engine import engines
from xfid.engine.engines import ENGINES, EngineChoice, LocalEngine, SparkEngine, get_engine
from xfid.engine.request import Request
from xfid.errors import ConfigError
from xfid.store import Store


def test_engines_registered_by_name():
    assert tuple(ENGINES) == CONFIG_ENGINES  # the config's accepted names are the registry's
    for name, cls in ENGINES.items():
        assert cls.name == name
    assert isinstance(get_engine(config()), LocalEngine)
    assert isinstance(get_engine(config({"engine": {"name": "spark"}})), SparkEngine)
    assert isinstance(get_engine(config({"engine": {"name": "spark"}}), "local"), LocalEngine)
    with pytest.raises(ConfigError, match="unknown engine 'dask'"):
        get_engine(config(), "dask")


def test_spark_settings_are_the_engines_own():
    eng = get_engine(config(), EngineChoice("spark", {"master": "local[3]"}))
    assert isinstance(eng, SparkEngine) and eng.settings.master == "local[3]"
    assert get_engine(config(), EngineChoice(None, {"master": "local[3]"})).settings.available is None  # local


def test_request_of_normalises_without_renaming():
    r = Request.of(targets=["a"], runs=["archmodel=r1"], as_of="2026-11-01", pairs=["roofline->measured"],
                   keep={"metric": ["latency"]})
    assert r == Request(targets=("a",), runs=("archmodel=r1",), as_of="2026-11-01", pairs=("roofline->measured",),
                        keep={"metric": ("latency",)})
    assert Request.of(runs=[]).runs is None and Request.of(runs="r").runs == "r"
    assert r.but(track=("fp",)).track == ("fp",) and r.track == ()
    with pytest.raises(AttributeError):
        r.runs = None  # type: ignore[misc]  # frozen
    # one string is one name, never its characters
    assert Request.of(targets="t100", pairs="roofline:measured", track="0123abcd").track == ("0123abcd",)
    assert Request.of(targets="t100").targets == ("t100",) and Request.of(pairs="a:b").pairs == ("a:b",)


def test_the_api_correlate_takes_no_engine_only_arguments():
    """Spark's `track` / `keep` travel in the Request (as check and calibrate pass them), not as
    arguments of XfidStore.correlate, which are the same for every engine."""
    import inspect

    from xfid.api import XfidStore

    params = set(inspect.signature(XfidStore.correlate).parameters)
    assert not params & {"track", "keep", "master", "conf"}
    assert XfidStore.request(track="fp1").track == ("fp1",)


def _capture(monkeypatch):
    seen: list[tuple[object, Request]] = []

    def fake(self, store, config, request):
        seen.append((self, request))
        from xfid.engine.pipeline import correlate

        return correlate(store, config, request)

    monkeypatch.setattr(LocalEngine, "correlate", fake)
    monkeypatch.setattr(SparkEngine, "correlate", fake)
    return seen


def test_the_cli_passes_one_request_and_master_without_the_environment(xfid_cli, monkeypatch):
    Store(xfid_cli.store).close()
    monkeypatch.delenv("XFID_SPARK_MASTER", raising=False)
    seen = _capture(monkeypatch)
    r = xfid_cli("correlate", "--format", "json", "--target", "t100-a0", "--run", "archmodel=r1", "--as-of",
                 "2026-11-01", "--pair", "roofline:measured", "--include-missing", "--engine", "spark",
                 "--master", "local[3]")
    assert r.exit_code == 0, r.output
    eng, req = seen[-1]
    assert isinstance(eng, SparkEngine) and eng.settings.master == "local[3]"
    assert "XFID_SPARK_MASTER" not in os.environ
    assert req == Request(targets=("t100-a0",), runs=("archmodel=r1",), as_of="2026-11-01",
                          pairs=("roofline:measured",), include_missing=True, fingerprints="discrepancies")


def test_check_asks_a_partial_engine_for_the_open_issues(xfid_cli, monkeypatch):
    Store(xfid_cli.store).close()
    seen = _capture(monkeypatch)
    monkeypatch.setattr(engines, "open_fingerprints", lambda tracker: ["fp1", "fp2"])
    assert xfid_cli("check", "--engine", "spark").exit_code == 0
    assert seen[-1][1].track == ("fp1", "fp2")
    assert xfid_cli("check", "--engine", "local").exit_code == 0
    assert seen[-1][1].track == ()  # the local engine returns every row anyway


def test_commands_are_one_api_call(xfid_cli, monkeypatch, tmp_path):
    """doctor, roofline, store copy and calibrate's spread go through the API (the CLI parses and formats)."""
    import json
    from dataclasses import asdict

    import xfid
    from xfid.api import XfidStore

    r = xfid_cli("roofline", "--target", "t100-a0", "--block", "omvm", "--shape", "1", "--format", "json", "--ingest")
    assert r.exit_code == 0, r.output
    with xfid.open_store(xfid_cli.store) as store:
        bounds = store.roofline("t100-a0", block="omvm", shapes="1")
        assert json.loads(r.stdout) == bounds.records and bounds.target == "t100-a0"
        rep = store.doctor()
    d = json.loads(xfid_cli("doctor", "--format", "json").stdout)
    assert d == {**asdict(rep), "ok": rep.ok}
    calls = []
    for name in ("doctor", "rebuild_catalog", "copy_to"):
        def fake(self, *a, _name=name, **k):
            calls.append(_name)
            raise xfid.errors.XfidError(f"stand-in {_name}")
        monkeypatch.setattr(XfidStore, name, fake)
    xfid_cli("doctor")
    xfid_cli("doctor", "--rebuild-catalog")
    xfid_cli("store", "copy", "--to-database", "postgresql://u@h/db")
    assert calls == ["doctor", "rebuild_catalog", "copy_to"]


# --- the schema module: every engine produces every declared field (no Java needed) --------------

def _schema_store(tmp_path):
    from tests.test_engine_helpers import make_store, rec

    return make_store(tmp_path, {
        "m.csv": [rec("measured", "gemm", 1.0e-3), rec("measured", "mlp", 2.0e-3), rec("measured", "attn", 3.0e-3),
                  rec("measured", "gemm", 1.1e-3, workload="w2"), rec("measured", "norm", 4.0e-4)],
        "a.csv": [rec("archmodel", "gemm", 1.2e-3), rec("archmodel", "mlp", 1.5e-3), rec("archmodel", "attn", 3.1e-3),
                  rec("archmodel", "gemm", 1.0e-3, workload="w2"), rec("archmodel", "softmax", 1e-4)],
        "r.csv": [rec("roofline", "gemm", 0.5e-3), rec("roofline", "mlp", 2.5e-3), rec("roofline", "attn", 1.0e-3)],
    })


def _conforms(df, fields):
    """Every declared field is a column, in order, and its values convert to the declared Arrow type."""
    import pyarrow as pa

    from xfid.engine.schema import names

    assert tuple(df.columns) == names(fields)
    for f in fields:
        col = df[f.name]
        values = col.astype(object).where(col.notna(), None).tolist()
        pa.array(values, f.type, from_pandas=True)  # raises when a value is not of the type


def test_the_local_engine_produces_every_declared_field(tmp_path):
    from xfid.engine import correlate
    from xfid.engine.schema import (
        COMPARISON_FIELDS,
        COUNT_FIELDS,
        COVERAGE_FIELDS,
        ROW_EXTRA_FIELDS,
        ROW_FIELDS,
    )
    from xfid.engine.schema import names as field_names

    corr = correlate(_schema_store(tmp_path), config())
    assert len(corr.rows) and len(corr.comparisons) and len(corr.discrepancies)
    _conforms(corr.rows, (*ROW_FIELDS, *ROW_EXTRA_FIELDS))
    _conforms(corr.discrepancies, (*ROW_FIELDS, *ROW_EXTRA_FIELDS))
    _conforms(corr.comparisons, COMPARISON_FIELDS)
    assert tuple(corr.coverage.columns[:len(COVERAGE_FIELDS)]) == field_names(COVERAGE_FIELDS)
    aligned = [p for p in corr.settings["pairs"] if "skipped" not in p]
    assert aligned and all(set(field_names(COUNT_FIELDS)) <= set(p) for p in aligned)


def test_grouped_stats_computes_exactly_the_declared_statistics():
    import numpy as np

    from xfid.engine.schema import BOUND_FLAG, BOUND_STATS, ESTIMATE_STATS, STAT_FIELDS, names
    from xfid.engine.stats import grouped_stats

    x = np.array([0.1, -0.2, 0.05, 0.3])
    st = grouped_stats(np.zeros(4, np.int64), 1, x, np.log1p(x), 1 + x, np.ones(4), np.ones(4, bool))
    assert set(st) == {*names(STAT_FIELDS), BOUND_FLAG.name}
    assert set(ESTIMATE_STATS) | set(BOUND_STATS) <= set(names(STAT_FIELDS))


def _entries(store, cfg):
    """The Spark engine's entries (ENTRY_SCHEMA) of one (target, workload), from the local selection."""
    import pandas as pd

    from xfid.engine.spark.groups import ENTRY_SCHEMA

    cols = [p.split()[0] for p in ENTRY_SCHEMA.split(",")]
    recs = store.read()
    df = recs.to_pandas() if hasattr(recs, "to_pandas") else recs
    df = df[(df["target"] == "h100-sxm") & (df["workload"] == "w1")]
    out = pd.DataFrame({c: df[c].astype(object) if c in df else None for c in cols})
    out["value"] = df["value"].astype(float).to_numpy()
    out["ref_value"] = out["value"]
    out["n"] = 1
    out["flagged"] = False
    return out


def _with_provenance(rows, entries):
    """What xfid.engine.spark.provenance.with_provenance joins in Spark SQL, in pandas: each side's
    entry found by its key (the row's fields, or the entry references where they differ)."""
    import pandas as pd

    from xfid.engine.spark import groups

    out = rows.astype({c: object for c in rows.columns if str(rows[c].dtype) == "category"})
    ent = entries.astype(object)
    key = ["fidelity", "target", "workload", "op", "metric", "stat"]
    for side, fid, metric, stat in (("candidate", "candidate", "candidate_entry_metric", None),
                                    ("reference", "reference", "reference_entry_metric", "reference_entry_stat")):
        matched = out["reference_n"].notna() if side == "reference" else pd.Series(True, index=out.index)
        look = pd.DataFrame({"fidelity": out[fid].where(matched),
                             "target": out["target"], "workload": out["workload"], "op": out["op"],
                             "metric": out[metric].fillna(out["metric"]),
                             "stat": out[stat].fillna(out["stat"]) if stat else out["stat"]})
        got = look.merge(ent[[*key, *groups.JOINED]], how="left", on=key, validate="many_to_one")
        for p in groups.JOINED:
            out[f"{side}_{p}"] = got[p].to_numpy()
    return out.drop(columns=[f.name for f in groups.ENTRY_REFS])


def test_the_spark_frame_builders_produce_every_declared_field(tmp_path, monkeypatch):
    """Spark's executor functions (plain Arrow/pandas code) and its driver-side frame, without a JVM."""
    import pyarrow as pa

    from xfid.engine.pairs import resolve_pairs
    from xfid.engine.result import engine_settings
    from xfid.engine.schema import COMPARISON_FIELDS, ROW_EXTRA_FIELDS, ROW_FIELDS, arrow_schema
    from xfid.engine.spark import groups
    from xfid.engine.spark.engine import _local_rows, pack_comparisons

    store, cfg = _schema_store(tmp_path), config()
    pdf = _entries(store, cfg)
    fids = sorted(set(pdf["fidelity"]))
    settings = engine_settings(cfg)
    ctx = groups.AlignContext(cfg, settings, resolve_pairs(cfg, None, fids), fids)
    built = []
    real_rows = groups._rows

    def rows_spy(*a, **k):  # what the executors build per pair, before the schema's nulls fill it
        built.append(real_rows(*a, **k))
        return built[-1]

    monkeypatch.setattr(groups, "_rows", rows_spy)
    table = groups.align_group(pa.Table.from_pandas(pdf[list(groups.ALIGN_INPUT)], preserve_index=False), ctx)
    assert table.schema == arrow_schema(groups.ALIGNED_FIELDS)
    # every declared row field: built by the executors, or the provenance joined back in Spark SQL
    joined = [f.name for f in groups.PROVENANCE_FIELDS]
    declared = [f.name for f in (*ROW_FIELDS, *ROW_EXTRA_FIELDS)]
    refs = [f.name for f in groups.ENTRY_REFS]
    assert built and all(tuple(b) == ("pair_index", *(n for n in declared if n not in joined), *refs) for b in built)
    assert table.schema.names == ["pair_index", *(n for n in declared if n not in joined), *refs, "counts"]
    assert joined and set(joined) <= set(declared)
    frame = table.to_pandas(strings_to_categorical=True)
    rows = _with_provenance(frame[frame["counts"].isna()].drop(columns="counts").reset_index(drop=True), pdf)
    assert len(rows) and rows["candidate_run"].notna().all()
    local = _local_rows([rows.copy()])
    _conforms(local, (*ROW_FIELDS, *ROW_EXTRA_FIELDS))
    usable = rows[rows["kind"].astype(str) != "missing_reference"].astype({c: object for c in groups.STATS_GROUP})
    sctx = groups.StatsContext.of(settings, True, True, ctx.pairs)
    parts = [groups.stats_arrow(pa.Table.from_pandas(g[[*groups.STATS_GROUP, "workload", "op", "rel_error",
                                                        "log_ratio", "candidate_value", "reference_value",
                                                        "within", "efficiency", "kind"]].astype(
                                                            {"workload": object, "op": object, "kind": object}),
                                                      preserve_index=False), sctx)
             for _, g in usable.groupby(list(groups.STATS_GROUP), observed=True)]
    assert parts and all(p.schema == arrow_schema(groups.STATS_FIELDS_SPARK) for p in parts)
    from xfid.engine.aggregate import with_violation_ids  # what finish() adds

    _conforms(with_violation_ids(pack_comparisons(pa.concat_tables(parts).to_pandas()), local), COMPARISON_FIELDS)


# modules that build the engine's outputs; the input side (selection, spark/select: the records'
# dimensions), the fingerprint's identity parts (fingerprints.py) and the statistic groups of
# stats.py (checked against the schema above) declare other things under the same names
OUTPUT_MODULES = ("contract", "stats", "rows", "aggregate", "pipeline", "result", "engines", "request", "output", "jsonout",
                  "dataset", "spark/engine", "spark/groups", "spark/output", "../drift/snapshot")
NOT_FIELD_LISTS = {("output", "COMP_HEAD"): "table headers", ("output", "BOUND_HEAD"): "table headers",
                   ("output", "DISC_HEAD"): "table headers",
                   ("../drift/snapshot", "NARROWER"): "value ranges narrower than the declared types",
                   ("spark/output", "VIOLATION_COLUMNS"): "the columns aggregate.with_violation_ids reads (a projection)",
                   ("../drift/snapshot", "KEY_REQUIRED"): "checked against KEY_FIELDS below",
                   ("../drift/snapshot", "AGG_REQUIRED"): "checked against AGG_FIELDS below"}


def _module_literals(path):
    """(assigned name, line, string constants) of each module-level tuple, list, set or dict literal."""
    import ast

    tree = ast.parse(path.read_text())
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        name = target.id if isinstance(target, ast.Name) else "?"
        for sub in ast.walk(node.value):
            items = sub.keys if isinstance(sub, ast.Dict) else sub.elts if isinstance(sub, (ast.Tuple, ast.List, ast.Set)) else []
            strs = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if strs:
                yield name, node.lineno, strs


def test_no_engine_module_redeclares_the_schemas_fields():
    from pathlib import Path

    import xfid.engine
    from xfid.engine import schema

    fields = {f.name for fs in (schema.ROW_FIELDS, schema.ROW_EXTRA_FIELDS, schema.STAT_FIELDS,
                                schema.COMPARISON_FIELDS, schema.COUNT_FIELDS, schema.COVERAGE_FIELDS) for f in fs}
    root = Path(xfid.engine.__file__).parent
    found = []
    for mod in OUTPUT_MODULES:
        for name, line, strs in _module_literals(root / f"{mod}.py"):
            hit = [s for s in strs if s in fields]
            if len(hit) >= 3 and (mod, name) not in NOT_FIELD_LISTS:
                found.append(f"{mod}.py:{line} {name}: {hit}")
    assert not found, "field lists outside xfid/engine/schema.py (derive them from it):\n" + "\n".join(found)


CLEANED_MODULES = ("engine/spark/engine", "drift/history", "report/attach")
"""Modules (under xfid/) that derive every list of fields from xfid.engine.schema, inside functions too."""


def field_runs(source, fields, least=3):
    """(line, names) of every literal (tuple, list, set, dict keys) or call whose arguments write
    `least` or more of `fields` as strings, anywhere in a module's `source`."""
    import ast

    for node in ast.walk(ast.parse(source)):
        items = (node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set))
                 else node.args if isinstance(node, ast.Call) else [])
        hit = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in fields]
        if len(hit) >= least:
            yield node.lineno, hit


def _all_field_names():
    from xfid.engine import schema

    return {f.name for fs in (schema.ROW_FIELDS, schema.ROW_EXTRA_FIELDS, schema.STAT_FIELDS,
                              schema.COMPARISON_FIELDS, schema.COUNT_FIELDS, schema.COVERAGE_FIELDS) for f in fs}


def test_the_cleaned_modules_write_no_field_list_even_inside_functions():
    """spark/engine's stats input and row order, the drift history's series point, the report's
    numbers CSV: each list of row, comparison or statistic fields comes from xfid.engine.schema."""
    from pathlib import Path

    import xfid

    fields, root = _all_field_names(), Path(xfid.__file__).parent
    found = [f"{mod}.py:{line} {hit}" for mod in CLEANED_MODULES
             for line, hit in field_runs((root / f"{mod}.py").read_text(), fields)]
    assert not found, "field lists outside xfid/engine/schema.py (derive them from it):\n" + "\n".join(found)


def test_the_field_list_check_sees_what_it_looks_for():
    """The check above finds a list in a call, a tuple in a function and a dict's keys."""
    fields = _all_field_names()
    src = ('def f(df):\n    df.select("a", "workload", "op", "rel_error")\n'
           '    for c in ("target", "metric", "stat"):\n        pass\n'
           '    return {"mape": 1, "bias": 2, "kendall": 3}, ("workload", "x", "y")\n')
    assert [line for line, _ in field_runs(src, fields)] == [2, 3, 5]


ROW_BUILDERS = ("rows", "spark/groups")
"""The modules that build the rows (the local engine's frame, Spark's per-group Arrow arrays)."""


def _row_only_names():
    """The row field names that are not also an input's name (a PairRows array, a Pair side, an
    entry column): where one of those is written, it can only mean the row field."""
    import dataclasses

    from xfid.engine import schema
    from xfid.engine.pairrows import Pair, PairRows
    from xfid.engine.spark.select import ENTRY_FIELDS

    inputs = {f.name for f in (*dataclasses.fields(PairRows), *dataclasses.fields(Pair))} | set(schema.names(ENTRY_FIELDS))
    return {f.name for f in (*schema.ROW_FIELDS, *schema.ROW_EXTRA_FIELDS)} - inputs


def _strings(path):
    """(line, text) of every string constant in a module (f-strings' literal parts included)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def row_field_literals(root):
    """Row field names written as strings in the row builders under `root` (xfid/engine)."""
    names = _row_only_names()
    return [f"{mod}.py:{line} {text!r}" for mod in ROW_BUILDERS for line, text in _strings(root / f"{mod}.py")
            if text in names]


def test_the_row_builders_spell_no_row_field_name():
    """Both engines build each row field from its declared source (xfid.engine.schema.Source:
    candidate_value from PairRows.cand_value, ...): a row field's name written in a row builder
    is a second declaration of the mapping."""
    from pathlib import Path

    import xfid.engine
    from xfid.engine import schema

    names = _row_only_names()
    assert {"fingerprint", "candidate_value", "rel_error", "tolerance", "candidate_n", "reference_n",
            "candidate_run", "reference_source_loc"} <= names  # what the check can see
    found = row_field_literals(Path(xfid.engine.__file__).parent)
    assert not found, "row field names in the row builders (build them from schema.Source):\n" + "\n".join(found)
    every = (*schema.ROW_FIELDS, *schema.ROW_EXTRA_FIELDS)
    assert all(f.source is not None for f in every)
    assert len({f.source for f in every}) == len(every), "two row fields from one source"


def test_every_row_field_source_names_an_input():
    """Each declared source names something the builders have: a PairRows array, a coded array
    with its list of texts, a selection dimension, an entry text the local engine reads."""
    import dataclasses

    from xfid.engine import schema
    from xfid.engine.pairrows import PairRows, code_texts
    from xfid.engine.rows import Provenance

    arrays = {f.name for f in dataclasses.fields(PairRows)}
    lists = code_texts([], [], [])
    for f in (*schema.ROW_FIELDS, *schema.ROW_EXTRA_FIELDS):
        s = f.source
        assert s.kind in (schema.NUMBER, schema.CODE, schema.ENTRY, schema.FIDELITY, schema.COUNT, schema.TEXT,
                          schema.FINGERPRINT), f.name
        if s.kind in (schema.NUMBER, schema.CODE):
            assert s.name in arrays, f.name
        if s.kind == schema.CODE:
            assert s.name in lists, f.name
        if s.kind == schema.ENTRY:
            assert s.name in ("target", "workload", "op", "stat"), f.name
        if s.kind == schema.TEXT:
            assert s.name in Provenance._fields, f.name
        if s.kind in (schema.FIDELITY, schema.COUNT, schema.TEXT):
            assert s.side in schema.SIDES, f.name


def test_the_snapshot_validation_covers_exactly_the_snapshot_fields():
    from xfid.drift import snapshot

    assert tuple(snapshot.KEY_TYPES) == snapshot.KEY_FIELDS and tuple(snapshot.AGG_TYPES) == snapshot.AGG_FIELDS
    assert set(snapshot.NARROWER) <= set(snapshot.KEY_FIELDS) | set(snapshot.AGG_FIELDS)
    assert set(snapshot.KEY_REQUIRED) <= set(snapshot.KEY_FIELDS)
    assert set(snapshot.AGG_REQUIRED) <= set(snapshot.AGG_FIELDS)


def test_the_engine_steps_are_the_correlation(tmp_path):
    """select -> align -> aggregate -> finish, called one by one through the Engine protocol,
    give what correlate() gives."""
    from xfid.engine import correlate
    from xfid.engine.result import begin, finish

    store, cfg = _schema_store(tmp_path), config()
    req = Request.of(include_missing=True)
    eng = get_engine(cfg, "local")
    start = begin(cfg, req)
    aligned = eng.align(eng.select(store, cfg, req, start))
    got = finish(store, cfg, req, start, aligned, eng.aggregate(aligned))
    want = correlate(store, cfg, req)
    from xfid.engine.output import to_json

    assert to_json(got) == to_json(want) and got.rows.equals(want.rows)
    from xfid.engine.engines import correlate_with

    assert to_json(correlate_with(store, cfg, "local", request=req)) == to_json(want)


def test_the_snapshot_validation_derived_from_the_schema_is_the_one_it_replaced():
    """The tables the snapshot validation once wrote out by hand equal those it now derives from
    the schema's types (plus its narrower ranges)."""
    from xfid.drift import snapshot as s

    written = {
        "keys": {"target": s.TEXT, "workload": s.TEXT, "op": s.TEXT, "metric": s.TEXT, "stat": s.TEXT,
                 "candidate": s.FIDELITY, "reference": s.FIDELITY, "candidate_value": s.NUMBER,
                 "reference_value": s.NUMBER, "unit": s.TEXT, "rel_error": s.NUMBER, "log_ratio": s.NUMBER,
                 "tolerance": s.NONNEG, "kind": s.TEXT, "within": s.FLAG},
        "comparisons": {"target": s.TEXT, "candidate": s.FIDELITY, "reference": s.FIDELITY, "metric": s.TEXT,
                        "stat": s.TEXT, "n": s.COUNT, "mape": s.NUMBER, "median_ape": s.NUMBER, "bias": s.POSITIVE,
                        "log_rmse": s.NUMBER, "spearman": s.NUMBER, "kendall": s.NUMBER,
                        "within_tolerance": s.NUMBER, "compared_as": s.TEXT, "violations": s.COUNT,
                        "violation_worst": s.NUMBER, "achieved_median": s.NUMBER, "achieved_q1": s.NUMBER,
                        "achieved_q3": s.NUMBER},
    }
    assert list(s.KEY_TYPES.items()) == list(written["keys"].items())
    assert list(s.AGG_TYPES.items()) == list(written["comparisons"].items())


@pytest.mark.parametrize("opts", [{"convert": {}}, {"convert": ["cycles->latency"]}, {"convert": 3},
                                  {"bounds": {}}, {"bounds": ["bound"]}])
def test_a_pair_option_that_is_not_a_string_is_a_config_error(tmp_path, opts):
    """Found by benchmarks/fuzz.py --kind config: `convert = {}` raised TypeError (unhashable)."""
    from xfid.config import load_config
    from xfid.engine.pairs import resolve_pairs

    table = ", ".join(f'"{k}" = {v!r}'.replace("'", '"') if not isinstance(v, dict) else f'"{k}" = {{ }}'
                      for k, v in opts.items())
    p = tmp_path / "xfid.toml"
    p.write_text(f'compare = [{{ "candidate" = "roofline", "reference" = "measured", {table} }}]\n')
    cfg = load_config(p)
    with pytest.raises(ConfigError, match=r"compare\[0\]\.(convert|bounds) = .* is not known; use one of"):
        resolve_pairs(cfg, None, ["roofline", "measured"])


def test_the_comparison_fields_derived_from_the_statistics_are_the_ones_once_written_out():
    """COMPARISON_FIELDS, the estimate/bound lists and the intervals are derived from STAT_FIELDS
    (a statistic is declared once); they equal what was written out by hand before."""
    import pyarrow as pa

    from xfid.engine import contract, schema

    F, FLOATS = pa.float64(), pa.list_(pa.float64())
    written = [("target", pa.string()), ("workload", pa.string()), ("candidate", pa.string()),
               ("reference", pa.string()), ("metric", pa.string()), ("stat", pa.string()),
               ("n", pa.int64()), ("mape", F), ("median_ape", F), ("bias", F), ("log_rmse", F), ("pearson_log", F),
               ("spearman", F), ("kendall", F), ("within_tolerance", F), ("mape_ci", FLOATS), ("bias_ci", FLOATS),
               ("compared_as", pa.string()), ("violations", pa.int64()), ("violation_worst", F),
               ("achieved_median", F), ("achieved_q1", F), ("achieved_q3", F), ("achieved_ci", FLOATS),
               ("violation_ids", pa.list_(pa.string()))]
    assert [(f.name, f.type) for f in schema.COMPARISON_FIELDS] == written
    assert schema.CI_FIELDS == {"mape_ci": ("mape_ci_low", "mape_ci_high"), "bias_ci": ("bias_ci_low", "bias_ci_high"),
                                "achieved_ci": ("achieved_ci_low", "achieved_ci_high")}
    assert contract.ESTIMATE_COLUMNS == ("mape", "median_ape", "bias", "log_rmse", "within_tolerance", "mape_ci",
                                         "bias_ci")
    assert contract.BOUND_COLUMNS == ("violations", "violation_worst", "achieved_median", "achieved_q1",
                                      "achieved_q3", "achieved_ci", "violation_ids")
    assert contract.COMPARED_AS == ("estimate", "bound")
