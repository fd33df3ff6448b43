"""CLI: every command has help; ingest/export/adapters/sources/summary; bad input -> Error:, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import store_snapshot
from xfid.cli import COMMANDS, cli

HEADER = "fidelity,target,workload,op,metric,stat,value,unit\n"


def all_commands():
    from click.testing import CliRunner

    out = []
    names = cli.list_commands(None)  # type: ignore[arg-type]
    for n in names:
        out.append((n,))
        cmd = cli.get_command(None, n)  # type: ignore[arg-type]
        if hasattr(cmd, "list_commands"):
            out += [(n, s) for s in cmd.list_commands(None)]
    del CliRunner
    return out


@pytest.mark.parametrize("args", all_commands())
def test_every_command_has_help(xfid_cli, args):
    r = xfid_cli(*args, "--help")
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output
    assert len(r.output.splitlines()) > 3


def test_version_and_root_help_lists_commands(xfid_cli):
    assert xfid_cli("--version").output.startswith("xfid, version ")
    r = xfid_cli("--help")
    for name in ("ingest", "export", "adapters", "sources"):
        assert name in r.output


def test_help_is_fast_and_imports_nothing_heavy():
    code = ("import sys, xfid.cli; from click.testing import CliRunner; CliRunner().invoke(xfid.cli.cli, ['--help']);"
            "heavy = [m for m in ('pandas', 'scipy', 'matplotlib', 'weasyprint', 'cocotb', 'pyarrow') if m in sys.modules];"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_registered_command_imports(name):
    """A command module that fails to import is an error here, never a silently missing command."""
    import importlib

    import click

    mod = importlib.import_module(COMMANDS[name])
    assert isinstance(mod.cli, click.Command) and mod.cli.name == name
    assert cli.get_command(None, name) is mod.cli  # type: ignore[arg-type]
    assert mod.cli.get_short_help_str(90)  # the one-line help comes from the command itself


def test_root_help_lists_every_command_with_its_own_first_sentence(xfid_cli):
    from xfid.commands.correlate import cli as correlate

    out = xfid_cli("--help").output
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.startswith("  ") and
              not line.startswith("   ")]
    assert listed == sorted(COMMANDS)
    first = correlate.help.split("\n")[0]
    assert f"correlate  {first}" in out


def test_unknown_command_is_a_usage_error(xfid_cli):
    r = xfid_cli("corelate")
    assert r.exit_code == 2 and "No such command 'corelate'" in r.output


def test_ingest_export_roundtrip(xfid_cli, tmp_path):
    f = tmp_path / "r.csv"
    f.write_text(HEADER + "measured,h100-sxm,NA,,latency,p99,3.2,ms\nrtl,t100-a0,null,gemm,cycles,,1200,\n")
    r = xfid_cli("ingest", f)
    assert r.exit_code == 0, r.output
    assert "ingested" in r.output and "2 rows" in r.output
    assert "metrics: cycles 1, latency 1" in r.output
    r = xfid_cli("ingest", f)
    assert "already ingested" in r.output and "0 new rows" in r.output
    r = xfid_cli("export")
    recs = [json.loads(line) for line in r.output.splitlines()]
    assert {x["workload"] for x in recs} == {"NA", "null"}
    lat = next(x for x in recs if x["metric"] == "latency")
    assert lat["value"] == pytest.approx(0.0032) and lat["unit"] == "s" and lat["stat"] == "p99"
    assert lat["source_path"] == str(f) and lat["source_loc"] == "line 2" and lat["source"] == "xfid-records"
    r = xfid_cli("export", "--format", "csv", "--metric", "cycles")
    assert r.output.count("\n") == 2 and '"cycles"' in r.output
    out = tmp_path / "out.parquet"
    assert xfid_cli("export", "--format", "parquet", "-o", out).exit_code == 0
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 2
    r = xfid_cli("sources")
    assert "xfid-records" in r.output and str(f) in r.output
    assert json.loads(xfid_cli("sources", "--format", "json").output)[0]["rows"] == 2
    assert "2 records" in xfid_cli("summary").output


def test_adapters_lists_name_fidelity_formats(xfid_cli):
    r = xfid_cli("adapters")
    assert "xfid-records" in r.output and "vllm" in r.output and "measured" in r.output
    rows = json.loads(xfid_cli("adapters", "--format", "json").output)
    assert {"name", "fidelity", "formats"} <= set(rows[0])


def test_flags_supply_context_and_meta(xfid_cli, tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("fidelity,workload,op,metric,value\nmeasured,w,,power,300\n")
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and "missing required column 'target' (add the column, or pass --target" in r.output
    r = xfid_cli("ingest", f, "--target", "h100-sxm", "--meta", "power_cap=700", "--run", "r7")
    assert r.exit_code == 0, r.output
    rec = json.loads(xfid_cli("export").output.splitlines()[0])
    assert rec["target"] == "h100-sxm" and rec["run"] == "r7" and json.loads(rec["config"]) == {"power_cap": "700"}


def test_sidecar_supplies_context(xfid_cli, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "r.csv").write_text("fidelity,op,metric,value\nmeasured,,power,300\n")
    (d / "xfid-source.toml").write_text('target = "h200-sxm"\nworkload = "w1"\n[files."r.csv"]\nrun = "nightly"\n')
    r = xfid_cli("ingest", d)
    assert r.exit_code == 0, r.output
    assert "skipped" in r.output and "xfid-source.toml" in r.output
    rec = json.loads(xfid_cli("export").output)
    assert (rec["target"], rec["workload"], rec["run"]) == ("h200-sxm", "w1", "nightly")


BAD = [
    ("trunc.jsonl", '{"fidelity": "measured", "target": "t", "workload": "w", "op": "", "metric": "latency", "value": 1}\n{"fidelity": "meas',
     "line 2: not valid JSON"),
    ("nan.jsonl", '{"fidelity": "measured", "target": "t", "workload": "w", "op": "", "metric": "latency", "value": NaN}\n',
     "line 1: not valid JSON: NaN is not a number"),
    ("inf.jsonl", '{"fidelity": "measured", "target": "t", "workload": "w", "op": "", "metric": "latency", "value": Infinity}\n',
     "Infinity is not a number"),
    ("types.jsonl", '{"fidelity": "measured", "target": "t", "workload": "w", "op": "", "metric": "latency", "value": "3"}\n',
     "line 1: 'value' must be a number, got '3'"),
    ("types2.jsonl", '{"fidelity": "measured", "target": "t", "workload": 7, "op": "", "metric": "latency", "value": 3}\n',
     "line 1: 'workload' must be a string, got 7"),
    ("unit.csv", HEADER + "measured,t,w,,latency,value,3,furlongs\n", "line 2: unknown unit 'furlongs'"),
    ("wrongunit.csv", HEADER + "measured,t,w,,latency,value,3,W\n", "line 2: unit 'W' (power) does not belong to metric 'latency'"),
    ("fields.csv", HEADER + "measured,t,w,,latency,value,3\n", "line 2: expected 8 fields, got 7"),
    ("notnum.csv", HEADER + "measured,t,w,,latency,value,fast,s\n", "line 2: 'value' must be a number, got 'fast'"),
    ("nancsv.csv", HEADER + "measured,t,w,,latency,value,NaN,s\n", "line 2: 'value' is nan, not a finite number"),
    ("fid.csv", HEADER + "measured,t,w,,latency,value,1,s\nsimulated,t,w,,latency,value,1,s\n", "line 3: unknown fidelity 'simulated'"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_an_error_and_store_is_unchanged(xfid_cli, tmp_path, name, content, message):
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "measured,t,w,,latency,value,1,s\n")
    assert xfid_cli("ingest", good).exit_code == 0
    before = store_snapshot(xfid_cli.store)
    f = tmp_path / name
    f.write_text(content)
    r = xfid_cli("ingest", good, f, "--adapter", "xfid-records", "--run", "second")
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: ") and str(f) in r.output and message in r.output, r.output
    assert "Traceback" not in r.output
    assert store_snapshot(xfid_cli.store) == before


def test_utf8_bom_is_accepted(xfid_cli, tmp_path):
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbf" + (HEADER + "measured,t,w,,latency,value,1,s\n").encode())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 0, r.output
    assert "1 rows" in r.output


def test_empty_file_and_unknown_format(xfid_cli, tmp_path):
    e = tmp_path / "empty.csv"
    e.write_text("")
    r = xfid_cli("ingest", e, "--adapter", "xfid-records")
    assert r.exit_code == 2 and "empty.csv: the file is empty" in r.output
    r = xfid_cli("ingest", e)
    assert r.exit_code == 2 and "no adapter recognises this file" in r.output
    r = xfid_cli("ingest", e, "--adapter", "nope")
    assert r.exit_code == 2 and "unknown adapter 'nope'; valid adapters: xfid-records" in r.output
    r = xfid_cli("ingest", tmp_path / "missing.csv")
    assert r.exit_code == 2 and "missing.csv: no such file or directory" in r.output


def test_usage_errors_exit_2(xfid_cli):
    r = xfid_cli("ingest", "x", "--meta", "novalue")
    assert r.exit_code == 2 and "--meta expects KEY=VALUE" in r.output
    r = xfid_cli("export", "--format", "parquet")
    assert r.exit_code == 2 and "needs -o FILE" in r.output


def test_export_from_missing_store_is_a_clear_error(xfid_cli):
    r = xfid_cli("export")
    assert r.exit_code == 2 and "no store at" in r.output


SELECTING = ("correlate", "check", "snapshot", "compare", "calibrate")


@pytest.mark.parametrize("name", SELECTING)
def test_selection_options_have_one_shape_everywhere(name):
    """--run is repeatable and --as-of single in every command that selects records; --target repeatable
    wherever it filters (calibrate's --target is the one target a fit is made on)."""
    import importlib

    params = {p.name: p for p in importlib.import_module(COMMANDS[name]).cli.params}
    assert params["runs"].multiple and params["runs"].opts == ["--run"]
    assert not params["as_of"].multiple and params["as_of"].opts == ["--as-of"]
    if name != "calibrate":
        assert params["targets"].multiple and params["targets"].opts == ["--target"]
    helps = {p.name: p.help for p in params.values() if p.name in ("runs", "as_of")}
    from xfid.commands import options

    assert helps == {p.name: p.help for p in options.runs(options.as_of(lambda: None)).__click_params__}
