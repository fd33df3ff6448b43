"""Integer codes for dictionary columns and mixed-radix keys: the engine never groups on strings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIMIT = 1 << 62


def dict_chunks(col: pa.ChunkedArray | pa.Array) -> list[pa.DictionaryArray]:
    """The chunks of a column as DictionaryArrays (plain strings are dictionary-encoded per chunk)."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    return [c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c) for c in chunks]


def _chunk_indices(ch: pa.DictionaryArray) -> np.ndarray:
    idx = ch.indices
    if idx.null_count:
        idx = pc.fill_null(idx, -1)
    return idx.to_numpy(zero_copy_only=False)


def _remapped(chunks: list[pa.DictionaryArray], remaps: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-chunk `remap[indices]` (null -> -1) into one int32 array, no unification copy.

    A column holding one value everywhere (a partition column, one target) comes back as a
    read-only broadcast view of that code: no memory, no pass over the rows."""
    total = sum(len(c) for c in chunks)
    const = {int(r[0]) for c, r in zip(chunks, remaps, strict=True) if len(c) and len(r) == 1 and not c.null_count}
    if total and len(const) == 1 and all(not len(c) or (len(r) == 1 and not c.null_count)
                                         for c, r in zip(chunks, remaps, strict=True)):
        return np.broadcast_to(np.int32(const.pop()), (total,))
    out = np.empty(total, np.int32)
    at = 0
    for ch, remap in zip(chunks, remaps, strict=True):
        n = len(ch)
        if n and len(remap) == 1 and not ch.null_count:
            out[at:at + n] = remap[0]  # one value in this chunk (a partition column, one target)
        elif n:
            ext = np.append(remap.astype(np.int32), np.int32(-1))  # index -1 (null) -> -1
            out[at:at + n] = ext[_chunk_indices(ch)]  # fancy indexing: far faster than np.take(out=)
        at += n
    return out


def encode(col: pa.ChunkedArray | pa.Array, extra: Iterable[str] = ()) -> tuple[np.ndarray, list[str]]:
    """Codes (int32) whose order is the order of the string values, plus the sorted values.

    Works chunk by chunk on the chunks' own dictionaries (no unified copy of the column).

    Args:
        col: a string or dictionary<string> column (nulls get code -1; a null dictionary
            value counts as "").
        extra: values that must have a code even if the column lacks them (e.g. `latency`
            for cycles->latency conversion).

    Returns:
        (codes, values) with values[codes[i]] == col[i].
    """
    chunks = dict_chunks(col)
    dicts = [[("" if v is None else v) for v in c.dictionary.to_pylist()] for c in chunks]
    values = sorted(set().union(*dicts, extra)) if dicts else sorted(set(extra))
    pos = {v: i for i, v in enumerate(values)}
    remaps = [np.array([pos[v] for v in d], dtype=np.int64) for d in dicts]
    return _remapped(chunks, remaps), values


def raw_codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Codes (int32, -1 for null) into the distinct dictionary values in order of first appearance."""
    chunks = dict_chunks(col)
    pos: dict[str | None, int] = {}
    remaps = []
    for c in chunks:
        d = c.dictionary.to_pylist()
        remaps.append(np.array([pos.setdefault(v, len(pos)) for v in d], dtype=np.int64))
    return _remapped(chunks, remaps), list(pos)


def raw_codes_at(col: pa.ChunkedArray | pa.Array, rows: np.ndarray,
                 plans: dict | None = None) -> tuple[np.ndarray, list[str | None]]:
    """`raw_codes(col)` at the positions `rows` only (same dictionary), without a full-column pass.

    `plans` (a dict the caller keeps) caches the rows' split by chunk for columns chunked alike.
    """
    chunks = dict_chunks(col)
    pos: dict[str | None, int] = {}
    remaps = [np.array([-1] + [pos.setdefault(v, len(pos)) for v in c.dictionary.to_pylist()], np.int32)
              for c in chunks]
    out = np.full(len(rows), -1, np.int32)
    if not len(rows) or not chunks:
        return out, list(pos)
    lens = tuple(len(c) for c in chunks)
    plan = plans.get(lens) if plans is not None else None
    if plan is None:
        offs = np.cumsum((0, *lens))
        k = np.searchsorted(offs, rows, side="right") - 1
        order = np.argsort(k.astype(np.uint16) if len(chunks) < 1 << 16 else k, kind="stable")
        bounds = np.searchsorted(k[order], np.arange(len(chunks) + 1))
        plan = (offs, order, bounds)
        if plans is not None:
            plans[lens] = plan
    offs, order, bounds = plan
    for j, ch in enumerate(chunks):
        a, b = bounds[j], bounds[j + 1]
        if a == b:
            continue
        at = order[a:b]
        out[at] = remaps[j][_chunk_indices(ch)[rows[at] - offs[j]] + 1]  # index -1 (null) -> -1
    return out, list(pos)


def combine(codes: Sequence[np.ndarray], cards: Sequence[int]) -> tuple[np.ndarray, list[int]]:
    """Mixed-radix key of several code arrays (first = most significant), order-preserving.

    Returns the key and the radices used. If the product of cardinalities would overflow int64,
    the key built so far is densified with np.unique (still order-preserving): KeyCoder.fit.
    """
    return KeyCoder.fit(codes, cards)[1], [max(int(n), 1) for n in cards]


class KeyCoder:
    """`combine`'s keys, and the same keys of other code tuples later (`encode`): where `fit`
    densified the key so far, a later tuple's key so far is replaced by its rank among the fitted
    ones, and a tuple whose key so far no fitted tuple has is `dead` (it equals none of them)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, np.ndarray | None]] = []  # per column: its radix, the ranks before it

    @classmethod
    def fit(cls, codes: Sequence[np.ndarray], cards: Sequence[int]) -> tuple[KeyCoder, np.ndarray]:
        """A coder of these code tuples (`codes`: per column; `cards`: each column's number of
        codes), and their keys."""
        coder = cls()
        key = np.zeros(len(codes[0]) if codes else 0, np.int64)
        radix = 1
        for i, (c, n) in enumerate(zip(codes, cards, strict=True)):
            n = max(int(n), 1)
            uniq = None
            if radix * n >= _LIMIT:
                uniq, key = np.unique(key, return_inverse=True)
                key = key.reshape(-1).astype(np.int64, copy=False)
                radix = len(uniq)
            coder.steps.append((n, uniq))
            if n == 1 and c.strides == (0,) and (not len(c) or int(c[0]) == 0):
                continue  # a constant 0 of a one-value column: key * 1 + 0
            if i:
                key *= n  # in place: no new full-length temporaries
            key += c
            radix *= n
        return coder, key

    def encode(self, codes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The keys of other code tuples (per column, the fitted columns' codes), and which are dead."""
        n = len(codes[0]) if codes else 0
        key, dead = np.zeros(n, np.int64), np.zeros(n, bool)
        for c, (radix, uniq) in zip(codes, self.steps, strict=True):
            if uniq is not None:
                at = np.searchsorted(uniq, key).clip(0, max(len(uniq) - 1, 0))
                known = uniq[at] == key if len(uniq) else np.zeros(n, bool)
                dead |= ~known
                key = np.where(known, at, 0)
            key = key * radix + c
        return key, dead


def dense_unique(x: np.ndarray, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(x, return_inverse=True) for non-negative ints; by bincount when the range is small."""
    if not len(x):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    top = int(x.max()) + 1 if size is None else int(size)
    if top > max(1 << 22, 2 * len(x)):
        u, inv = np.unique(x, return_inverse=True)
        return u, inv.reshape(-1)
    present = np.bincount(x, minlength=top) > 0
    lut = np.cumsum(present) - 1
    return np.flatnonzero(present), lut[x]


def run_starts(sorted_key: np.ndarray) -> np.ndarray:
    """Start index of each run of equal values in a sorted array."""
    if not len(sorted_key):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])

