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
        ({"target": [None, "x"]}, "missing 'target' (pass --target"),
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
