"""Canonical units per metric, and exact conversion from the units real tools write.

Units are case-sensitive, as in SI: `ms` is milliseconds and `Ms` would be mega-seconds, so
`MS` is refused rather than guessed. Only spelled-out words (`Seconds`, `MSEC`, `Bytes`) are
also matched in lower case. Every factor is an exact fraction (p * 10**k); a converted value
is the correctly rounded double of the decimal in the file, not of a product with an
inexact 1e-9 (see `convert` here and `xfid.convert.scale` for arrays).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from xfid.errors import UnitError

# dimension -> canonical unit string
CANONICAL: dict[str, str] = {
    "time": "s",
    "cycles": "cycles",
    "bytes": "B",
    "power": "W",
    "energy": "J",
    "frequency": "Hz",
    "ratio": "ratio",
    "token_rate": "tokens/s",
    "request_rate": "requests/s",
    "sample_rate": "samples/s",
    "tokens_per_joule": "tokens/J",
    "joules_per_token": "J/token",
    "flops": "FLOP",
    "flop_rate": "FLOP/s",
    "byte_rate": "B/s",
    "count": "count",
    "tokens": "tokens",
    "temperature": "C",
    "area": "mm2",
}

NON_NEGATIVE: frozenset[str] = frozenset(CANONICAL) - {"temperature"}
"""Dimensions whose quantities cannot be negative (times, energies, rates, counts, ...)."""

# unit alias (exactly as tools write it) -> (dimension, exact factor to canonical)
_ALIASES: dict[str, tuple[str, Fraction]] = {}
_WORDS: dict[str, str] = {}
"""Lower-cased spelled-out words (`seconds`, `msec`, `bytes`) -> the alias they match."""
_WORD = re.compile(r"^[a-z][a-z ]{2,}$")


def _add(dim: str, factor: float, *names: str) -> None:
    exact = Fraction(str(factor))  # 1e-3 -> 1/1000 exactly
    for n in names:
        _ALIASES[n] = (dim, exact)
        if _WORD.match(n):
            _WORDS.setdefault(n, n)


_add("time", 1.0, "s", "sec", "second", "seconds", "secs")
_add("time", 1e-3, "ms", "msec", "msecond", "millisecond", "milliseconds")
_add("time", 1e-6, "us", "µs", "usec", "usecond", "microsecond", "microseconds")
_add("time", 1e-9, "ns", "nsec", "nsecond", "nanosecond", "nanoseconds")
_add("time", 1e-12, "ps", "psecond")
_add("time", 60.0, "min", "minute", "minutes")
_add("cycles", 1.0, "cycle", "cycles", "clk", "clock cycles")
_add("bytes", 1.0, "B", "byte", "bytes")
_add("bytes", 1e3, "KB", "kB", "Kbyte", "kbyte")
_add("bytes", 1e6, "MB", "Mbyte", "mbyte")
_add("bytes", 1e9, "GB", "Gbyte", "gbyte")
_add("bytes", 1e12, "TB", "Tbyte", "tbyte")
_add("bytes", 1024.0, "KiB", "Kibyte")
_add("bytes", 1024.0**2, "MiB", "Mibyte")
_add("bytes", 1024.0**3, "GiB", "Gibyte")
_add("bytes", 1024.0**4, "TiB", "Tibyte")
_add("power", 1.0, "W", "watt", "watts")
_add("power", 1e-3, "mW", "milliwatt")
_add("power", 1e3, "kW", "kilowatt")
_add("energy", 1.0, "J", "joule", "joules")
_add("energy", 1e-3, "mJ", "millijoule")
_add("energy", 1e-6, "uJ", "µJ", "microjoule")
_add("energy", 1e-12, "pJ", "picojoule")
_add("energy", 1e3, "kJ", "kilojoule")
_add("energy", 1e6, "MJ", "megajoule")
_add("frequency", 1.0, "Hz", "hz", "hertz")
_add("frequency", 1e3, "kHz", "khz", "Khz", "KHz")
_add("frequency", 1e6, "MHz", "mhz", "Mhz")
_add("frequency", 1e9, "GHz", "ghz", "Ghz")
_add("frequency", 1e9, "cycle/nsecond")  # ncu
_add("frequency", 1e6, "cycle/usecond")  # ncu
_add("frequency", 1.0, "cycle/second")  # ncu
_add("ratio", 1.0, "ratio", "fraction", "1")
_add("ratio", 0.01, "%", "pct", "percent")
_add("token_rate", 1.0, "tokens/s", "tokens/sec", "tok/s", "token/s", "tokens per second")
_add("token_rate", 1.0, "tokens/sec/user")  # genai-perf output_token_throughput_per_user
_add("request_rate", 1.0, "requests/s", "requests/sec", "req/s", "per sec", "requests per second")
_add("sample_rate", 1.0, "samples/s", "samples/sec")
_add("tokens_per_joule", 1.0, "tokens/J", "tokens/joule")
_add("joules_per_token", 1.0, "J/token", "joules/token")
_add("flops", 1.0, "FLOP", "flop", "flops", "FLOPs", "op", "ops")
_add("flops", 1e6, "MFLOP", "MFLOPs")
_add("flops", 1e9, "GFLOP", "GFLOPs")
_add("flops", 1e12, "TFLOP", "TFLOPs")
_add("flop_rate", 1.0, "FLOP/s", "flop/s")
_add("flop_rate", 1e12, "TFLOP/s", "Tflops", "TFLOPS", "TFLOP/sec")
_add("byte_rate", 1.0, "B/s", "byte/s", "byte/second")
_add("byte_rate", 1e6, "MB/s", "MBps", "Mbyte/s", "Mbyte/second")
_add("byte_rate", 1e9, "GB/s", "GBps", "Gbyte/s", "Gbyte/second")
_add("byte_rate", 1e12, "TB/s", "Tbyte/s", "Tbyte/second")
_add("byte_rate", 1e3, "KB/s", "Kbyte/s", "Kbyte/second")  # ncu
_add("count", 1.0, "count", "", "inst", "instructions", "warp", "block", "thread", "register/thread", "requests")
_add("tokens", 1.0, "tokens", "token")
_add("temperature", 1.0, "C", "degC", "°C")
_add("area", 1.0, "mm2", "mm^2")

# metric -> dimension (the canonical metric vocabulary, plus a few extensions)
METRICS: dict[str, str] = {
    "latency": "time",
    "cycles": "cycles",
    "stall_cycles": "cycles",
    "ttft": "time",
    "tpot": "time",
    "itl": "time",
    "e2e_latency": "time",
    "duration": "time",
    "sim_time": "time",
    "throughput_tokens": "token_rate",
    "throughput_input_tokens": "token_rate",
    "throughput_total_tokens": "token_rate",
    "throughput_requests": "request_rate",
    "goodput_requests": "request_rate",
    "throughput_samples": "sample_rate",
    "energy": "energy",
    "energy_per_token": "joules_per_token",
    "power": "power",
    "tokens_per_joule": "tokens_per_joule",
    "bytes": "bytes",
    "memory_used": "bytes",
    "flops": "flops",
    "macs": "count",
    "utilization": "ratio",
    "clock": "frequency",
    "bandwidth": "byte_rate",
    "flop_rate": "flop_rate",
    "requests_completed": "count",
    "requests_failed": "count",
    "concurrency": "count",
    "input_tokens": "tokens",
    "output_tokens": "tokens",
    "temperature": "temperature",
    "area": "area",
}

_CANON_TO_DIM = {u: d for d, u in CANONICAL.items()}
_ONE_SCALE = frozenset(d for d in CANONICAL if all(f == 1 for dd, f in _ALIASES.values() if dd == d))
"""Dimensions all of whose units are one scale (cycles, counts, tokens/s): a blank unit there
can only mean the canonical one."""
_EXTRA_METRIC = re.compile(r"^[a-z][a-z0-9_]*:[\w.\-\[\]/]+$")


def _spellings(dim: str) -> str:
    return ", ".join(repr(k) for k in _ALIASES if k and _ALIASES[k][0] == dim)


def exact(unit: str) -> tuple[str, Fraction]:
    """(dimension, exact factor to canonical) for a unit string as a tool writes it.

    Case matters (`ms` is milli, `Ms` mega); spelled-out words also match in lower case.

    Raises:
        UnitError: the unit is unknown, or known only in another case.
    """
    u = unit.strip()
    hit = _ALIASES.get(u)
    if hit is None and u.lower() in _WORDS:
        hit = _ALIASES[_WORDS[u.lower()]]
    if hit is not None:
        return hit
    other = next((k for k in _ALIASES if k and k.lower() == u.lower()), None)
    if other is not None:
        dim = _ALIASES[other][0]
        mega = " (in SI 'Ms' is mega-seconds; milliseconds are 'ms')" if u[:1] == "M" and u[1:] in ("s", "S") else ""
        raise UnitError(
            f"unknown unit {unit!r}: units are case-sensitive, so it is not {other!r}{mega}; "
            f"{dim} units are spelled {_spellings(dim)}"
        )
    raise UnitError(
        f"unknown unit {unit!r}; known units: "
        + ", ".join(sorted(k for k in _ALIASES if k))
        + " (case-sensitive)"
    )


def lookup(unit: str) -> tuple[str, float]:
    """Return (dimension, factor to canonical) for a unit string as a tool writes it.

    Raises:
        UnitError: the unit is unknown (see `exact`).
    """
    dim, f = exact(unit)
    return dim, float(f)


def canonical_unit(metric: str, unit: str | None = None) -> str:
    """The canonical unit of a metric.

    Vocabulary metrics have a fixed unit. A tool-specific metric (`tool:name`, e.g.
    `ncu:sm__warps_active.avg`) takes the canonical unit of the dimension of `unit`; an empty
    unit there is a count (tools leave the unit of a plain count blank). An empty unit of a
    vocabulary metric is accepted only where the dimension has one scale (cycles, counts).

    Raises:
        UnitError: unknown metric without a unit, a unit of the wrong dimension, or an empty
            unit for a metric that has one (a blank unit is never taken as seconds).
    """
    dim = METRICS.get(metric)
    if dim is not None:
        if unit is not None:
            if not unit.strip() and dim not in _ONE_SCALE:
                raise UnitError(
                    f"empty 'unit' for metric {metric!r}, which is measured in {CANONICAL[dim]!r}; "
                    f"write the unit the number is in ({_spellings(dim)})"
                )
            udim = dim if not unit.strip() else exact(unit)[0]
            if udim != dim:
                raise UnitError(
                    f"unit {unit!r} ({udim}) does not belong to metric {metric!r}, "
                    f"which is measured in {CANONICAL[dim]!r}"
                )
        return CANONICAL[dim]
    if not _EXTRA_METRIC.match(metric):
        raise UnitError(
            f"unknown metric {metric!r}; use one of {', '.join(sorted(METRICS))}, "
            "or a tool-specific name like 'ncu:sm__warps_active.avg'"
        )
    if unit is None:
        return "count"
    return CANONICAL[exact(unit)[0]]


def exact_factor(metric: str, unit: str) -> Fraction:
    """The exact multiplier that takes a value in `unit` to the canonical unit of `metric`."""
    canonical_unit(metric, unit)  # validates the pairing
    return exact(unit)[1] if unit.strip() else Fraction(1)


def factor(metric: str, unit: str) -> float:
    """Multiplier that takes a value in `unit` to the canonical unit of `metric` (rounded:
    convert with `convert` or `xfid.convert.scale`, which divide where the factor is 1/10**k)."""
    return float(exact_factor(metric, unit))


def decimal_of(value: float | int | str | Decimal) -> Fraction:
    """The exact number a value stands for: a text's decimal, an int, or a float's shortest
    decimal (`repr`, the digits a file holding that float most likely had).

    Raises:
        UnitError: a text that is not a finite decimal number.
    """
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a number")
    if isinstance(value, int):
        return Fraction(value)
    text = repr(value) if isinstance(value, float) else str(value).strip()
    try:
        d = value if isinstance(value, Decimal) else Decimal(text)
    except InvalidOperation:
        raise UnitError(f"{value!r} is not a number") from None
    if not d.is_finite():
        raise UnitError(f"{value!r} is not a finite number")
    return Fraction(d)


def convert(value: float | int | str | Decimal, unit: str, metric: str) -> float:
    """Convert one value in `unit` to the canonical unit of `metric`: the correctly rounded
    double of (the decimal `value` stands for) x (the unit's exact factor).

    `value` may be the text read from the file (best: exact), an int, or a float (taken as
    its shortest decimal, which is the file's text whenever it had at most 15 significant
    digits). `convert("196445828", "ns", "duration")` is 0.196445828, not 0.19644582800000002.
    """
    f = exact_factor(metric, unit)
    if f == 1 and not isinstance(value, (str, Decimal)):
        return float(value)
    return float(decimal_of(value) * f)


def is_known_metric(metric: str) -> bool:
    return metric in METRICS or bool(_EXTRA_METRIC.match(metric))


def is_non_negative(metric: str) -> bool:
    """True for a vocabulary metric that cannot be negative (all but temperature)."""
    return METRICS.get(metric) in NON_NEGATIVE


def dimension_of_canonical(unit: str) -> str | None:
    return _CANON_TO_DIM.get(unit)
