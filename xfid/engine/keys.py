"""Integer codes for dictionary columns and mixed-radix keys: the engine never groups on strings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIMIT = 1 << 62


def as_dictionary(col: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """One DictionaryArray for a (chunked) column; plain strings are dictionary-encoded."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 0:
            col = pa.array([], col.type)
        elif pa.types.is_dictionary(col.type):
            col = col.unify_dictionaries().combine_chunks()
        else:
            col = col.combine_chunks()
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    return col


def encode(col: pa.ChunkedArray | pa.Array, extra: Iterable[str] = ()) -> tuple[np.ndarray, list[str]]:
    """Codes (int64) whose order is the order of the string values, plus the sorted values.

    Args:
        col: a string or dictionary<string> column without nulls (nulls get code -1).
        extra: values that must have a code even if the column lacks them (e.g. `latency`
            for cycles->latency conversion).

    Returns:
        (codes, values) with values[codes[i]] == col[i].
    """
    arr = as_dictionary(col)
    d = [("" if v is None else v) for v in arr.dictionary.to_pylist()]
    values = sorted(set(d) | set(extra))
    pos = {v: i for i, v in enumerate(values)}
    remap = np.array([pos[v] for v in d], dtype=np.int64)
    idx = arr.indices
    nulls = idx.null_count
    if nulls:
        idx = pc.fill_null(idx, -1)
    idx = idx.to_numpy(zero_copy_only=False)
    if not len(remap):
        return np.full(len(idx), -1, np.int64), values
    if not nulls:
        return remap[idx], values
    out = remap[np.where(idx < 0, 0, idx)]
    out[idx < 0] = -1
    return out, values


def raw_codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Dictionary indices (int64, -1 for null) and the dictionary, in the column's own order."""
    arr = as_dictionary(col)
    idx = arr.indices
    if idx.null_count:
        idx = pc.fill_null(idx, -1)
    return idx.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), arr.dictionary.to_pylist()


def combine(codes: Sequence[np.ndarray], cards: Sequence[int]) -> tuple[np.ndarray, list[int]]:
    """Mixed-radix key of several code arrays (first = most significant), order-preserving.

    Returns the key and the radices actually used. If the product of cardinalities would
    overflow int64, the key built so far is densified with np.unique (still order-preserving).
    """
    key = np.zeros(len(codes[0]) if codes else 0, np.int64)
    radix = 1
    used: list[int] = []
    for c, n in zip(codes, cards, strict=True):
        n = max(int(n), 1)
        if radix * n >= _LIMIT:
            uniq, key = np.unique(key, return_inverse=True)
            radix = len(uniq)
        key = key * n + c
        radix *= n
        used.append(n)
    return key, used


def run_starts(sorted_key: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array."""
    if not len(sorted_key):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])


def group_ids(starts: np.ndarray, n: int) -> np.ndarray:
    """Group number per position for groups starting at `starts` (sorted) over n positions."""
    g = np.zeros(n, np.int64)
    if len(starts) > 1:
        g[starts[1:]] = 1
    return np.cumsum(g)
