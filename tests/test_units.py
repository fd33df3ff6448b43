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


# --- exact conversion: the correctly rounded double of the file's decimal ---

from decimal import Decimal  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from xfid.schema import normalize  # noqa: E402

POWER = {"ns": 9, "us": 6, "ms": 3, "nsecond": 9, "usecond": 6, "msecond": 3}


def _normalized(texts: list[str], unit: str, metric: str = "duration") -> list[float]:
    n = len(texts)
    t = normalize(pa.table({"fidelity": ["measured"] * n, "target": ["t"] * n, "workload": ["w"] * n,
                            "op": [""] * n, "metric": [metric] * n, "value": [float(x) for x in texts],
                            "unit": [unit] * n}))
    return t.column("value").to_pylist()


def test_the_reported_case_is_exact():
    assert 196445828 * 1e-9 == 0.19644582800000002  # what a multiplication by 1e-9 gives
    assert units.convert("196445828", "ns", "duration") == 0.196445828
    assert units.convert(196445828, "ns", "duration") == 0.196445828
    assert _normalized(["196445828"], "ns") == [0.196445828]


_INTEGERS = st.integers(0, 10**15).map(str)
_DECIMALS = st.builds(lambda m, d: str(Decimal(m).scaleb(-d)), st.integers(0, 10**12), st.integers(1, 6))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.one_of(_INTEGERS, _DECIMALS), min_size=1, max_size=40),
       unit=st.sampled_from(sorted(POWER)))
def test_conversion_is_the_correctly_rounded_decimal(texts, unit):
    """Integers and short decimals in ns/us/ms: the array path and the scalar path both give
    float(Decimal(text) / 10**k), whatever double the text was first parsed into."""
    want = [float(Decimal(t) / 10 ** POWER[unit]) for t in texts]
    assert _normalized(texts, unit) == want
    assert [units.convert(t, unit, "duration") for t in texts] == want
    assert [units.convert(float(t), unit, "duration") for t in texts] == want


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(_DECIMALS, min_size=1, max_size=20),
       unit=st.sampled_from(["KB", "GB", "kHz", "MHz", "mW", "pJ", "%", "min", "MiB"]))
def test_other_factors_are_exact_too(texts, unit):
    metric = {"KB": "bytes", "GB": "bytes", "MiB": "bytes", "kHz": "clock", "MHz": "clock", "mW": "power",
              "pJ": "energy", "%": "utilization", "min": "duration"}[unit]
    f = units.exact_factor(metric, unit)
    want = [float(Decimal(t) * f.numerator / f.denominator) for t in texts]
    assert _normalized(texts, unit, metric) == want


def test_full_precision_doubles():
    """A computed double (16-17 digits): its shortest decimal converted exactly where that fits
    in the array path's 2**50 mantissa, else divided once by the exact power of ten."""
    x = np.random.default_rng(7).lognormal(0, 6, 2000)
    texts = [repr(float(v)) for v in x]
    out = _normalized(texts, "ms")
    exact = [units.convert(t, "ms", "duration") for t in texts]
    assert all(o in (e, v / 1000) for o, e, v in zip(out, exact, x, strict=True))
    assert sum(o == e for o, e in zip(out, exact, strict=True)) > 1000  # most 16-digit ones


def test_nulls_zeros_and_huge_values_survive_scaling():
    from xfid.convert import scale

    x = np.array([np.nan, 0.0, -1.5, 1e300, 5e-324, 123456789012345678.0])
    out = scale(x, np.ones(6), np.full(6, -9))
    assert np.isnan(out[0]) and out[1] == 0.0 and out[2] == -1.5e-9
    assert out[3] == 1e300 / 1e9 and out[4] == 5e-324 / 1e9 and out[5] == 123456789012345678.0 / 1e9


# --- case and blanks ---


@pytest.mark.parametrize("unit", ["MS", "Ms", "NS", "Us"])
def test_units_are_case_sensitive(unit):
    with pytest.raises(UnitError, match=rf"unknown unit '{unit}': units are case-sensitive, so it is not") as e:
        units.lookup(unit)
    assert "'ms'" in str(e.value) and "'us'" in str(e.value)  # the valid spellings are listed


def test_mega_seconds_are_named():
    with pytest.raises(UnitError, match="in SI 'Ms' is mega-seconds; milliseconds are 'ms'"):
        units.convert(1.0, "Ms", "latency")


@pytest.mark.parametrize(("unit", "factor"), [("Seconds", 1.0), ("MSEC", 1e-3), ("Bytes", 1.0), ("Watts", 1.0),
                                              ("Percent", 0.01), ("Milliseconds", 1e-3)])
def test_spelled_out_words_match_in_any_case(unit, factor):
    assert units.lookup(unit)[1] == factor


def test_empty_unit_is_not_seconds():
    with pytest.raises(UnitError, match="empty 'unit' for metric 'latency', which is measured in 's'"):
        units.canonical_unit("latency", "")
    assert units.canonical_unit("cycles", "") == "cycles"  # one scale: the blank can only mean cycles
    assert units.canonical_unit("requests_completed", " ") == "count"
    assert units.canonical_unit("ncu:launch__grid_size", "") == "count"  # tools leave a count's unit blank
    with pytest.raises(UnitError, match="empty 'unit' for metric 'utilization'"):
        units.canonical_unit("utilization", "")  # 0.95 or 95 %?


def test_every_factor_is_p_times_a_power_of_ten():
    from xfid.convert import split_factor

    for name in units._ALIASES:
        assert split_factor(units.exact(name)[1])[2], name


def test_many_blocks_with_nulls_and_mixed_magnitudes():
    """More rows than one block of `scale`, nulls among them, decades apart: still exact."""
    rng = np.random.default_rng(3)
    texts = [str(Decimal(int(m)).scaleb(-int(d))) for m, d in zip(rng.integers(0, 10**9, 50_000),
                                                                   rng.integers(0, 9, 50_000), strict=True)]
    n = len(texts)
    values = [None if i % 997 == 0 else float(t) for i, t in enumerate(texts)]
    t = normalize(pa.table({"fidelity": ["measured"] * n, "target": ["t"] * n, "workload": ["w"] * n,
                            "op": [""] * n, "metric": ["latency"] * n, "value": values, "unit": ["us"] * n,
                            "null_reason": ["n/a" if v is None else None for v in values]}))
    want = [None if v is None else float(Decimal(x) / 10**6) for v, x in zip(values, texts, strict=True)]
    assert t.column("value").to_pylist() == want
