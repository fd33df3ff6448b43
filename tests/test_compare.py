"""`xfid compare`: each drift kind on crafted baseline/current pairs, each exit code, JUnit as XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from xfid.drift.drift import Thresholds, compare_snapshots, parse_fail_on
from xfid.drift.snapshot import make_snapshot, read_snapshot, write_snapshot
from xfid.engine.contract import COMPARISON_COLUMNS, ROW_COLUMNS, Correlation
from xfid.engine.fingerprints import fingerprint
from xfid.errors import XfidError


def row(op="gemm", cand=1.0, ref=1.0, kind=None, tol=0.1, pair=("archmodel", "measured"), metric="latency"):
    err = (cand - ref) / ref
    import math

    if kind is None:
        kind = "ok" if abs(err) <= tol else "over_tolerance"
    r = {c: None for c in ROW_COLUMNS}
    r.update(target="h100-sxm", workload="w", op=op, metric=metric, stat="value", candidate=pair[0],
             reference=pair[1], candidate_value=cand, reference_value=ref, unit="s", rel_error=err,
             log_ratio=math.log(cand / ref), tolerance=tol, tolerance_abs=0.0, within=abs(err) <= tol, kind=kind,
             severity=abs(err) / tol, fingerprint=fingerprint("h100-sxm", "w", op, metric, "value", *pair))
    return r


def corr(rows, mape=0.05, bias=1.0):
    comp = {c: None for c in COMPARISON_COLUMNS}
    comp.update(target="h100-sxm", workload=None, candidate="archmodel", reference="measured", metric="latency",
                stat="value", n=len(rows), mape=mape, bias=bias)
    return Correlation(rows=pd.DataFrame(rows, columns=list(ROW_COLUMNS)),
                       comparisons=pd.DataFrame([comp], columns=list(COMPARISON_COLUMNS)),
                       discrepancies=pd.DataFrame(columns=list(ROW_COLUMNS)), coverage=pd.DataFrame(),
                       config_hash="abc")


BASE = [row("a", 1.02, 1.0), row("b", 1.05, 1.0), row("c", 1.3, 1.0)]


def cats(base_rows, cur_rows, **kw):
    rep = compare_snapshots(make_snapshot(corr(base_rows)), make_snapshot(corr(cur_rows, **kw)))
    return sorted({f.category for f in rep.findings}), rep


def test_no_change_is_clean():
    c, rep = cats(BASE, BASE)
    assert c == [] and rep.exit_code == 0


def test_new_discrepancy():
    c, rep = cats(BASE, [row("a", 1.02, 1.0), row("b", 1.25, 1.0), row("c", 1.3, 1.0)])
    assert "new" in c and rep.exit_code == 1
    assert [f.key["op"] for f in rep.of("new")] == ["b"]


def test_resolved_is_reported_and_is_not_a_new_or_regression_failure():
    base = make_snapshot(corr(BASE))
    cur = make_snapshot(corr([row("a", 1.02, 1.0), row("b", 1.05, 1.0), row("c", 1.08, 1.0)]))
    rep = compare_snapshots(base, cur, fail_on=parse_fail_on("new,regression,bound"))
    assert [f.key["op"] for f in rep.of("resolved")] == ["c"] and not rep.failing
    # the model's own output moved 17%: that is drift, and the default gate says so
    assert [f.key["fidelity"] for f in compare_snapshots(base, cur).of("value")] == ["archmodel"]


def test_regression_within_discrepancy_and_improvement():
    _c, rep = cats(BASE, [row("a", 1.02, 1.0), row("b", 1.05, 1.0), row("c", 1.5, 1.0)])
    assert [f.key["op"] for f in rep.of("regression")] == ["c"] and rep.exit_code == 1
    _c, rep = cats([row("c", 1.5, 1.0)], [row("c", 1.3, 1.0)])
    assert rep.of("improvement") and not rep.of("regression")


def test_error_change_below_threshold_is_not_drift():
    c, _rep = cats([row("c", 1.30, 1.0)], [row("c", 1.34, 1.0)])
    assert "regression" not in c


def test_fidelity_value_change_even_within_tolerance():
    _c, rep = cats([row("a", 1.00, 1.0)], [row("a", 1.07, 1.07)])  # both moved 7%, error unchanged
    vals = rep.of("value")
    assert {f.key["fidelity"] for f in vals} == {"archmodel", "measured"} and rep.exit_code == 1


def test_aggregate_drift():
    rep = compare_snapshots(make_snapshot(corr(BASE, mape=0.05)), make_snapshot(corr(BASE, mape=0.12)))
    assert [f.category for f in rep.findings] == ["aggregate"] and rep.exit_code == 1
    rep = compare_snapshots(make_snapshot(corr(BASE, bias=1.0)), make_snapshot(corr(BASE, bias=1.2)))
    assert "bias 1.000x -> 1.200x" in rep.findings[0].message


def test_bound_violation_fails_and_a_known_one_is_reported():
    bv = row("a", 2.0, 1.0, kind="bound_violation", pair=("roofline", "measured"))
    c, rep = cats(BASE, [*BASE, bv])
    assert "bound" in c and rep.exit_code == 1
    c, rep = cats([*BASE, bv], [*BASE, bv])
    assert c == ["known_bound"] and rep.exit_code == 0


def test_fail_on_selects_categories():
    base, cur = make_snapshot(corr(BASE, mape=0.05)), make_snapshot(corr(BASE, mape=0.2))
    assert compare_snapshots(base, cur, fail_on=parse_fail_on("new")).exit_code == 0
    assert compare_snapshots(base, cur, fail_on=parse_fail_on("drift")).exit_code == 1
    assert parse_fail_on("any") == ("new", "regression", "bound", "drift")
    with pytest.raises(XfidError, match="unknown category 'typo'"):
        parse_fail_on("new,typo")


def test_thresholds_from_config():
    assert Thresholds.from_config({"error_abs": 0.1}).error_abs == 0.1
    with pytest.raises(XfidError, match="unknown key"):
        Thresholds.from_config({"eror_abs": 0.1})


def test_snapshot_round_trip_json_and_parquet(tmp_path):
    snap = make_snapshot(corr(BASE), label="abc123")
    for name in ("b.json", "b.parquet"):
        p = write_snapshot(snap, tmp_path / name)
        back = read_snapshot(p)
        assert back["keys"] == snap["keys"] and back["label"] == "abc123"


@pytest.fixture
def pair(tmp_path):
    b = write_snapshot(make_snapshot(corr(BASE)), tmp_path / "base.json")
    cur = write_snapshot(make_snapshot(corr([row("a", 1.02, 1.0), row("b", 1.25, 1.0), row("c", 1.3, 1.0)])),
                         tmp_path / "cur.json")
    same = write_snapshot(make_snapshot(corr(BASE)), tmp_path / "same.json")
    return b, cur, same


def test_cli_exit_codes(xfid_cli, pair, tmp_path):
    b, cur, same = pair
    r = xfid_cli("compare", "--baseline", b, "--current", same)
    assert r.exit_code == 0 and "OK: no drift" in r.output
    r = xfid_cli("compare", "--baseline", b, "--current", cur)
    assert r.exit_code == 1 and "DRIFT" in r.output and "New discrepancies (1)" in r.output
    r = xfid_cli("compare", "--baseline", tmp_path / "nope.json", "--current", cur)
    assert r.exit_code == 2 and "Error: baseline" in r.output and "does not exist" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = xfid_cli("compare", "--baseline", bad, "--current", cur)
    assert r.exit_code == 2 and "not an xfid snapshot" in r.output
    bad.write_text('{"xfid_snapshot": 99, "keys": {}, "comparisons": []}')
    r = xfid_cli("compare", "--baseline", bad, "--current", cur)
    assert r.exit_code == 2 and "format 99 is not supported" in r.output
    r = xfid_cli("compare", "--baseline", b, "--current", cur, "--fail-on", "nonsense")
    assert r.exit_code == 2 and "unknown category" in r.output


def test_cli_formats(xfid_cli, pair):
    b, cur, _ = pair
    doc = json.loads(xfid_cli("compare", "--baseline", b, "--current", cur, "--format", "json").output)
    assert doc["drift"] is True and doc["exit_code"] == 1 and doc["counts"]["new"] == 1
    md = xfid_cli("compare", "--baseline", b, "--current", cur, "--format", "markdown").output
    assert md.startswith("### ❌ xfid compare") and "| **fail** |" in md
    xml = xfid_cli("compare", "--baseline", b, "--current", cur, "--format", "junit").output
    root = ET.fromstring(xml.split("?>", 1)[1])
    suite = root.find("testsuite")
    # op b: a new discrepancy, an error regression, and the archmodel value itself moved 19%
    assert suite.get("failures") == "3"
    failed = [tc for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert sorted(tc.get("classname") for tc in failed) == ["xfid.new", "xfid.regression", "xfid.value"]
    assert failed[0].get("name") == "h100-sxm w b latency value archmodel->measured"


def test_hostile_names_are_escaped_in_markdown_and_junit(xfid_cli, tmp_path):
    evil = row("<img src=x>|`rm`", 1.5, 1.0)
    b = write_snapshot(make_snapshot(corr([])), tmp_path / "b.json")
    c = write_snapshot(make_snapshot(corr([evil])), tmp_path / "c.json")
    md = xfid_cli("compare", "--baseline", b, "--current", c, "--format", "markdown").output
    assert "<img" not in md and "&lt;img src=x&gt;\\|'rm'" in md
    xml = xfid_cli("compare", "--baseline", b, "--current", c, "--format", "junit").output
    assert "<img" not in xml
    ET.fromstring(xml.split("?>", 1)[1])


def _edited(tmp_path, edit, name="edited.json"):
    """A real snapshot written by write_snapshot, then changed by `edit` (damage or a hand edit)."""
    snap = json.loads(write_snapshot(make_snapshot(corr(BASE)), tmp_path / "orig.json").read_text())
    edit(snap, sorted(snap["keys"])[0])
    path = tmp_path / name
    path.write_text(json.dumps(snap))
    return path


def _set(*where, value):
    def edit(snap, fp):
        node = snap
        for part in where[:-1]:
            node = node[fp if part == "FP" else part]
        node[fp if where[-1] == "FP" else where[-1]] = value
    return edit


def _drop(*where):
    def edit(snap, fp):
        node = snap
        for part in where[:-1]:
            node = node[fp if part == "FP" else part]
        del node[where[-1]]
    return edit


FP0 = '"' + sorted(make_snapshot(corr(BASE))["keys"])[0] + '"'
MALFORMED = [
    (_set("comparisons", 0, "mape", value="x"), 'comparisons[0].mape: expected a number, got "x"'),
    (_set("comparisons", 0, "n", value=2.5), "comparisons[0].n: expected a whole number >= 0, got 2.5"),
    (_set("comparisons", 0, "bias", value=-1.0), "comparisons[0].bias: expected a positive number, got -1.0"),
    (_set("comparisons", 0, "bias", value=[1, 2]), "comparisons[0].bias: expected a positive number, got [1, 2]"),
    (_set("comparisons", 0, value="oops"), 'comparisons[0]: expected an object, got "oops"'),
    (_set("comparisons", 0, "target", value=7), "comparisons[0].target: expected text, got 7"),
    (_drop("comparisons", 0, "metric"), "comparisons[0].metric: missing"),
    (_set("keys", "FP", "rel_error", value="x"), f'keys[{FP0}].rel_error: expected a number, got "x"'),
    (_set("keys", "FP", "candidate_value", value={"v": 1}), f'keys[{FP0}].candidate_value: expected a number, got {{"v": 1}}'),
    (_set("keys", "FP", "reference_value", value=True), f"keys[{FP0}].reference_value: expected a number, got true"),
    (_set("keys", "FP", "within", value="yes"), f'keys[{FP0}].within: expected true or false, got "yes"'),
    (_set("keys", "FP", "kind", value="weird"), f'keys[{FP0}].kind: expected one of ok, bound_violation'),
    (_set("keys", "FP", "reference", value=None), f"keys[{FP0}].reference: missing"),
    (_set("keys", "FP", value=5), f"keys[{FP0}]: expected an object, got 5"),
    (_set("keys", "FP", "tolerance", value="\u202e" + "x" * 100),  # escaped and cut short
     f'keys[{FP0}].tolerance: expected a number >= 0, got "\\u202e{"x" * 33}...'),
    (_set("keys", "FP", "tolerance", value=-1), f"keys[{FP0}].tolerance: expected a number >= 0, got -1"),
    (_set("keys", "FP", "rel_error", value=10**400), f"keys[{FP0}].rel_error: expected a number, got 1000"),
    (_set("keys", "FP", "candidate", value="bogus"), f'keys[{FP0}].candidate: expected a fidelity'),
    (_set("comparisons", 0, "reference", value="../x"), 'comparisons[0].reference: expected a fidelity'),
    (_set("sources", value="x"), 'sources: expected a list of objects, got "x"'),
    (_set("sources", value=[{"path": 3}]), "sources[0].path: expected text, got 3"),
    (_set("label", value=["a"]), 'label: expected text, got ["a"]'),
    (_set("xfid_snapshot", value=True), "snapshot format true is not supported"),
]


@pytest.mark.parametrize(("edit", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_inner_fields_of_a_baseline_are_errors(xfid_cli, tmp_path, edit, message):
    bad = _edited(tmp_path, edit)
    same = write_snapshot(make_snapshot(corr(BASE)), tmp_path / "same.json")
    for args in (("--baseline", bad, "--current", same), ("--baseline", same, "--current", bad)):
        r = xfid_cli("compare", *args)
        assert r.exit_code == 2, r.output
        assert r.output.startswith(f"Error: {bad}: {message}"), r.output
        assert "Traceback" not in r.output and "\u202e" not in r.output
    assert f"write it again with `xfid snapshot -o {bad}`" in r.output or "not supported" in r.output
    with pytest.raises(XfidError):
        read_snapshot(bad)


def test_a_baseline_edited_with_valid_values_still_compares(tmp_path):
    path = _edited(tmp_path, _set("comparisons", 0, "mape", value=0.30))
    rep = compare_snapshots(read_snapshot(path), make_snapshot(corr(BASE)))
    assert [f.category for f in rep.findings] == ["aggregate"]


def test_deeply_nested_or_damaged_baselines_are_errors(xfid_cli, tmp_path):
    same = write_snapshot(make_snapshot(corr(BASE)), tmp_path / "same.json")
    deep = tmp_path / "deep.json"
    deep.write_text('{"xfid_snapshot": 1, "keys": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = xfid_cli("compare", "--baseline", deep, "--current", same)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {deep}: not a JSON snapshot"), r.output
    import pyarrow as pa
    import pyarrow.parquet as pq

    for meta, cols in ((b"{not json", {"fingerprint": ["a"]}), (b"[1]", {"fingerprint": ["a"]}),
                       (b'{"xfid_snapshot": 1}', {"other": ["a"]})):
        pq_path = tmp_path / "bad.parquet"
        pq.write_table(pa.table(cols).replace_schema_metadata({"xfid_snapshot": meta}), pq_path)
        r = xfid_cli("compare", "--baseline", pq_path, "--current", same)
        assert r.exit_code == 2 and r.output.startswith(f"Error: {pq_path}: "), r.output
        assert "Traceback" not in r.output
