"""Calibration: factors, cross-validation (workload-out, op-out fallback), write-back, CLI."""

from __future__ import annotations

import json

import pytest

from tests.test_engine_helpers import config, make_store, rec
from xfid.engine import calibrate
from xfid.engine.calibration import op_class, op_size, size_bucket, write_back
from xfid.errors import EngineError


def test_op_class_and_size():
    assert op_class("gemm[m=128,n=64,k=32]") == "gemm"
    assert op_class("layer12.attn.qkv_proj") == "attn.qkv_proj"
    assert op_class("") == "(end-to-end)"
    assert op_size("gemm[m=2,n=3,k=4]", {}) == 48.0
    assert op_size("attn.sdpa", {"flops": 5e9}) == 5e9 and op_size("x", {}) is None
    assert size_bucket(5e9) == "1e9-1e10 FLOP" and size_bucket(None) == "unknown"


def _sweep(workloads=("w1", "w2", "w3")):
    roof, meas = [], []
    for wi, w in enumerate(workloads):
        for oi, (op, lim, eff) in enumerate([("gemm[m=64,n=64,k=64]", "compute", 0.8), ("gemm[m=8,n=64,k=64]", "memory", 0.5),
                                             ("attn.sdpa", "memory", 0.5)]):
            v = 1e-5 * (wi + 1) * (oi + 1)
            roof.append(rec("roofline", op, v, workload=w, config={"limiter": lim}))
            meas.append(rec("measured", op, v / eff, workload=w))
    return {"r.csv": roof, "m.csv": meas}


def test_factors_and_leave_one_workload_out(tmp_path):
    store = make_store(tmp_path, _sweep())
    res = calibrate(store, config(), "roofline", "measured", "h100-sxm")
    f = res.factors.set_index(["op_class", "limiter"])
    assert f.loc[("gemm", "compute"), "factor"] == pytest.approx(1.25)
    assert f.loc[("gemm", "memory"), "factor"] == pytest.approx(2.0)
    assert f.loc[("attn.sdpa", "memory"), "n"] == 3
    s = res.summary
    assert s["cv_method"] == "leave-one-workload-out" and s["n_workloads"] == 3 and s["n"] == 9
    assert s["mape_before"] == pytest.approx((0.2 * 3 + 0.5 * 6) / 9)
    assert s["mape_after"] == pytest.approx(0.0, abs=1e-9)
    cv = res.cv.set_index(["group_by", "group"])
    assert cv.loc[("limiter", "memory"), "n"] == 6 and cv.loc[("limiter", "memory"), "mape_before"] == pytest.approx(0.5)
    assert set(res.cv["group_by"]) == {"op_class", "limiter", "size"}
    p = res.predictions.to_pandas()
    assert set(p["fidelity"]) == {"roofline-cal"} and len(p) == 9
    assert json.loads(p["config"][0])["calibration"]["fit_id"] == s["fit_id"]


def test_single_workload_falls_back_to_leave_one_op_out(tmp_path):
    store = make_store(tmp_path, _sweep(("gemm-sweep",)))
    res = calibrate(store, config(), "roofline", "measured", "h100-sxm")
    assert res.summary["cv_method"].startswith("leave-one-op-out")
    # attn.sdpa held out: no op-class factor left -> the memory-limiter factor (2.0) transfers
    rows = res.rows.set_index("op")
    assert rows.loc["attn.sdpa", "ape_after"] == pytest.approx(0.0, abs=1e-9)


def test_transfer_failure_is_visible(tmp_path):
    files = _sweep(("w1", "w2"))
    files["m.csv"] = [dict(r, value=repr(float(r["value"]) * (3.0 if r["workload"] == "w2" else 1.0)))
                      for r in files["m.csv"]]
    res = calibrate(make_store(tmp_path, files), config(), "roofline", "measured", "h100-sxm")
    assert res.summary["mape_after"] > 0.5  # factors fitted on w1 do not transfer to w2


def test_write_back_is_idempotent_and_correlates(tmp_path):
    store = make_store(tmp_path, _sweep())
    res = calibrate(store, config(), "roofline", "measured", "h100-sxm")
    first = write_back(store, res)
    assert first.files[0].rows == 9 and not first.files[0].already
    again = write_back(store, calibrate(store, config(), "roofline", "measured", "h100-sxm"))
    assert again.files[0].already
    from xfid.engine import correlate

    c = correlate(store, config(), pairs=["roofline-cal->measured"])
    assert c.comparisons.iloc[0]["mape"] == pytest.approx(0.0, abs=1e-9)


def test_nothing_to_fit_is_an_error(tmp_path):
    store = make_store(tmp_path, {"r.csv": [rec("roofline", "x", 1.0)]})
    with pytest.raises(EngineError, match="nothing to calibrate"):
        calibrate(store, config(), "roofline", "measured", "h100-sxm")


def test_cli_calibrate(xfid_cli, fixtures):
    assert xfid_cli("ingest", fixtures / "records").exit_code == 0
    r = xfid_cli("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm")
    assert r.exit_code == 0, r.output
    assert "leave-one-workload-out" in r.output and "MAPE before 18.3%" in r.output
    j = xfid_cli("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm",
                 "--format", "json", "--write-back")
    assert j.exit_code == 0, j.output
    doc = json.loads(j.output[: j.output.rindex("}") + 1])
    assert doc["summary"]["n"] == 11 and doc["summary"]["mape_before"] == pytest.approx(0.1826176586, rel=1e-8)
    bad = xfid_cli("calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "nope")
    assert bad.exit_code == 2 and "Error: unknown target 'nope'" in bad.output
    bad = xfid_cli("calibrate", "--candidate", "roofline", "--reference", "roofline", "--target", "h100-sxm")
    assert bad.exit_code == 2 and "must differ" in bad.output
