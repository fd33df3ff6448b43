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


def test_names_groups_still_find_each_raw_name(monkeypatch, tmp_path):
    """`names` runs its inputs in groups sharing one store; with the escaping switched off, a
    group's finding sends its inputs through one at a time, so each hostile input is a BUG of
    its own and a benign one stays ok."""
    import re

    from xfid import textsafe

    never = re.compile("(?!)")
    monkeypatch.setattr(textsafe, "_UNSAFE", never)  # nothing is escaped, by a command or under them all
    monkeypatch.setattr(textsafe, "_STREAM_UNSAFE", never)
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        c = run_more("names", 12, random.Random(3), tmp_path, 60)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert c["regrouped"] >= 1, c
    assert c["BUG"] >= 6, c
    assert c["BUG"] + c["ok"] == 12, c
