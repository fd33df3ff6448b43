"""Silence is a signal: a key or source that reported in the last `[tracker] stale_after` checks
and stops is listed as stale (check summary text and JSON; `stale_now` for the report), never
filed; on both catalogs."""

from __future__ import annotations

import json

HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


def ingest(cli, tmp_path, name, rows):
    """rows: (fidelity, target, workload, op, value, run, day)."""
    f = tmp_path / name
    f.write_text(HEADER + "".join(f"{fid},{t},{w},{op},latency,value,{v},us,{run},2026-11-{d:02d}T00:00:00Z\n"
                                  for fid, t, w, op, v, run, d in rows))
    r = cli("ingest", f)
    assert r.exit_code == 0, r.output


def check(cli, *args):
    r = cli("check", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_key_that_stops_reporting_is_stale_not_filed(catalog, xfid_cli, tmp_path):
    ingest(xfid_cli, tmp_path, "a.csv", [("archmodel", "h100-sxm", "w", op, 100, "a1", 1) for op in ("gemm", "attn")])
    ingest(xfid_cli, tmp_path, "m1.csv", [("measured", "h100-sxm", "w", op, 101, "r1", 2) for op in ("gemm", "attn")])
    assert check(xfid_cli)["stale"]["keys"] == []
    assert check(xfid_cli)["stale"]["keys"] == []
    # the next measured run has only gemm: attn's measurement stopped
    ingest(xfid_cli, tmp_path, "m2.csv", [("measured", "h100-sxm", "w", "gemm", 101, "r2", 3)])
    doc = check(xfid_cli)
    (key,) = doc["stale"]["keys"]
    assert (key["op"], key["candidate"], key["reference"], key["last_check"], key["silent_checks"]) == (
        "attn", "archmodel", "measured", 2, 1)
    assert key["why"] == "reference measured still run r1, newest r2"  # its old number is still compared
    assert doc["stale"]["sources"] == []  # measured still reports on h100-sxm
    assert doc["new"] == [] and json.loads(xfid_cli("issues", "list", "--format", "json").stdout) == []
    text = xfid_cli("check").output  # check 4
    assert "stale (reported in 2 check(s) in a row, silent since; not filed): 1 key(s), 0 source(s)" in text
    assert ("key h100-sxm/w/attn latency/value archmodel->measured: reference measured still run r1, newest r2, "
            "last reported in check 2") in text
    # still silent: listed with the check it last reported in, until stale_window checks have passed
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\nstale_window = 3\n")
    assert json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)["stale"]["keys"][0][
        "silent_checks"] == 3
    assert json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)["stale"]["keys"] == []
    # it reports again: no longer stale
    ingest(xfid_cli, tmp_path, "m3.csv", [("measured", "h100-sxm", "w", op, 101, "r3", 4) for op in ("gemm", "attn")])
    assert check(xfid_cli)["stale"]["keys"] == []


def test_a_key_seen_once_is_not_stale_until_stale_after_checks(catalog, xfid_cli, tmp_path):
    ingest(xfid_cli, tmp_path, "a.csv", [("archmodel", "h100-sxm", "w", op, 100, "a1", 1) for op in ("gemm", "attn")])
    ingest(xfid_cli, tmp_path, "m1.csv", [("measured", "h100-sxm", "w", op, 101, "r1", 2) for op in ("gemm", "attn")])
    check(xfid_cli)
    ingest(xfid_cli, tmp_path, "m2.csv", [("measured", "h100-sxm", "w", "gemm", 101, "r2", 3)])
    assert check(xfid_cli)["stale"]["keys"] == []  # attn reported in one check only (stale_after = 2)
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[tracker]\nstale_after = 1\n")
    doc = json.loads(xfid_cli("--config", cfg, "check", "--format", "json").stdout)
    assert [k["op"] for k in doc["stale"]["keys"]] == ["attn"] and doc["stale"]["stale_after"] == 1


