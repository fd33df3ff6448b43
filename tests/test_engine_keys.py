"""keys.KeyCoder: combine's order-preserving keys, and the same keys of later tuples."""

from __future__ import annotations

import numpy as np
import pytest

from xfid.engine import keys
from xfid.engine.keys import KeyCoder, combine


@pytest.mark.parametrize("limit", [keys._LIMIT, 8, 40])  # 8, 40: the key so far ranked at some or every column
def test_keys_preserve_order_and_encode_gives_the_same_keys(monkeypatch, limit):
    monkeypatch.setattr(keys, "_LIMIT", limit)
    rng = np.random.default_rng(5)
    cards = [3, 1, 7, 4]
    codes = [rng.integers(0, c, 500) for c in cards]
    codes[1] = np.broadcast_to(np.int64(0), (500,))  # a constant column of one value, as the engine passes
    coder, key = KeyCoder.fit(codes, cards)
    assert np.array_equal(combine(codes, cards)[0], key) and combine(codes, cards)[1] == cards
    tuples = list(zip(*(c.tolist() for c in codes), strict=True))
    for a, b in zip(np.argsort(key, kind="stable")[:-1], np.argsort(key, kind="stable")[1:], strict=True):
        assert tuples[a] <= tuples[b]  # sorted keys, sorted tuples
    assert len(set(key.tolist())) == len(set(tuples))  # equal keys, equal tuples
    again, dead = coder.encode([np.ascontiguousarray(c) for c in codes])
    assert np.array_equal(again, key) and not dead.any()
    other = [rng.integers(0, c, 300) for c in cards]
    got, dead = coder.encode(other)
    fitted = dict(zip(tuples, key.tolist(), strict=True))
    for t, k, d in zip(zip(*(c.tolist() for c in other), strict=True), got.tolist(), dead.tolist(), strict=True):
        assert (t in fitted and not d and fitted[t] == k) or (t not in fitted and (d or k not in fitted.values()))
