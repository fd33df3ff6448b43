"""Units: canonical unit per metric and conversion from what real tools write."""

from __future__ import annotations

import pytest

from xfid import units
from xfid.errors import UnitError


@pytest.mark.parametrize(
    ("value", "unit", "metric", "expected"),
    [
        (1.0, "ns", "latency", 1e-9), (2.0, "usecond", "latency", 2e-6), (3.0, "msecond", "ttft", 3e-3),
        (1.0, "nsecond", "latency", 1e-9), (1.5, "second", "duration", 1.5),
        (1.0, "Kbyte", "bytes", 1e3), (1.0, "Mbyte", "bytes", 1e6), (1.0, "Gbyte", "bytes", 1e9),
        (1.0, "KB", "bytes", 1e3), (2.0, "GB", "bytes", 2e9), (1.0, "KiB", "bytes", 1024.0),
        (1.0, "MiB", "memory_used", 1048576.0), (1.0, "GiB", "bytes", 1073741824.0), (7.0, "byte", "bytes", 7.0),
        (500.0, "mW", "power", 0.5), (24.8, "W", "power", 24.8),
        (1.0, "mJ", "energy", 1e-3), (1.0, "kJ", "energy", 1e3), (1.0, "MJ", "energy", 1e6),
        (95.0, "%", "utilization", 0.95), (1.0, "kHz", "clock", 1e3), (1410.0, "MHz", "clock", 1.41e9),
        (1.755, "GHz", "clock", 1.755e9), (9.0, "Hz", "clock", 9.0), (12.0, "cycle", "cycles", 12.0),
    ],
)
def test_convert(value, unit, metric, expected):
    assert units.convert(value, unit, metric) == pytest.approx(expected, rel=1e-12)


def test_canonical_units_of_the_vocabulary():
    assert units.canonical_unit("latency") == "s"
    assert units.canonical_unit("utilization") == "ratio"
    assert units.canonical_unit("tokens_per_joule") == "tokens/J"
    assert units.canonical_unit("throughput_tokens") == "tokens/s"
    assert units.canonical_unit("cycles") == "cycles"


def test_unknown_unit_is_named():
    with pytest.raises(UnitError, match="unknown unit 'furlongs'"):
        units.convert(1.0, "furlongs", "latency")


def test_unit_of_wrong_dimension():
    with pytest.raises(UnitError, match=r"unit 'W' .* does not belong to metric 'latency'"):
        units.canonical_unit("latency", "W")


def test_tool_specific_metric_takes_dimension_of_unit():
    assert units.canonical_unit("ncu:sm__warps_active.avg.pct_of_peak_sustained_active", "%") == "ratio"
    with pytest.raises(UnitError, match="unknown metric 'latnecy'"):
        units.canonical_unit("latnecy")
