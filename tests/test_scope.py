"""The scope rule (xfid/scope.py): every adapter has a scope for its amounts, and the rules' order."""

from __future__ import annotations

import pytest

from xfid.adapters import BUILTIN
from xfid.scope import ADAPTERS, SCOPES, scope_of


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_adapter_states_the_scope_of_its_amounts(name):
    assert name in ADAPTERS, (f"adapter {name!r} has no entry in xfid.scope.ADAPTERS: add "
                              f"'{name}': {{'*': Rule(...)}} (and metric entries where they differ) "
                              "saying what its energy, durations, bytes, FLOPs and counts are per")


@pytest.mark.parametrize(("source", "metric", "stat", "has_op", "config", "want"), [
    ("vllm", "energy", "value", False, None, "run"),
    ("vllm", "output_tokens", "mean", False, None, "request"),
    ("vllm", "ttft", "p99", False, None, "request"),
    ("vllm", "throughput_tokens", "value", False, None, "second"),
    ("xfid-records", "energy", "value", False, None, "step"),
    ("xfid-records", "energy", "value", True, None, "op"),
    ("xfid-records", "energy", "value", False, '{"scope":"run"}', "run"),
    ("nsys", "latency", "sum", True, None, "run"),
    ("nsys", "latency", "median", True, None, "op"),
    ("dcgm", "energy", "value", True, None, "run"),
    ("nvidia-smi", "utilization", "value", True, None, "level"),
    ("third-party", "energy", "value", False, None, "unstated"),
    ("xfid-records", "energy", "value", False, '{"scope":"fortnight"}', "unstated"),
])
def test_scope_of(source, metric, stat, has_op, config, want):
    got = scope_of(source, metric, stat, has_op, None, config)
    assert got == want and got in SCOPES
