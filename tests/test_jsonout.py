"""The streamed JSON document is byte for byte json.dumps(to_dict(corr), indent=2); CSV in pieces."""

from __future__ import annotations

import json
import sys

import pytest

from tests.test_engine_helpers import config, make_store, rec
from xfid.engine import correlate
from xfid.engine.output import to_dict, to_json

AM, ME, RF = "archmodel", "measured", "roofline"


def _corr(tmp_path):
    odd = ['w"quoted"', "wé/ünï", "back\\slash", "NA", "tab\there"]
    rows_a, rows_m, rows_r = [], [], []
    for i, w in enumerate(odd):
        for j in range(6):
            op = f"void k<{j}>(float*) & 'x'"
            rows_a.append(rec(AM, op, 1.0 + i + j / 10, workload=w))
            if j != 5:  # one key without a reference: missing_reference (null reference values)
                rows_m.append(rec(ME, op, (1.0 + i + j / 10) * (1.5 if j % 2 else 1.01), workload=w,
                                  config={"precision": "bf16" if j != 3 else "fp8"}))
            rows_r.append(rec(RF, op, 2.0 + i, workload=w))  # above the measured: bound violations
    rows_m.append(rec(ME, "nan-op", None, null_reason="n/a in file"))
    rows_a.append(rec(AM, "nan-op", 1.0))
    rows_a.append(rec(AM, "nan-op", 1.0, config={"precision": "bf16"}))
    store = make_store(tmp_path, {"a.csv": rows_a, "m.csv": rows_m, "r.csv": rows_r})
    return correlate(store, config(), include_missing=True)


def test_streamed_json_is_byte_identical(tmp_path, monkeypatch):
    c = _corr(tmp_path)
    kinds = set(c.discrepancies["kind"].astype(str))
    assert {"over_tolerance", "bound_violation", "missing_reference"} <= kinds
    want = json.dumps(to_dict(c), indent=2, allow_nan=False, default=str) + "\n"
    assert to_json(c) == want
    monkeypatch.setattr(sys.modules["xfid.engine.jsonout"], "CHUNK", 7)  # several chunks
    assert to_json(c) == want
    doc = json.loads(want)
    assert any(d["reference_value"] is None for d in doc["discrepancies"])
    assert any(d["workload"] == 'w"quoted"' for d in doc["discrepancies"])


def test_no_discrepancies(tmp_path):
    store = make_store(tmp_path, {"a.csv": [rec(AM, "x", 1.0)], "m.csv": [rec(ME, "x", 1.0)]})
    c = correlate(store, config())
    assert len(c.discrepancies) == 0
    assert to_json(c) == json.dumps(to_dict(c), indent=2, allow_nan=False, default=str) + "\n"


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_cli_output_file_is_written_whole(xfid_cli, tmp_path, fmt):
    from tests.test_engine_helpers import write_csv

    write_csv(tmp_path / "a.csv", [rec(AM, "x", 1.0), rec(AM, "y", 2.0)])
    write_csv(tmp_path / "m.csv", [rec(ME, "x", 1.5), rec(ME, "y", 2.0)])
    assert xfid_cli("ingest", tmp_path / "a.csv", tmp_path / "m.csv").exit_code == 0
    out = tmp_path / f"c.{fmt}"
    r = xfid_cli("correlate", "--format", fmt, "-o", out)
    assert r.exit_code == 0 and out.exists()
    if fmt == "json":
        assert json.loads(out.read_text())["discrepancies"][0]["op"] == "x"
    assert not list(tmp_path.glob(".xfid-*"))  # no temp file left behind


def test_csv_in_pieces_is_the_same_text(tmp_path):
    from xfid.engine.output import csv_pieces, to_csv

    c = _corr(tmp_path)
    assert len(c.rows) > 20
    assert "".join(csv_pieces(c, chunk=7)) == to_csv(c)