def test_a_fidelity_that_stops_producing_numbers_is_a_stale_source(catalog, xfid_cli, tmp_path):
    from xfid.api import XfidStore
    from xfid.tracker.stale import stale_now

    ingest(xfid_cli, tmp_path, "a.csv", [("archmodel", t, "w", "gemm", 100, "a1", 1) for t in ("h100-sxm", "a100-sxm")])
    ingest(xfid_cli, tmp_path, "m1.csv", [("measured", t, "w", "gemm", 101, "r1", 2) for t in ("h100-sxm", "a100-sxm")])
    check(xfid_cli)
    check(xfid_cli)
    # the a100 measurements are removed (their machine stopped): only h100 numbers remain
    src = json.loads(xfid_cli("sources", "--format", "json").stdout)
    m1 = next(s for s in src if s["path"].endswith("m1.csv"))
    assert xfid_cli("sources", "remove", m1["source_id"]).exit_code == 0
    ingest(xfid_cli, tmp_path, "m2.csv", [("measured", "h100-sxm", "w", "gemm", 101, "r2", 3)])
    doc = check(xfid_cli)
    # with the a100 measurements gone, the a100 model rows go too: both listed, the line says why
    assert [(s["fidelity"], s["target"], s["last_check"]) for s in doc["stale"]["sources"]] == [
        ("archmodel", "a100-sxm", 2), ("measured", "a100-sxm", 2)]
    assert doc["stale"]["sources"][1]["why"] == ("no values; nor has archmodel on a100-sxm, the other side of all its "
                                                 "rows (the rows cannot tell which side stopped)")
    assert [(k["target"], k["op"], k["why"]) for k in doc["stale"]["keys"]] == [("a100-sxm", "gemm", "no row")]
    assert "source measured on a100-sxm: no values; nor has archmodel on a100-sxm" in xfid_cli("check").output
    with XfidStore(xfid_cli.store) as x:  # for the report: the latest check, or a given one
        assert [s["target"] for s in stale_now(x.backend(), x.config)["sources"]] == ["a100-sxm", "a100-sxm"]
        assert stale_now(x.backend(), x.config, check_id=2)["sources"] == []


def test_a_check_of_one_target_does_not_make_the_others_stale(catalog, xfid_cli, tmp_path):
    ingest(xfid_cli, tmp_path, "a.csv", [("archmodel", t, "w", "gemm", 100, "a1", 1) for t in ("h100-sxm", "a100-sxm")])
    ingest(xfid_cli, tmp_path, "m1.csv", [("measured", t, "w", "gemm", 101, "r1", 2) for t in ("h100-sxm", "a100-sxm")])
    check(xfid_cli)
    check(xfid_cli)
    doc = check(xfid_cli, "--target", "h100-sxm")
    assert doc["stale"]["keys"] == [] and doc["stale"]["sources"] == []
    assert check(xfid_cli)["stale"]["keys"] == []  # the whole store again: compared with whole-store checks


def test_a_nightly_source_that_brings_no_new_run_is_stale(catalog, xfid_cli, tmp_path):
    ingest(xfid_cli, tmp_path, "a.csv", [("archmodel", t, "w", "gemm", 100, "a1", 1) for t in ("h100-sxm", "a100-sxm")])
    for night in (1, 2, 3):
        ingest(xfid_cli, tmp_path, f"m{night}.csv", [("measured", t, "w", "gemm", 101, f"r{night}", night + 1)
                                                     for t in ("h100-sxm", "a100-sxm")])
        doc = check(xfid_cli)
        assert doc["stale"]["sources"] == [] and doc["stale"]["keys"] == []
    assert check(xfid_cli)["stale"]["sources"] == []  # a re-run on the same data: nothing stopped
    ingest(xfid_cli, tmp_path, "m4.csv", [("measured", "h100-sxm", "w", "gemm", 101, "r4", 5)])  # a100 night lost
    doc = check(xfid_cli)
    assert [(s["fidelity"], s["target"], s["why"], s["last_check"]) for s in doc["stale"]["sources"]] == [
        ("measured", "a100-sxm", "no new run", 3)]
    assert doc["stale"]["keys"] == []  # its keys still read its newest run (r3)
