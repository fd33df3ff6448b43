"""xfid-records and JSON inputs: bounded line reads, blank units, negative and oversized values."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from xfid.adapters import jsonutil, records
from xfid.adapters.base import ReadContext
from xfid.errors import InputError

HEAD = "fidelity,target,workload,op,metric,stat,value,unit\n"


def rec(**over) -> str:
    r = {"fidelity": "measured", "target": "h100-sxm", "workload": "w", "op": "gemm", "metric": "latency",
         "value": 1.5, "unit": "ms"}
    r.update(over)
    return json.dumps(r) + "\n"


def test_overlong_json_line_is_refused_before_it_is_held(xfid_cli, tmp_path):
    p = tmp_path / "r.jsonl"
    with p.open("w") as f:
        f.write(rec())
        f.write(rec(op="x" * (32 << 20)))  # a 32 MiB op name
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2
    assert r.output == (f"Error: {p}, line 2: line longer than 2,097,152 bytes (2 MiB) (one record per line; "
                        "a record's strings are at most 64 KiB)\n")
    assert xfid_cli("export").output == ""
    tracemalloc.start()
    with pytest.raises(InputError, match="line 2: line longer than"):
        list(records.RecordsAdapter().read(ReadContext(path=p)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20, peak  # the 32 MiB line was never held whole (one 2 MiB read + overhead)


def test_long_field_within_the_line_cap_is_refused_by_the_normalizer(xfid_cli, tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(rec() + rec(op="y" * 5000))
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2
    assert f"Error: {p}, line 2: 'op' is 5,000 bytes long; a key or name may be at most 4,096 bytes" in r.output


@pytest.mark.parametrize("unit", ['""', "null"])
def test_blank_unit_in_json_lines_is_an_error(xfid_cli, tmp_path, unit):
    p = tmp_path / "r.jsonl"
    p.write_text(rec() + rec().replace('"unit": "ms"', f'"unit": {unit}'))
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2
    assert f"Error: {p}, line 2: empty 'unit' for metric 'latency', which is measured in 's'" in r.output


def test_blank_unit_in_csv_is_an_error_but_not_for_cycles(xfid_cli, tmp_path):
    p = tmp_path / "r.csv"
    p.write_text(HEAD + "measured,h100-sxm,w,gemm,latency,value,2.5,ms\nmeasured,h100-sxm,w,gemm,latency,value,2.5,\n")
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2
    assert f"Error: {p}, line 3: empty 'unit' for metric 'latency'" in r.output
    q = tmp_path / "c.csv"
    q.write_text(HEAD + "rtl,t100-a0,w,gemm,cycles,value,12,\n")
    rows, _ = xfid_cli.ingest_export(q)
    assert [(x["value"], x["unit"]) for x in rows] == [(12.0, "cycles")]


def test_case_of_units_and_sign_of_values_in_csv(xfid_cli, tmp_path):
    p = tmp_path / "r.csv"
    p.write_text(HEAD + "measured,h100-sxm,w,gemm,latency,value,2.5,MS\n")
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2 and "units are case-sensitive, so it is not 'ms'" in r.output
    p.write_text(HEAD + "measured,h100-sxm,w,gemm,latency,value,2.5,ms\nmeasured,h100-sxm,w,gemm,duration,value,-3,s\n")
    r = xfid_cli("ingest", p)
    assert r.exit_code == 2
    assert f"Error: {p}, line 3: 'value' is -3.0 for metric 'duration', which cannot be negative" in r.output


def test_exact_conversion_through_ingest(xfid_cli, tmp_path):
    p = tmp_path / "r.csv"
    p.write_text(HEAD + "measured,h100-sxm,w,gemm,duration,value,196445828,ns\n"
                 "measured,h100-sxm,w,gemm,latency,value,0.3,ms\n")
    rows, _ = xfid_cli.ingest_export(p)
    assert sorted(x["value"] for x in rows) == [0.0003, 0.196445828]


def test_json_documents_are_read_with_a_bounded_line(tmp_path):
    p = tmp_path / "bench.json"
    p.write_text('{"a": 1}\n{"b": "' + "z" * 500 + '"}\n')
    ctx = ReadContext(path=p)
    with pytest.raises(InputError, match=r"bench.json, line 2: line longer than 100 bytes \(is this the tool's"):
        jsonutil.read_bounded(ctx, limit=100)
    assert jsonutil.read_bounded(ctx).startswith('{"a": 1}')
    assert jsonutil._size(jsonutil.MAX_LINE_BYTES) == "268,435,456 bytes (256 MiB)"
    assert jsonutil.MAX_LINE_BYTES == 256 << 20 and records.MAX_LINE_BYTES == 2 << 20


def test_the_one_bounded_reader_strips_a_bom_and_names_the_line_of_bad_bytes(tmp_path):
    p = tmp_path / "bench.json"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n{"b": 2}')
    ctx = ReadContext(path=p)
    assert list(jsonutil.bounded_lines(ctx, 100, "fix")) == [(1, '{"a": 1}\r\n'), (2, '{"b": 2}')]
    assert jsonutil.read_bounded(ctx) == '{"a": 1}\r\n{"b": 2}'
    p.write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(InputError, match=r"bench.json, line 2: not UTF-8 text \(byte 7 of the line\) "
                                         r"\(save the file as UTF-8\)"):
        jsonutil.read_bounded(ctx)
    for blank in (b"", b" \n\n", b"\xef\xbb\xbf\n"):
        p.write_bytes(blank)
        with pytest.raises(InputError, match=r"bench\.json: the file is empty"):
            jsonutil.read_bounded(ctx)


def test_records_json_lines_use_the_shared_reader(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(rec().encode() + b'{"op": "\xff"}\n')
    with pytest.raises(InputError, match=r"r.jsonl, line 2: not UTF-8 text \(byte 8 of the line\)"):
        list(records.RecordsAdapter().read(ReadContext(path=p)))
