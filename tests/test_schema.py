"""The normalized schema and its one normalizer: types, vocabulary, units, missing values."""

from __future__ import annotations

import pyarrow as pa
import pytest

from xfid.errors import SchemaError
from xfid.schema import COLUMNS, SCHEMA, fidelity_rank, normalize

BASE = {
    "fidelity": ["measured", "rtl"],
    "target": ["h100-sxm", "t100-a0"],
    "workload": ["w", "w"],
    "op": ["", "gemm"],
    "metric": ["latency", "cycles"],
    "value": [3.0, 5.0],
}


def rec(**over):
    d = {k: list(v) for k, v in BASE.items()}
    d.update(over)
    return pa.table(d)


def test_schema_keys_are_dictionary_encoded():
    for name in ("fidelity", "target", "workload", "op", "metric", "stat", "unit", "source"):
        assert pa.types.is_dictionary(SCHEMA.field(name).type)
    assert SCHEMA.field("value").type == pa.float64()
    assert SCHEMA.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert tuple(normalize(rec()).schema.names) == COLUMNS


def test_defaults_and_units():
    t = normalize(rec(unit=["ms", None]))
    assert t.column("value").to_pylist() == [pytest.approx(0.003), 5.0]
    assert t.column("unit").to_pylist() == ["s", "cycles"]
    assert t.column("stat").to_pylist() == ["value", "value"]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"fidelity": ["measured", "simulated"]}, "record 2: unknown fidelity 'simulated'"),
        ({"metric": ["latency", "cyclez"]}, "record 2: unknown metric 'cyclez'"),
        ({"stat": ["p99", "average"]}, "record 2: unknown stat 'average'"),
        ({"unit": ["W", None]}, "record 1: unit 'W' (power) does not belong to metric 'latency'"),
        ({"unit": ["parsecs", None]}, "unknown unit 'parsecs'"),
        ({"value": [float("inf"), 1.0]}, "record 1: 'value' is inf, not a finite number"),
        ({"value": [float("nan"), 1.0]}, "'value' is nan"),
        ({"value": [None, 1.0]}, "'value' is missing and no null_reason says why"),
        ({"value": ["fast", "1"]}, "'value' must be a number, got 'fast'"),
        ({"target": [None, "x"]}, "record 1: missing 'target' (pass target or set it in xfid-source.toml"),
        ({"workload": [1, 2]}, "column 'workload' must hold text"),
    ],
)
def test_rejects_bad_records_naming_the_row(over, message):
    with pytest.raises(SchemaError) as e:
        normalize(rec(**over), source_path="in.csv")
    assert "in.csv" in str(e.value)
    assert message in str(e.value)


def test_null_with_reason_is_kept_as_null():
    t = normalize(rec(value=[None, 1.0], null_reason=["[N/A] in file", None]))
    assert t.column("value").to_pylist() == [None, 1.0]
    assert t.column("null_reason").to_pylist() == ["[N/A] in file", None]


def test_workload_named_na_or_null_stays_a_string():
    t = normalize(rec(workload=["NA", "null"]))
    assert t.column("workload").to_pylist() == ["NA", "null"]


def test_unknown_column_is_refused():
    with pytest.raises(SchemaError, match="unknown column"):
        normalize(rec(colour=["red", "blue"]))


def test_fidelity_rank_orders_low_to_high_and_derived_labels():
    assert [fidelity_rank(f) for f in ("roofline", "archmodel", "rtl", "measured")] == [0, 1, 2, 3]
    assert fidelity_rank("roofline-cal") == 0
    assert normalize(rec(fidelity=["roofline-cal", "rtl"])).column("fidelity").to_pylist()[0] == "roofline-cal"


@pytest.mark.parametrize(("metric", "unit"), [("latency", "ms"), ("duration", "s"), ("energy", "pJ"),
                                              ("throughput_tokens", "tokens/s"), ("requests_completed", None),
                                              ("cycles", None), ("power", "W"), ("bytes", "B")])
def test_negative_physical_quantities_are_refused(metric, unit):
    with pytest.raises(SchemaError, match=rf"in.csv, record 2: 'value' is -\S+ for metric '{metric}', which "
                                          r"cannot be negative"):
        normalize(rec(metric=["latency", metric], value=[1.0, -2.0], unit=["s", unit]), source_path="in.csv")


def test_negative_values_that_can_be_negative_are_kept():
    t = normalize(rec(metric=["temperature", "ncu:delta"], value=[-5.0, -2.0], unit=["C", None]))
    assert t.column("value").to_pylist() == [-5.0, -2.0]
    assert normalize(rec(value=[-0.0, 0.0])).column("value").to_pylist() == [-0.0, 0.0]


def test_string_fields_are_capped():
    from xfid.schema import KEY_CAP, PROVENANCE_CAP

    ok = normalize(rec(op=["", "x" * KEY_CAP], config=['{"a":"' + "y" * (PROVENANCE_CAP - 8) + '"}', None]))
    assert len(ok.column("op")[1].as_py()) == KEY_CAP
    with pytest.raises(SchemaError, match=r"in.jsonl, record 2: 'op' is 4,097 bytes long; a key or name may be at "
                                          r"most 4,096 bytes \(4 KiB\)"):
        normalize(rec(op=["", "x" * (KEY_CAP + 1)]), source_path="in.jsonl")
    with pytest.raises(SchemaError, match=r"record 1: 'config' is 65,537 bytes long; a provenance string may be "
                                          r"at most 65,536 bytes \(64 KiB\)"):
        normalize(rec(config=["c" * (PROVENANCE_CAP + 1), None]), source_path="in.jsonl")
    with pytest.raises(SchemaError, match=r"record 2: 'workload' is 8,000 bytes long"):  # dictionary-encoded
        normalize(rec(workload=pa.array(["w", "é" * 4000]).dictionary_encode()), source_path="in.parquet")
    with pytest.raises(SchemaError, match=r"record 1: 'target' is 5,000 bytes long"):
        normalize(rec(target=[None, "t"]), source_path="x", defaults={"target": "t" * 5000})


def test_empty_unit_names_the_row():
    with pytest.raises(SchemaError, match=r"in.csv, record 2: empty 'unit' for metric 'latency', which is "
                                          r"measured in 's'"):
        normalize(rec(metric=["latency", "latency"], unit=["s", ""]), source_path="in.csv")
