"""What a number is *per*: its scope (one op invocation, one step, one request, one token, the
whole run; rates and powers per second). One table for every adapter.

Only numbers of the same scope are compared (`xfid.engine.align`). The scope of a record is
found, in this order:

1. a per-record override: `"scope": "run"` in the record's `config` JSON (any adapter, and the
   only way for a third-party adapter or a typed-in records file to state it);
2. the metric itself, where the metric fixes it (`ttft` is per request, `tpot` per token, every
   rate and power per second, a utilization or temperature is a level);
3. `ADAPTERS[source][metric]` (or the adapter's `"*"` entry for its tool-specific `tool:name`
   metrics): a `Rule` saying the scope of the number's `value`, of its distribution
   statistics (`mean`, `median`, `pNN`, ... over what), of a workload-level record (no op),
   and of a `sum` (the total over the run).

A new adapter adds one `ADAPTERS` entry; `tests/test_scope.py` fails, naming the adapter and
the metric, for any metric of a built-in adapter's fixtures that has no scope.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from xfid import units

SCOPES: dict[str, str] = {
    "op": "one op invocation (a kernel, a layer, an RTL transaction)",
    "step": "one model step (one forward pass: a decode or prefill step of the whole model)",
    "request": "one request",
    "batch": "one batch generated whole (an iteration of an offline latency benchmark)",
    "token": "one output token",
    "joule": "one joule (tokens per joule)",
    "run": "the whole benchmark run (every request, every step)",
    "sample": "one sampling interval of a monitor",
    "counter": "a reading of a since-boot counter (only the difference of two readings is an amount)",
    "second": "one second (a rate or a power)",
    "level": "not an amount: a level, ratio, setting or size (a utilization, a clock, memory in use)",
    "unstated": "no rule and no override says (only compared with another unstated number)",
}
"""Every scope, with what it means (docs/engine.md lists the scope of each adapter's metrics)."""

DISTRIBUTION = frozenset({"mean", "median", "std", "min", "max"})
"""Statistics over a distribution of samples (and every `pNN`): their scope is that of one sample."""


@dataclass(frozen=True)
class Rule:
    """The scope of one adapter's metric: of its `value`, of one sample under a distribution
    statistic (`each`, default: `value`), of a workload-level record without an op (`workload`,
    default: `value`), and of a `sum` over a run's samples (default: `run`)."""

    value: str
    each: str | None = None
    workload: str | None = None
    total: str = "run"

    def __post_init__(self) -> None:
        for s in (self.value, self.each, self.workload, self.total):
            if s is not None and s not in SCOPES:
                raise ValueError(f"unknown scope {s!r}; use one of {', '.join(SCOPES)}")


_RATE_DIMS = frozenset({"token_rate", "request_rate", "sample_rate", "flop_rate", "byte_rate", "power"})
_LEVEL_DIMS = frozenset({"ratio", "temperature", "frequency", "area"})
BY_METRIC: dict[str, str] = {
    "ttft": "request", "e2e_latency": "request", "tpot": "token", "itl": "token",
    "energy_per_token": "token", "tokens_per_joule": "joule",
    "memory_used": "level", "concurrency": "level", "clock": "level",
}
"""Metrics whose scope the metric itself fixes (besides rates: per second, and levels)."""

OP, STEP, RUN = Rule("op"), Rule("op", workload="step"), Rule("run")
PER_REQUEST_STATS = Rule("run", each="request")
"""A run total as `value`, per-request distribution statistics (token counts of a serving run)."""

ADAPTERS: dict[str, dict[str, Rule]] = {
    # models and the roofline (xfid.models writes xfid-records): an op's number is one invocation,
    # a workload-level number one model step
    "xfid-records": {"*": STEP},
    "genz": {"*": STEP},
    "llm-viewer": {"*": STEP},
    "llmcompass-hw": {"*": OP},
    "scalesim": {"*": OP},  # one layer
    "timeloop": {"*": OP},  # one problem (layer) mapped once
    "cocotb": {"*": OP},  # one RTL transaction
    # kernel profilers: per kernel invocation; nsys `sum` is the total of every instance of the run
    "ncu": {"*": OP},
    "nsys": {"*": OP},
    # monitors: energy counters over the logged window, the rest per sample
    "nvidia-smi": {"energy": RUN, "*": Rule("sample")},
    "dcgm": {"energy": RUN, "dcgm:totec_energy": RUN, "*": Rule("sample")},
    # one scrape: every series one sample; the energy counter (and each TYPE counter series, by a
    # per-record "scope": "counter") is a since-boot reading, an amount only as a difference
    "dcgm-exporter": {"dcgm:total_energy": Rule("counter"), "*": Rule("sample")},
    "derived-energy": {"*": RUN},
    # serving benchmarks: totals per run, the distributions per request
    "vllm": {"*": PER_REQUEST_STATS},
    "sglang": {"*": PER_REQUEST_STATS},
    "genai-perf": {"*": PER_REQUEST_STATS},
    # AIPerf as genai-perf; an inter-chunk latency is one streamed chunk (normally one token)
    "aiperf": {"aiperf:inter_chunk_latency": Rule("run", each="token"), "*": PER_REQUEST_STATS},
    "trtllm-bench": {"*": PER_REQUEST_STATS},
    "perf-analyzer": {"*": PER_REQUEST_STATS},
    "mlperf": {"*": PER_REQUEST_STATS},
    "serving-console": {"*": PER_REQUEST_STATS},
    "llmperf": {"*": PER_REQUEST_STATS},  # a summary: totals per run, quantiles over requests  # the printed result block of a serving benchmark
    # offline vLLM: a latency is one whole batch generation (one iteration); throughput totals per run
    "vllm-latency": {"*": Rule("batch")},
    "vllm-throughput": {"*": RUN},
    # one static batch: the prefill and decode ops are one model step, the batch totals the run
    "sglang-one-batch": {"*": Rule("step", workload="run")},
}
"""adapter (the records' `source`) -> metric -> Rule; `"*"`: every other extensive metric of it."""


def intrinsic(metric: str, unit: str | None = None) -> str | None:
    """The scope the metric (or, for a `tool:name` metric, its unit) fixes; None for an amount
    (time, cycles, bytes, energy, FLOPs, counts, tokens) whose scope depends on the source."""
    if metric in BY_METRIC:
        return BY_METRIC[metric]
    dim = units.METRICS.get(metric)
    if dim is None and unit:
        dim = units.dimension_of_canonical(unit)
    if dim in _RATE_DIMS:
        return "second"
    if dim in _LEVEL_DIMS:
        return "level"
    return {"joules_per_token": "token", "tokens_per_joule": "joule"}.get(dim or "")


def rule_for(source: str, metric: str) -> Rule | None:
    """The ADAPTERS rule of `source`'s `metric` (its `"*"` entry), None when the table has none."""
    table = ADAPTERS.get(source)
    if table is None:
        return None
    return table.get(metric, table.get("*"))


def scope_of(source: str | None, metric: str, stat: str, has_op: bool, unit: str | None = None,
             config: str | None = None) -> str:
    """The scope of one number (see the module docstring for the order of the rules)."""
    override = config_scope(config)
    if override is not None:
        return override
    fixed = intrinsic(metric, unit)
    if fixed is not None:
        return fixed
    rule = rule_for(source or "", metric)
    if rule is None:
        return "unstated"
    if stat == "sum":
        return rule.total
    if stat in DISTRIBUTION or stat.startswith("p"):
        return rule.each or (rule.value if has_op else rule.workload or rule.value)
    return rule.value if has_op else rule.workload or rule.value


def config_scope(config: str | None) -> str | None:
    """The `"scope"` a record's config JSON states, None when it states none ("unstated" when
    it states a word that is not one of SCOPES)."""
    if not config or '"scope"' not in config:
        return None
    try:
        value = json.loads(config).get("scope")
    except (ValueError, AttributeError):
        return None
    if value is None:
        return None
    return str(value) if value in SCOPES else "unstated"


def describe(scope: str) -> str:
    """`per <scope>` as a note writes it."""
    return f"per {scope}" if scope not in ("level", "unstated") else scope
