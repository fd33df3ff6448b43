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


def test_history_says_which_side_moved(xfid_cli, tmp_path):
    """The measured reference is re-run on a new stack (vLLM 0.8.5 -> 0.11.0) and the error jumps:
    the history says the reference moved, with the runs and the config keys that changed — it
    never reads as a model regression. Then the model changes and the candidate is named."""
    def ingest(name, fid, value, run, meta):
        f = tmp_path / name
        f.write_text(HEADER + f"{fid},h100-sxm,w,gemm,latency,value,{value},us,{run},2026-11-01T00:00:00Z\n")
        args = [a for k, v in meta.items() for a in ("--meta", f"{k}={v}")]
        assert xfid_cli("ingest", f, *args).exit_code == 0

    ingest("m1.csv", "measured", 100, "r7", {"vllm_version": "0.8.5"})
    ingest("a1.csv", "archmodel", 102, "model-v1", {"model_rev": "a"})
    assert xfid_cli("check").exit_code in (0, 1)
    ingest("m2.csv", "measured", 80, "r8", {"vllm_version": "0.11.0"})  # the GPU got faster: new stack
    assert xfid_cli("check").exit_code in (0, 1)
    ingest("a2.csv", "archmodel", 70, "model-v2", {"model_rev": "b"})
    assert xfid_cli("check").exit_code in (0, 1)
    issues = json.loads(xfid_cli("issues", "list", "--format", "json").output)
    fp = issues[0]["fingerprint"]
    doc = json.loads(xfid_cli("history", fp, "--format", "json").output)
    m1, m2 = doc["moves"]
    assert (m1["check_id"], m1["side"]) == (2, "reference")
    ref = m1["sides"]["reference"]
    assert ref["run"] == ["r7", "r8"] and ref["config"]["vllm_version"] == ["0.8.5", "0.11.0"]
    assert (m2["check_id"], m2["side"]) == (3, "candidate") and m2["sides"]["candidate"]["run"] == ["model-v1", "model-v2"]
    text = xfid_cli("history", fp).output
    assert "moved: reference — measured run r7 -> r8, vllm_version 0.8.5 -> 0.11.0" in text
    assert "moved: candidate — archmodel run model-v1 -> model-v2, model_rev a -> b" in text
    shown = xfid_cli("issues", "show", issues[0]["id"]).output  # the issue says it too
    assert "check 2: error" in shown and "moved: reference — measured run r7 -> r8" in shown


def test_a_step_within_both_checks_noise_is_not_a_move():
    from xfid.drift.history import moves

    a = {"check_id": 1, "rel_error": 0.10, "rel_error_low": 0.02, "rel_error_high": 0.20,
         "candidate_value": 1.1, "reference_value": 1.0}
    b = {"check_id": 2, "rel_error": 0.17, "rel_error_low": 0.08, "rel_error_high": 0.26,
         "candidate_value": 1.17, "reference_value": 1.0}
    assert moves([a, b]) == []
    b.update(rel_error_low=0.21, rel_error_high=0.24)  # intervals apart: a real move of the candidate
    (m,) = moves([a, b])
    assert m["side"] == "candidate" and list(m["sides"]) == ["candidate"]
