"""Hostile and careless inputs that once gave a traceback, read outside the tree, or were stored as
nonsense: each is now a clean `Error:` (exit 2, nothing stored) or a listed skip."""

from __future__ import annotations

import os
import shutil

import pytest

import xfid.ingest
from tests.conftest import FIXTURES
from tests.test_engine_helpers import rec, write_csv

OUTSIDE_MARK = "OUTSIDE-FILE-CONTENT-5b1"


@pytest.fixture
def tree(tmp_path):
    d = tmp_path / "tree"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0)])
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.xml").write_text(f"<testsuites><testsuite name='{OUTSIDE_MARK}'/></testsuites>")
    (out / "xfid-source.toml").write_text('target = "from-outside"\n')
    return d, out


def _ok(r):
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return r.output


def _refused(r, *words):
    assert r.exit_code == 2 and r.output.lstrip().startswith("Error:") and "Traceback" not in r.output, r.output
    for w in words:
        assert w in r.output, r.output
    assert OUTSIDE_MARK not in r.output
    return r.output


def test_a_symlink_loop_and_a_fifo_are_skipped_and_listed(xfid_cli, tree):
    d, _ = tree
    (d / "loop").symlink_to(d)
    (d / "self.csv").symlink_to("self.csv")
    os.mkfifo(d / "pipe.csv")
    out = _ok(xfid_cli("ingest", d))
    assert "a symbolic link to a directory: not followed" in out
    assert "a symbolic link that loops: not followed" in out
    assert "a FIFO (named pipe): not read" in out
    assert "1 new rows" in out or "1 new row" in out


def test_a_sidecar_linked_from_outside_is_not_applied(xfid_cli, tree):
    d, out = tree
    (d / "xfid-source.toml").symlink_to(out / "xfid-source.toml")
    _ok(xfid_cli("ingest", d))
    assert "from-outside" not in xfid_cli("export").output


@pytest.mark.parametrize("value,words", [
    ("5", ("option",)),
    ('"/etc/shadow"', ("outside",)),
    ('"../outside/secret.xml"', ("outside",)),
])
def test_a_path_option_out_of_the_tree_is_refused_without_reading_it(xfid_cli, tmp_path, value, words):
    d = tmp_path / "tree"
    d.mkdir()
    shutil.copy(FIXTURES / "rtl" / "probe_output" / "xfid_rtl.jsonl", d)  # a probe file: `results` names its xml
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.xml").write_text(f"<testsuites><testsuite name='{OUTSIDE_MARK}'/></testsuites>")
    (d / "xfid-source.toml").write_text(f'adapter = "cocotb"\ntarget = "t100-a0"\noptions = {{ results = {value} }}\n')
    r = xfid_cli("ingest", d)
    _refused(r, *words)
    assert "root:" not in r.output  # /etc/shadow's content never shown
    assert "xfid_rtl.jsonl" not in xfid_cli("sources").output


def test_a_results_xml_linked_out_of_the_tree_is_not_used(xfid_cli, tree):
    d, out = tree
    (d / "results.xml").symlink_to(out / "secret.xml")
    r = xfid_cli("ingest", d)
    assert "Traceback" not in r.output and OUTSIDE_MARK not in r.output, r.output
    assert "not followed" in r.output


def test_a_file_that_changes_while_it_is_read_is_refused(xfid_cli, tmp_path, monkeypatch):
    f = tmp_path / "growing.csv"
    write_csv(f, [rec("measured", f"op{i}", 1.0) for i in range(50)])
    real = xfid.ingest._stamp
    calls = {"n": 0}

    def stamp(files):
        calls["n"] += 1
        if calls["n"] == 2:  # after the read: the writer appended meanwhile
            with f.open("a") as fh:
                fh.write("measured,h100-sxm,w1,late,latency,value,1.0,s,r1,2026-11-01T00:00:00Z\n")
        return real(files)

    monkeypatch.setattr(xfid.ingest, "_stamp", stamp)
    _refused(xfid_cli("ingest", "--adapter", "xfid-records", f), "changed while it was read", "nothing of it was stored")
    monkeypatch.undo()
    assert "growing.csv" not in xfid_cli("sources").output
    assert "51 new rows" in _ok(xfid_cli("ingest", "--adapter", "xfid-records", f))


@pytest.mark.parametrize("setting,words", [
    ("bootstrap_resamples = 9223372036854775807", ("bootstrap_resamples",)),
    ("bootstrap_resamples = 50000000", ("bootstrap_resamples",)),
    ("default_rel_tolerance = 1e400", ("default_rel_tolerance", "finite")),
    ("bootstrap_resamples = -1", ("bootstrap_resamples",)),
])
def test_configured_counts_and_tolerances_are_bounded(xfid_cli, tmp_path, setting, words):
    write_csv(tmp_path / "m.csv", [rec("measured", "a", 1.0)])
    assert xfid_cli("ingest", "--adapter", "xfid-records", tmp_path / "m.csv").exit_code == 0
    cfg = tmp_path / "xfid.toml"
    cfg.write_text(f"[settings]\n{setting}\n")
    _refused(xfid_cli("--config", cfg, "correlate"), *words)


def test_rtl_inspect_refuses_a_parameter_wider_than_it_evaluates(xfid_cli, tmp_path):
    v = tmp_path / "wide.v"
    v.write_text("module wide #(parameter W = 1 << 100000) (input wire [W-1:0] a);\nendmodule\n")
    _refused(xfid_cli("rtl", "inspect", v), "wider than")


@pytest.mark.parametrize("args,words", [
    (("--fidelity", "bogus"), ("not a fidelity",)),
    (("--fidelity", "../../x"), ("not a fidelity",)),
    (("--target", ""), ("must not be empty",)),
    (("--meta", "a=nan"), ()),
])
def test_nonsense_context_on_the_command_line(xfid_cli, tmp_path, args, words):
    write_csv(tmp_path / "m.csv", [rec("measured", "a", 1.0)])
    r = xfid_cli("ingest", "--adapter", "xfid-records", tmp_path / "m.csv", *args)
    if words:
        _refused(r, *words)
        assert "m.csv" not in xfid_cli("sources").output
    else:  # a meta value is text from the command line: "nan" is kept as the string it is
        _ok(r)
        assert "NaN" not in xfid_cli("export").output


@pytest.mark.parametrize("sidecar,words", [
    ('fidelity = "bogus"', ("not a fidelity",)),
    ('target = ""', ("must not be empty",)),
    ('workload = ""', ("must not be empty",)),
    ('run = "   "', ("must not be empty",)),
    ("meta = { a = nan }", ("finite",)),
    ("meta = { precision = { a = 1 } }", ("string, number or boolean",)),
    ("options = { results = 5 }", ()),
])
def test_nonsense_in_a_sidecar(xfid_cli, tree, sidecar, words):
    d, _ = tree
    (d / "xfid-source.toml").write_text(sidecar + "\n")
    r = xfid_cli("ingest", d)
    assert "Traceback" not in r.output, r.output
    if words:
        _refused(r, *words)
    assert "m.csv" not in xfid_cli("sources").output or r.exit_code == 0
