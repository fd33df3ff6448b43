"""Discrepancy fingerprints: pinned, and the batch version equal to the single one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xfid.engine.fingerprints as fpm
from xfid.engine.fingerprints import fingerprint, fingerprint_many

KEY = ("h100-sxm", "llama3-8b/decode/bs1/ctx8/bf16", "attn.qkv_proj", "latency", "value", "archmodel", "measured")


def test_fingerprint_is_pinned():
    # sha256 of the fields joined by U+001F, first 16 hex digits: never changes between releases
    assert fingerprint(*KEY) == "cd4dff70c8df066d"


names = st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=5, unique=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(names, min_size=7, max_size=7), st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_batch_fingerprints_equal_single(parts, seed, n):
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, len(p), n) for p in parts]
    got = fingerprint_many(parts, codes)
    want = [fingerprint(*(parts[f][int(codes[f][i])] for f in range(7))) for i in range(n)]
    assert got == want
    assert all(type(x) is str and len(x) == 16 for x in got)


def test_batch_of_nothing():
    assert fingerprint_many([["a"]] * 7, [np.zeros(0, np.int64)] * 7) == []


def test_batch_in_several_chunks(monkeypatch):
    parts = [["h100-sxm", "a100"], ["w1", "w2", "w3"], ["op"], ["latency"], ["value"], ["rtl"], ["measured"]]
    rng = np.random.default_rng(1)
    codes = [rng.integers(0, len(p), 50) for p in parts]
    whole = fingerprint_many(parts, codes)
    monkeypatch.setattr(fpm, "CHUNK", 7)
    assert fingerprint_many(parts, codes) == whole
    assert whole[3] == fingerprint(*(parts[f][int(codes[f][3])] for f in range(7)))


def test_batch_with_many_groups_and_odd_strings(monkeypatch):
    """Large code spaces (fields split into several joined groups), long and non-ASCII strings,
    empty strings and separators inside names: still fingerprint() row by row."""
    rng = np.random.default_rng(5)
    odd = ["", "x" * 4096, "ünï/cødé", "a\x1fb", " "]
    parts = [odd + [f"t{i}" for i in range(3)], [f"w{i}" for i in range(300)] + odd, [f"op{i}" for i in range(700)],
             ["latency", "energy"], ["value", "p99"], ["roofline", "rtl", "measured"], ["rtl", "measured"]]
    codes = [rng.integers(0, len(p), 2000) for p in parts]
    want = [fingerprint(*(parts[f][int(codes[f][i])] for f in range(7))) for i in range(2000)]
    assert fingerprint_many(parts, codes) == want
    for space in (1, 64, 1 << 20):  # every field its own group .. as few groups as possible
        monkeypatch.setattr(fpm, "GROUP_SPACE", space)
        assert fingerprint_many(parts, codes) == want


def _rows(n, seed=3):
    parts = [["h100-sxm", "mi300x", "ünï"], [f"w{i}" for i in range(40)], [f"op{i}" for i in range(90)],
             ["latency", "energy"], ["value", "p99"], ["roofline", "rtl", "measured"], ["rtl", "measured"]]
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, len(p), n) for p in parts]
    want = [fingerprint(*(parts[f][int(codes[f][i])] for f in range(7))) for i in range(n)]
    return parts, codes, want


def test_batch_with_helper_process(monkeypatch):
    """Above HELPER_MIN rows a helper process hashes the last rows: the same fingerprints, in
    row order, and the helper is gone afterwards."""
    parts, codes, want = _rows(3001)
    monkeypatch.setattr(fpm, "HELPER_MIN", 100)
    monkeypatch.setattr(fpm, "CHUNK", 256)  # several chunks on both sides
    monkeypatch.setattr(fpm, "_cpus", lambda: 2)
    started = []
    real = fpm._start_helper

    def spy(*a):
        started.append(real(*a))
        return started[-1]

    monkeypatch.setattr(fpm, "_start_helper", spy)
    for share in (0.5, 0.01, 1.0):
        monkeypatch.setattr(fpm, "HELPER_SHARE", share)
        assert fingerprint_many(parts, codes) == want
    assert len(started) == 3 and all(p is not None and p.returncode == 0 for p in started)


def test_helper_failures_fall_back_to_this_process(monkeypatch, tmp_path):
    """A helper that cannot start, dies, or answers short: this process hashes its rows."""
    parts, codes, want = _rows(500)
    monkeypatch.setattr(fpm, "HELPER_MIN", 10)
    monkeypatch.setattr(fpm, "_cpus", lambda: 2)
    for exe in ("python-not-here", "uwsgi", ""):  # missing; not an interpreter (an embedding program)
        monkeypatch.setattr(fpm.sys, "executable", str(tmp_path / exe) if exe else "")
        assert fingerprint_many(parts, codes) == want
    for script in ("import sys; sys.exit(3)", "import sys; sys.stdin.buffer.read(); print('0123456789abcdef')"):
        bad = tmp_path / "helper.py"
        bad.write_text(script)
        monkeypatch.setattr(fpm, "__file__", str(bad))
        monkeypatch.setattr(fpm.sys, "executable", __import__("sys").executable)
        assert fingerprint_many(parts, codes) == want


def test_no_helper_on_one_cpu_or_few_rows(monkeypatch):
    parts, codes, want = _rows(300)
    monkeypatch.setattr(fpm, "_start_helper", lambda *a: pytest.fail("no helper expected"))
    monkeypatch.setattr(fpm, "HELPER_MIN", 10)
    monkeypatch.setattr(fpm, "_cpus", lambda: 1)
    assert fingerprint_many(parts, codes) == want
    monkeypatch.setattr(fpm, "_cpus", lambda: 4)
    monkeypatch.setattr(fpm, "HELPER_MIN", 301)
    assert fingerprint_many(parts, codes) == want
