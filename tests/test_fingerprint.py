"""Discrepancy fingerprints: pinned, and the batch version equal to the single one."""

from __future__ import annotations

import numpy as np
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
