"""`xfid history KEY`: a key's error across checks, with change points, from real checks."""

from __future__ import annotations

import json

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


def test_history_over_checks_finds_the_jump(xfid_cli, tmp_path):
    # the archmodel's error for one key: ~2% for 6 checks, then ~30% for 6 checks
    errors = [0.02, 0.021, 0.019, 0.02, 0.022, 0.018, 0.30, 0.31, 0.29, 0.30, 0.305, 0.295]
    ref = tmp_path / "ref.csv"
    ref.write_text(HEADER + "measured,h100-sxm,w,gemm,latency,value,100,us,m1,2026-11-01T00:00:00Z\n")
    assert xfid_cli("ingest", ref).exit_code == 0
    for i, e in enumerate(errors):
        f = tmp_path / f"model{i}.csv"
        f.write_text(HEADER + f"archmodel,h100-sxm,w,gemm,latency,value,{100 * (1 + e)},us,a{i},2026-11-{i + 2:02d}T00:00:00Z\n")
        assert xfid_cli("ingest", f).exit_code == 0
        assert xfid_cli("check").exit_code == 0
    issues = json.loads(xfid_cli("issues", "list", "--format", "json").output)
    assert [i["id"] for i in issues] == ["XF-1"]
    r = xfid_cli("history", "XF-1")
    assert r.exit_code == 0, r.output
    assert "<- change point" in r.output and "+2.0% -> +30.0%" in r.output
    doc = json.loads(xfid_cli("history", issues[0]["fingerprint"], "--format", "json").output)
    assert [round(p["rel_error"], 3) for p in doc["series"]] == [round(e, 3) for e in errors]
    assert [c["index"] for c in doc["change_points"]] == [6]


def test_history_of_unknown_keys(xfid_cli, tmp_path):
    f = tmp_path / "r.csv"
    f.write_text(HEADER + "measured,h100-sxm,w,gemm,latency,value,100,us,m1,2026-11-01T00:00:00Z\n")
    xfid_cli("ingest", f)
    r = xfid_cli("history", "XF-99")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "XF-99" in r.output
    r = xfid_cli("history", "nonsense")
    assert r.exit_code == 2 and "neither an issue id" in r.output
    assert "no checks recorded it yet" in xfid_cli("history", "0123456789abcdef").output


def test_pair_history_finds_the_jump_in_a_pairs_mape(xfid_cli, tmp_path):
    errors = [0.02, 0.021, 0.019, 0.02, 0.022, 0.018, 0.30, 0.31, 0.29, 0.30, 0.305, 0.295]
    ref = tmp_path / "ref.csv"
    ref.write_text(HEADER + "measured,h100-sxm,w,gemm,latency,value,100,us,m1,2026-11-01T00:00:00Z\n")
    assert xfid_cli("ingest", ref).exit_code == 0
    for i, e in enumerate(errors):
        f = tmp_path / f"model{i}.csv"
        f.write_text(HEADER + f"archmodel,h100-sxm,w,gemm,latency,value,{100 * (1 + e)},us,a{i},2026-11-{i + 2:02d}T00:00:00Z\n")
        assert xfid_cli("ingest", f).exit_code == 0
        assert xfid_cli("check").exit_code == 0
    doc = json.loads(xfid_cli("history", "--pairs", "--format", "json").output)
    (pair,) = [p for p in doc if (p["candidate"], p["reference"]) == ("archmodel", "measured")]
    assert [round(p["mape"], 3) for p in pair["series"]] == [round(e, 3) for e in errors]
    assert [c["index"] for c in pair["change_points"]] == [6]
    text = xfid_cli("history", "--pairs").output
    assert "archmodel->measured latency value: MAPE 29.5% at check #12" in text and "2.0% -> 30.0%" in text
    assert xfid_cli("history", "XF-1", "--pairs").exit_code == 2


def test_change_points_skip_gaps_and_map_indices_back():
    from xfid.drift.history import series_change_points

    vals = [0.02, None, 0.021, 0.019, 0.02, float("nan"), 0.022, 0.018, 0.30, 0.31, None, 0.29, 0.30, 0.305, 0.295]
    (cp,) = series_change_points(vals)
    assert cp.index == 8 and vals[cp.index] == 0.30
