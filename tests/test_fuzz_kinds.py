"""The fuzz kinds of benchmarks/fuzz_more.py, a few seeded inputs each, so that the classes the
fuzzer covers (ingested folders, Verilog for rtl inspect, damaged check files, hostile names in
every command's output) stay free of tracebacks between full fuzz runs (10,000 inputs each)."""

from __future__ import annotations

import random
import signal

import pytest

from benchmarks.fuzz_inputs import _alarm
from benchmarks.fuzz_more import run_more


@pytest.mark.parametrize("kind,inputs", [("tree", 40), ("rtl", 40), ("checkfile", 6), ("names", 6)])
def test_fuzz_kind_finds_no_bug(kind, inputs, tmp_path):
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        c = run_more(kind, inputs, random.Random(7), tmp_path, 60)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert (c["BUG"], c["TIMEOUT"], c["MEMORY"]) == (0, 0, 0), c
    assert c["ok"] + c["xfid_error"] == inputs
