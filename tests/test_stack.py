"""Stack validity windows: a calibration records the stack its measured records came from; a
check against measurements from another stack marks those rows stack_changed, holds the ones the
change accounts for (within [tracker] stack_factor x tolerance) and files the rest; on both catalogs."""

from __future__ import annotations

import json

import pytest

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
OPS = ("gemm[m=128,n=128,k=128]", "attn.qkv", "mlp.up")
BASE = {"w1": (100.0, 200.0, 300.0), "w2": (110.0, 220.0, 330.0)}


def ingest(cli, tmp_path, name, fid, run, day, values, meta=()):
    """One CSV of latency/value numbers per (workload, op), ingested with `--meta` pairs."""
    lines = [f"{fid},h100-sxm,{w},\"{op}\",latency,value,{v},us,{run},2026-11-{day:02d}T00:00:00Z"
             for w, vals in values.items() for op, v in zip(OPS, vals, strict=True)]
    f = tmp_path / name
    f.write_text(HEADER + "\n".join(lines) + "\n")
    args = [a for m in meta for a in ("--meta", m)]
    r = cli("ingest", f, *args)
    assert r.exit_code == 0, r.output


def calibrated_store(cli, tmp_path):
    """Measured on vLLM 0.8.4 (w1) and 0.8.5 (w2); archmodel off by exactly 2x; calibrated and written back."""
    ingest(cli, tmp_path, "m1.csv", "measured", "r1", 1, {"w1": BASE["w1"]}, ["vllm_version=0.8.4"])
    ingest(cli, tmp_path, "m2.csv", "measured", "r1", 1, {"w2": BASE["w2"]}, ["vllm_version=0.8.5"])
    half = {w: tuple(v / 2 for v in vals) for w, vals in BASE.items()}
    ingest(cli, tmp_path, "a.csv", "archmodel", "a1", 1, half)
    r = cli("calibrate", "--candidate", "archmodel", "--reference", "measured", "--target", "h100-sxm",
            "--format", "json", "--write-back")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_calibration_records_its_stack_window(catalog, xfid_cli, tmp_path):
    doc = calibrated_store(xfid_cli, tmp_path)
    assert doc["summary"]["stack"] == {"vllm_version": ["0.8.4", "0.8.5"]}
    text = xfid_cli("calibrate", "--candidate", "archmodel", "--reference", "measured", "--target", "h100-sxm").output
    assert "stack (measured records): vllm_version 0.8.4 to 0.8.5" in text
    recs = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    cal = [r for r in recs if r["fidelity"] == "archmodel-cal"]
    assert len(cal) == 6
    assert all(json.loads(r["config"])["calibration"]["stack"] == {"vllm_version": ["0.8.4", "0.8.5"]} for r in cal)


def test_check_off_the_calibrated_stack(catalog, xfid_cli, tmp_path):
    calibrated_store(xfid_cli, tmp_path)
    first = json.loads(xfid_cli("check", "--format", "json").stdout)
    assert first["stack_changed"] == []  # every reference inside 0.8.4 .. 0.8.5
    # re-measured on vLLM 0.11.0: w1 gemm 15% slower (within 2 x 10%), w1 attn 50% slower (beyond)
    new = {"w1": (115.0, 300.0, 300.0), "w2": BASE["w2"]}
    ingest(xfid_cli, tmp_path, "m3.csv", "measured", "r2", 5, new, ["vllm_version=0.11.0"])
    r = xfid_cli("check", "--format", "json")
    doc = json.loads(r.stdout)
    rows = [x for x in doc["stack_changed"] if x["candidate"] == "archmodel-cal"]
    assert len(rows) == 6  # every calibrated row now compares with 0.11.0 measurements
    by_op = {(x["workload"], x["op"]): x for x in rows}
    gemm, attn = by_op[("w1", OPS[0])], by_op[("w1", OPS[1])]
    assert gemm["held"] and gemm["kind"] == "stack_changed" and abs(gemm["rel_error"] + 0.1304) < 1e-3
    assert not attn["held"] and attn["kind"] == "over_tolerance"
    assert {x["kind"] for x in rows} - {"stack_changed", "over_tolerance"} == {"ok"}
    (change,) = gemm["changes"]
    assert change == {"by": "calibration", "of": "archmodel-cal", "fit_id": change["fit_id"], "key": "vllm_version",
                      "value": "0.11.0", "window": "0.8.4 to 0.8.5", "side": "reference"}
    issues = json.loads(xfid_cli("issues", "list", "--format", "json").stdout)
    cal = [i for i in issues if i["candidate"] == "archmodel-cal"]
    assert [(i["workload"], i["op"]) for i in cal] == [("w1", OPS[1])]  # the held row is not filed
    text = xfid_cli("check").output
    assert "stack changed: 6 row(s)" in text and "1 held" in text
    assert "6 keys measured on vllm_version 0.11.0; archmodel-cal was calibrated on vllm_version 0.8.4 to 0.8.5" in text
    shown = xfid_cli("issues", "show", cal[0]["id"]).output
    assert "stack changed (over_tolerance)" in shown
    assert "reference vllm_version 0.11.0 outside archmodel-cal's calibration (0.8.4 to 0.8.5)" in shown
    detail = json.loads(xfid_cli("issues", "show", cal[0]["id"], "--format", "json").stdout)
    assert [e["check_id"] for e in detail["stack_changed"]] == [2, 3]


