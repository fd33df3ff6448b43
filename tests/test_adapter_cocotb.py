"""The cocotb adapter on real probe output and results.xml: values, flags, errors, ingest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from xfid.adapters import detect
from xfid.adapters.base import ReadContext
from xfid.adapters.cocotb import CocotbAdapter, read_results
from xfid.errors import InputError
from xfid.schema import FLAG_NO_REFERENCE, normalize

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "rtl" / "probe_output"
PUBLIC = OUT.parent / "cocotb-public"


def read(path: Path, **kw) -> list[dict]:
    ctx = ReadContext(path=path, **kw)
    t = normalize(CocotbAdapter().read(ctx), source_path=str(path), defaults={"fidelity": "rtl"})
    return t.to_pylist()


def test_sniff_both_files():
    assert detect(OUT / "xfid_rtl.jsonl") is CocotbAdapter
    assert detect(OUT / "results.xml") is CocotbAdapter


def test_probe_records_pinned():
    rows = read(OUT / "xfid_rtl.jsonl")
    cycles = [r for r in rows if r["metric"] == "cycles"]
    assert [(r["op"], r["value"]) for r in cycles] == [
        ("dma[bytes=5]", 22.0), ("dma[bytes=64]", 25.0), ("dma[bytes=200]", 34.0),
        ("dma[bytes=1024]", 112.0), ("dma[bytes=4096]", 412.0), ("dma[bytes=512]", 62.0)]
    assert [r["value"] for r in rows if r["metric"] == "bytes"] == [5, 64, 200, 1024, 4096, 512]
    assert [r["value"] for r in rows if r["metric"] == "stall_cycles"] == [21, 21, 21, 48, 156, 30]
    sim = [r["value"] for r in rows if r["metric"] == "sim_time"]
    assert sim[0] == 2.3e-7  # 230000 ps, divided exactly (not 230000 * 1e-12)
    r0 = cycles[0]
    assert (r0["target"], r0["workload"], r0["stat"], r0["unit"], r0["source_loc"]) == (
        "t100-a0", "block/dma", "value", "cycles", "line 1")
    cfg = json.loads(r0["config"])
    assert cfg["params"] == {"BURST_LEN": 4, "BYTES_PER_CYCLE": 16, "LATENCY": 20, "MAX_OUTSTANDING": 4,
                             "SRAM_BYTES": 4096}
    assert cfg["block"] == "dma" and cfg["seed"] == 1234 and cfg["simulator"] == "Verilator"
    assert cfg["sources"] == {"hdl/dma.v": "6127635e273185cede4c000d9c10c3d9e83b200b4d15c487a07cd4ee1c54d88e"}
    assert r0["software"] == "cocotb 2.1.0 + Verilator 5.49"
    assert {r["unit"] for r in rows if r["metric"] == "bytes"} == {"B"}


def test_failed_test_is_kept_and_flagged():
    rows = read(OUT / "xfid_rtl.jsonl")
    flagged = {r["op"] for r in rows if r["flags"] and "failed_test" in r["flags"]}
    assert flagged == {"dma[bytes=512]"}  # test_dma_wrong_golden failed after its probed op
    assert "failed_test" in FLAG_NO_REFERENCE
    assert all(r["flags"] is None for r in rows if r["op"] != "dma[bytes=512]")


def test_without_results_xml_warns_and_trusts_probe(tmp_path):
    shutil.copy(OUT / "xfid_rtl.jsonl", tmp_path)
    ctx = ReadContext(path=tmp_path / "xfid_rtl.jsonl")
    t = CocotbAdapter().read(ctx)
    assert t.column("flags").null_count == t.num_rows
    assert any("no results.xml" in w for w in ctx.warnings)


def test_results_option_and_target_override(tmp_path):
    shutil.copy(OUT / "xfid_rtl.jsonl", tmp_path / "p.jsonl")
    (tmp_path / "sim").mkdir()
    shutil.copy(OUT / "results.xml", tmp_path / "sim" / "results.xml")
    rows = read(tmp_path / "p.jsonl", target="t100-b0", options={"results": "sim/results.xml"})
    assert {r["target"] for r in rows} == {"t100-b0"}
    assert sum(1 for r in rows if r["flags"] == "failed_test") == 4  # cycles, sim_time, bytes, stalls
    with pytest.raises(InputError, match="does not exist"):
        read(tmp_path / "p.jsonl", options={"results": "missing.xml"})


def test_results_xml_alone():
    cases = read_results(OUT / "results.xml")
    assert [(c.name, c.status, c.seed) for c in cases] == [
        ("test_dma_transfers", "passed", "1234"), ("test_dma_wrong_golden", "failed", "1234")]
    assert cases[0].sim_time_s == pytest.approx(9.5e-6)
    rows = read(OUT / "results.xml")
    assert [(r["workload"], r["op"], r["metric"], r["flags"]) for r in rows] == [
        ("block/dma", "test[test_dma_transfers]", "sim_time", None),
        ("block/dma", "test[test_dma_wrong_golden]", "sim_time", "failed_test")]
    assert rows[1]["value"] == pytest.approx(960e-9)


def test_results_xml_cocotb20_attributes(tmp_path):
    p = tmp_path / "results.xml"
    p.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="results"><testsuite name="all" '
                 'package="all"><property name="random_seed" value="5" /><testcase name="t1" classname="test_omvm" '
                 'file="x.py" lineno="3" time="0.1" sim_time_ns="1500.0" ratio_time="1.0"/></testsuite></testsuites>')
    (c,) = read_results(p)
    assert (c.name, c.status, c.sim_time_s, c.seed) == ("t1", "passed", 1.5e-6, "5")  # the suite's seed
    (row,) = read(p, target="asic-x")
    assert (row["target"], row["workload"]) == ("asic-x", "block/omvm")
    assert json.loads(row["config"])["seed"] == "5"


def test_entity_bomb_refused(tmp_path):
    p = tmp_path / "results.xml"
    p.write_text('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>\n'
                 '<testsuites><testsuite name="cocotb"><testcase name="&lol2;" classname="x"/></testsuite></testsuites>')
    with pytest.raises(InputError, match="refused unsafe XML"):
        read_results(p)


def test_bad_lines_name_the_line(tmp_path):
    lines = (OUT / "xfid_rtl.jsonl").read_text().splitlines()
    p = tmp_path / "xfid_rtl.jsonl"
    p.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(InputError, match=r"line 2: not valid JSON"):
        CocotbAdapter().read(ReadContext(path=p))
    rec = json.loads(lines[0])
    rec["cycles"] = "many"
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match=r"line 1: \$\.cycles: 'cycles' must be a number, got 'many'"):
        CocotbAdapter().read(ReadContext(path=p))
    rec["format"] = "other/2"
    p.write_text(json.dumps(rec) + "\n")
    with pytest.raises(InputError, match="not an rtl_hooks probe record"):
        CocotbAdapter().read(ReadContext(path=p))


def test_null_cycles_have_a_reason(tmp_path):
    rec = json.loads((OUT / "xfid_rtl.jsonl").read_text().splitlines()[0])
    rec.update(cycles=None, cycles_from="none (no cycle counter and no clock period)")
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(rec, sort_keys=True) + "\n")
    (row,) = [r for r in read(p) if r["metric"] == "cycles"]
    assert row["value"] is None and "no cycle count recorded" in row["null_reason"]


def test_ingest_cli_both_files(xfid_cli, tmp_path):
    for f in ("xfid_rtl.jsonl", "results.xml"):
        shutil.copy(OUT / f, tmp_path / f)
    r = xfid_cli("ingest", "--adapter", "cocotb", str(tmp_path / "xfid_rtl.jsonl"), str(tmp_path / "results.xml"))
    assert r.exit_code == 0, r.output
    assert "32 new rows from 2 file(s)" in r.output  # 26 + one energy row per probed op (t100-a0 prices dma)
    from xfid.store import Store

    t = Store(xfid_cli.store, create=False).read()
    failed = pc.sum(pc.match_substring(pc.fill_null(t.column("flags").cast("string"), ""), "failed_test")).as_py()
    assert failed == 6  # the failed dma op's cycles, bytes, stall_cycles, energy, sim_time + its testcase
    assert set(t.column("fidelity").to_pylist()) == {"rtl"}


def test_public_results_pinned():
    """Two results.xml from public projects (cocotb 1.x: the seed on the suite, sim_time_ns)."""
    assert detect(PUBLIC / "rgb_mixer" / "results.xml") is CocotbAdapter
    assert detect(PUBLIC / "cnn_matrix_mul" / "results.xml") is CocotbAdapter
    (rgb,) = read_results(PUBLIC / "rgb_mixer" / "results.xml")
    assert (rgb.name, rgb.classname, rgb.status, rgb.seed, rgb.line, rgb.wall_s) == (
        "test_all", "test.test_rgb_mixer", "failed", "1649813702", 32, 31.253236293792725)
    assert rgb.sim_time_s == 2.65423  # sim_time_ns="2654230000.0"
    (row,) = read(PUBLIC / "rgb_mixer" / "results.xml", target="ice40-up5k")
    assert (row["target"], row["workload"], row["op"], row["metric"], row["unit"], row["flags"]) == (
        "ice40-up5k", "block/rgb_mixer", "test[test_all]", "sim_time", "s", "failed_test")
    assert json.loads(row["config"])["seed"] == "1649813702"
    (cnn,) = read(PUBLIC / "cnn_matrix_mul" / "results.xml", target="asic-x")
    assert (cnn["workload"], cnn["op"], cnn["flags"]) == ("block/matrix_mul", "test[matrix_mul_test]", None)
    # sim_time_ns="291020840.001": the decimal divided exactly (291020840.001 * 1e-9 would do too here,
    # 2654230000.0 * 1e-9 gives 2.6542300000000003)
    assert cnn["value"] == 0.291020840001
    assert json.loads(cnn["config"])["seed"] == "1746849404"
    assert read_results(PUBLIC / "cnn_matrix_mul" / "results.xml")[0].line == 6


def test_foreign_results_xml_needs_a_target(xfid_cli, tmp_path):
    f = tmp_path / "results.xml"
    shutil.copy(PUBLIC / "rgb_mixer" / "results.xml", f)
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2
    assert r.output.startswith(f"Error: {f}: no target: a cocotb results.xml does not say which hardware target")
    assert "--target" in r.output and "default_target" in r.output
    assert not xfid_cli.store.exists() or xfid_cli("export").output == ""
    conf = tmp_path / "xfid.toml"
    conf.write_text('[rtl]\ndefault_target = "ice40-up5k"\n')
    from click.testing import CliRunner  # --config goes before the command

    from xfid.cli import cli

    r = CliRunner().invoke(cli, ["--store", str(xfid_cli.store), "--config", str(conf), "ingest", str(f)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert [(x["target"], x["workload"]) for x in rows] == [("ice40-up5k", "block/rgb_mixer")]


def test_foreign_results_xml_target_from_flag_or_sidecar(xfid_cli, tmp_path):
    f = tmp_path / "a" / "results.xml"
    f.parent.mkdir()
    shutil.copy(PUBLIC / "cnn_matrix_mul" / "results.xml", f)
    rows, _ = xfid_cli.ingest_export(f, "--target", "fpga-a")
    assert {x["target"] for x in rows} == {"fpga-a"}
    g = tmp_path / "b" / "results.xml"
    g.parent.mkdir()
    shutil.copy(PUBLIC / "rgb_mixer" / "results.xml", g)
    (g.parent / "xfid-source.toml").write_text('target = "fpga-b"\n')
    r = xfid_cli("ingest", g)
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in xfid_cli("export").output.splitlines()]
    assert sorted(x["target"] for x in rows) == ["fpga-a", "fpga-b"]


def test_default_target_must_be_a_name(tmp_path, monkeypatch):
    conf = tmp_path / "xfid.toml"
    conf.write_text("[rtl]\ndefault_target = 3\n")
    monkeypatch.setenv("XFID_CONFIG", str(conf))
    from xfid.errors import ConfigError

    with pytest.raises(ConfigError, match="default_target"):
        read(PUBLIC / "rgb_mixer" / "results.xml")


def test_runner_results_xml_keeps_the_probe_target(tmp_path):
    """xfid's runner wrote it (its probe file beside it, or `xfid rtl run --out elsewhere --ingest`
    naming it as the probe's results): the probe's target, as before."""
    rows = read(OUT / "results.xml")
    assert {r["target"] for r in rows} == {"t100-a0"}
    p = tmp_path / "build" / "results.xml"
    p.parent.mkdir()
    shutil.copy(OUT / "results.xml", p)
    assert {r["target"] for r in read(p, options={"results": str(p)})} == {"t100-a0"}
    with pytest.raises(InputError, match="no target"):
        read(p)


def test_huge_attribute_refused_before_parsing(tmp_path):
    import time

    from xfid.adapters import cocotb

    p = tmp_path / "results.xml"
    p.write_bytes(b'<testsuites name="results"><testsuite name="all">\n<testcase name="t" classname="x" '
                  b'sim_time_ns="1" file="' + b"a" * (cocotb.MAX_XML_TOKEN + 10) + b'"/></testsuite></testsuites>')
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"results.xml, line 2: 1,048,6\d\d bytes without markup"):
        read_results(p)
    assert time.perf_counter() - t0 < 1.0


def test_oversized_file_refused(tmp_path, monkeypatch):
    from xfid.adapters import cocotb

    p = tmp_path / "results.xml"
    shutil.copy(PUBLIC / "rgb_mixer" / "results.xml", p)
    monkeypatch.setattr(cocotb, "MAX_XML_BYTES", 100)
    with pytest.raises(InputError, match=r"416 bytes is more than a results.xml holds"):
        read_results(p)


def test_sim_time_in_an_unknown_unit_is_null_with_a_reason(tmp_path):
    p = tmp_path / "results.xml"
    p.write_text('<testsuites name="cocotb tests"><testsuite name="s"><testcase classname="test_a" name="t" time="1">'
                 '<properties><property name="sim_time_unit" value="step" />'
                 '<property name="sim_time_duration" value="100" /></properties></testcase></testsuite></testsuites>')
    (row,) = read(p, target="x")
    assert row["value"] is None and row["null_reason"] == "sim time in unit 'step', not a unit of time"