def test_stack_factor_one_files_every_row_beyond_tolerance(catalog, xfid_cli, tmp_path):
    calibrated_store(xfid_cli, tmp_path)
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\nstack_factor = 1\n")
    ingest(xfid_cli, tmp_path, "m3.csv", "measured", "r2", 5, {"w1": (115.0, 300.0, 300.0), "w2": BASE["w2"]},
           ["vllm_version=0.11.0"])
    doc = json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)
    rows = [x for x in doc["stack_changed"] if x["candidate"] == "archmodel-cal"]
    assert len(rows) == 6 and not any(x["held"] for x in rows)
    issues = json.loads(xfid_cli("issues", "list", "--format", "json").stdout)
    assert sorted(i["op"] for i in issues if i["candidate"] == "archmodel-cal") == sorted(OPS[:2])


def test_tolerance_rule_scoped_to_a_stack(catalog, xfid_cli, tmp_path):
    cfg = tmp_path / "xfid.toml"
    cfg.write_text('[[tolerance]]\npair = "archmodel->measured"\nrel = 0.10\nstack = { vllm_version = "0.8.*" }\n')
    ingest(xfid_cli, tmp_path, "m1.csv", "measured", "r1", 1, {"w1": BASE["w1"]}, ["vllm_version=0.8.5"])
    ingest(xfid_cli, tmp_path, "a.csv", "archmodel", "a1", 1, {"w1": (100.0, 230.0, 300.0)})  # attn 15% fast
    doc = json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)
    assert doc["stack_changed"] == [] and len(doc["new"]) == 1
    ingest(xfid_cli, tmp_path, "m2.csv", "measured", "r2", 3, {"w1": BASE["w1"]}, ["vllm_version=0.11.0"])
    doc = json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)
    assert len(doc["stack_changed"]) == 3
    attn = next(x for x in doc["stack_changed"] if x["op"] == OPS[1])
    assert attn["held"] and attn["changes"][0]["by"] == "tolerance" and attn["changes"][0]["window"] == "0.8.*"
    assert doc["still_open"] == [] and doc["resolved"] == []  # held: the open issue is left as it is
    assert "the tolerance for archmodel->measured holds on vllm_version 0.8.*" in xfid_cli(
        "--config", cfg, "check").output


@pytest.mark.parametrize(("text", "said"), [
    ('stack = "0.8.*"', "tolerance[0].stack must be a table"),
    ("stack = {}", "tolerance[0].stack is empty"),
    ("stack = { vllm_version = 8 }", "tolerance[0].stack.vllm_version must be a non-empty glob"),
    ('stak = { vllm_version = "0.8.*" }', "unknown key(s) stak"),
])
def test_bad_stack_scope_is_a_clear_error(xfid_cli, tmp_path, text, said):
    cfg = tmp_path / "xfid.toml"
    cfg.write_text(f'[[tolerance]]\npair = "archmodel->measured"\nrel = 0.10\n{text}\n')
    r = xfid_cli("--config", cfg, "check")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and said in r.output, r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize(("text", "said"), [
    ("stack_factor = 0.5", "[tracker] stack_factor must be a number >= 1"),
    ('stack_factor = "2"', "[tracker] stack_factor must be a number"),
    ("stale_after = 0", "[tracker] stale_after must be an integer >= 1"),
    ("stale_window = 1.5", "[tracker] stale_window must be an integer >= 1"),
])
def test_bad_tracker_keys_are_clear_errors(xfid_cli, tmp_path, text, said):
    cfg = tmp_path / "xfid.toml"
    cfg.write_text(f"[tracker]\n{text}\n")
    r = xfid_cli("--config", cfg, "check")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and said in r.output, r.output


def test_window_and_inside_order_versions_as_versions():
    from xfid.tracker.stack import inside, span, stack_of, window

    w = window(['{"vllm_version": "0.9.2", "dtype": "bf16", "batch": 8}', {"vllm_version": "0.10.1"},
                {"vllm_version": "0.8.5", "cuda_version": "12.4", "flag": True}, "not json"])
    assert w == {"cuda_version": ["12.4"], "dtype": ["bf16"], "vllm_version": ["0.8.5", "0.9.2", "0.10.1"]}
    assert span(w["vllm_version"]) == "0.8.5 to 0.10.1"
    assert inside("0.9.0", w["vllm_version"]) and not inside("0.11.0", w["vllm_version"])
    assert not inside("0.8.4", w["vllm_version"]) and inside("0.10.1", w["vllm_version"])
    assert not inside("fp8", w["dtype"]) and inside("bf16", w["dtype"])
    assert stack_of({"model": "llama", "num_prompts": 10, "driver_version": 550}) == {"model": "llama",
                                                                                    "driver_version": "550"}


def test_headline_names_the_largest_group():
    from xfid.tracker.stack import headline

    def item(fp, value):
        return {"fingerprint": fp, "changes": [{"by": "calibration", "of": "archmodel-cal", "key": "vllm_version",
                                                "value": value, "window": "0.8.4 to 0.8.5", "side": "reference"}]}

    items = [item(f"k{i}", "0.11.0") for i in range(12)] + [item("z", "0.10.0")]
    assert headline(items) == ("12 keys measured on vllm_version 0.11.0; archmodel-cal was calibrated on "
                               "vllm_version 0.8.4 to 0.8.5 (and 1 more key on another stack)")
    assert headline([]) is None and headline(None) is None


def test_any_holds_reads_the_categories_in_use_as_the_texts_of_each_row_would():
    import pandas as pd

    from xfid.tracker.stack import _any_holds

    cal = '{"calibration": {"k": 1}}'
    cases = [pd.Categorical(["{}", None], categories=["{}", cal]),  # the category is not in use
             pd.Categorical(["{}", cal, None]), pd.Categorical([None, None], categories=[cal]),
             pd.Categorical([], categories=[cal]), ["{}", None], ["{}", cal], [None, 3.5]]
    for values in cases:
        column = pd.Series(values, dtype="category" if isinstance(values, pd.Categorical) else object)
        plain = bool(column.astype(str).str.contains('"calibration"', regex=False).any())
        assert _any_holds(column, '"calibration"') is plain
    assert [_any_holds(pd.Series(v), '"calibration"') for v in cases[:2]] == [False, True]


@pytest.mark.parametrize("kind", ["categorical", "object"])
def test_unchanged_kinds_are_kept_as_the_texts_of_each_row_would_give_them(kind):
    import pandas as pd

    from xfid.tracker.stack import STACK_CHANGED, _with

    values = ["ok", "over_tolerance", None, "ok"]
    col = pd.Categorical(values, categories=["ok", "over_tolerance", "missing_reference"]) if kind == "categorical" \
        else pd.Series(values, dtype=object)
    rows = pd.DataFrame({"kind": col, "x": [1.0, 2.0, 3.0, 4.0]})
    cells = [None, '{"a": 1}', None, None]
    kept = _with(rows, cells, None)
    plain = _with(rows, cells, rows["kind"].astype(str).tolist())  # each row's text, as the loop reads them
    pd.testing.assert_frame_equal(kept, plain)
    assert kept[STACK_CHANGED].tolist() == cells and rows.columns.tolist() == ["kind", "x"]
    if kind == "categorical":
        assert list(kept["kind"].cat.categories)[-1] == STACK_CHANGED
