"""The normalizer's column checks and conversions: values, units, counts, timestamps.

They work chunk by chunk on dictionary codes and Arrow bitmaps, so a batch of a million rows
costs a few small arrays, not one large temporary per step (fresh memory is slow to touch).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xfid import units
from xfid.errors import SchemaError, UnitError

_ZEROS: list[pa.Buffer] = []
_ZEROS_MAX = 32 << 20


def zero_buffer(nbytes: int) -> pa.Buffer:
    """nbytes zero bytes, shared by every caller (Arrow buffers are immutable)."""
    if nbytes > _ZEROS_MAX:
        return pa.py_buffer(np.zeros(nbytes, dtype=np.uint8))
    if not _ZEROS or _ZEROS[0].size < nbytes:
        _ZEROS[:] = [pa.py_buffer(np.zeros(max(nbytes, 1 << 18), dtype=np.uint8))]
    return _ZEROS[0].slice(0, nbytes)


def zeros_index(n: int, null: bool = False) -> pa.Array:
    """n int32 zeros (or nulls): the indices of a one-value (or all-null) dictionary column."""
    bits = zero_buffer((n + 7) // 8) if null else None
    return pa.Array.from_buffers(pa.int32(), n, [bits, zero_buffer(4 * n)], null_count=n if null else 0)


def null_array(t: pa.DataType, n: int) -> pa.Array:
    """n nulls of type t; fixed-width and string ones share zero buffers instead of new ones."""
    bits = zero_buffer((n + 7) // 8)
    if pa.types.is_dictionary(t):
        return pa.DictionaryArray.from_arrays(zeros_index(n, null=True), pa.array([], t.value_type), safe=False)
    if pa.types.is_string(t):
        return pa.Array.from_buffers(t, n, [bits, zero_buffer(4 * (n + 1)), zero_buffer(0)], null_count=n)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t):
        return pa.Array.from_buffers(t, n, [bits, zero_buffer(t.bit_width // 8 * n)], null_count=n)
    return pa.nulls(n, t)


_REPEATED: list[pa.Array] = []


def repeated(value: pa.Scalar, n: int) -> pa.Array:
    """`value` n times; the last one built is kept and sliced (a source's ingest timestamp)."""
    last = _REPEATED[0] if _REPEATED else None
    if last is not None and len(last) >= n and last.type == value.type and last[0] == value:
        return last.slice(0, n)
    arr = pa.repeat(value, n)
    if n <= 1 << 22:
        _REPEATED[:] = [arr]
    return arr


def where(source_path: str | None, locs: pa.ChunkedArray | tuple[str, int] | None, i: int) -> str:
    """`file, line N` (or row/record N) of row i, for error messages."""
    loc = None
    if isinstance(locs, tuple):
        loc = f"{locs[0]} {locs[1] + i}"
    elif locs is not None and i < len(locs):
        loc = locs[i].as_py()
    base = source_path or "<records>"
    return f"{base}, {loc}" if loc else f"{base}, record {i + 1}"


def first_null(c: pa.ChunkedArray) -> int:
    return int(np.argmax(c.is_null().to_numpy(zero_copy_only=False)))


def check_values(col, ok, name, fix, source_path, locs) -> None:
    """Every value of a text column passes `ok`, or an error names the first bad row."""
    if pa.types.is_dictionary(col.type):
        uniq = list(dict.fromkeys(v for c in col.chunks for v in c.dictionary.to_pylist()))
        if col.null_count:
            uniq.append(None)
    else:
        uniq = pc.unique(col).to_pylist()
    for u in uniq:
        if u is None or not ok(u):
            plain = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
            idx = pc.index(plain, u).as_py() if u is not None else first_null(col)
            if idx < 0:
                continue  # an unused dictionary entry
            raise SchemaError(f"{where(source_path, locs, idx)}: unknown {name} {u!r}; {fix}")


def as_values(v: pa.ChunkedArray, source_path, locs) -> pa.ChunkedArray:
    """`value` as float64; an error names the first row that is not a finite number."""
    t = v.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        vals = v.to_pylist()
        for i, x in enumerate(vals):
            if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
                try:
                    float(x)
                except (TypeError, ValueError):
                    raise SchemaError(
                        f"{where(source_path, locs, i)}: 'value' must be a number, got {x!r}"
                    ) from None
        try:
            v = pc.cast(v, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{source_path or '<records>'}: 'value' must be numbers ({e})") from None
    v = v.cast(pa.float64())
    finite = pc.is_finite(v)  # a bitmap; null where value is null
    if pc.all(finite).as_py() is False:
        i = pc.index(finite, False).as_py()
        raise SchemaError(
            f"{where(source_path, locs, i)}: 'value' is {v[i].as_py()!r}, not a finite number "
            "(write a missing number as null with a null_reason, never NaN/Infinity)"
        )
    return v


def _codes(c: pa.DictionaryArray) -> np.ndarray:
    """The chunk's indices as int32 (a view where possible); a null as len(dictionary)."""
    idx = c.indices
    if idx.null_count:
        idx = pc.fill_null(idx, len(c.dictionary))
    return idx.to_numpy(zero_copy_only=False)


def to_canonical(values: pa.ChunkedArray, metric: pa.ChunkedArray, unit: pa.ChunkedArray,
                 source_path, locs) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """Convert values per (metric, unit) pair; returns (values, canonical units).

    Per chunk: one check per distinct pair of dictionary codes, then lookup tables indexed by
    the pair code give each row its canonical unit and multiplier.
    """
    if len(values) == 0:
        return pa.chunked_array([pa.array([], pa.float64())]), pa.chunked_array([pa.array([], pa.string())])
    known: dict[tuple[str, str | None], tuple[int, float] | Exception] = {}
    names: dict[str, int] = {}
    out_v: list[pa.Array] = []
    out_u: list[pa.Array] = []
    base = 0
    for b in pa.table({"v": values, "m": metric, "u": unit}).to_batches():
        v, m, u = b.column(0), b.column(1), b.column(2)
        mvals, uvals = m.dictionary.to_pylist(), u.dictionary.to_pylist()
        width = len(uvals) + 1  # the last code: no unit
        space = len(mvals) * width
        if space < 2**31:
            key = _codes(m) * np.int32(width) + _codes(u)
        else:
            key = _codes(m).astype(np.int64) * width + _codes(u)
        dense = space <= 4 * len(key) + 4096
        if dense:  # a small key space: the pair code is the slot
            seen = np.zeros(space, dtype=bool)
            seen[key] = True
            present = np.flatnonzero(seen)
        else:  # number the pairs present
            present, key = np.unique(key, return_inverse=True)
        lut_u = np.zeros(space if dense else len(present), dtype=np.int32)
        lut_m = np.ones(len(lut_u))
        bad = []
        for j, k in enumerate(present.tolist()):
            pair = (mvals[k // width], uvals[k % width] if k % width < len(uvals) else None)
            if pair not in known:
                try:
                    cu = units.canonical_unit(*pair)
                    mult = units.lookup(pair[1])[1] if pair[1] is not None and pair[1] != cu else 1.0
                    known[pair] = (names.setdefault(cu, len(names)), mult)
                except (UnitError, SchemaError) as e:
                    known[pair] = e
            r, slot = known[pair], k if dense else j
            if isinstance(r, Exception):
                bad.append((base + int(np.argmax(key == slot)), r))
            else:
                lut_u[slot], lut_m[slot] = r
        if bad:  # the first offending row, as a row-by-row check would find it
            i, e = min(bad, key=lambda x: x[0])
            raise SchemaError(f"{where(source_path, locs, i)}: {e}") from None
        if np.all(lut_m == 1.0):
            out_v.append(v)
        else:
            scaled = v.to_numpy(zero_copy_only=False) * lut_m[key]
            out_v.append(pa.array(scaled, mask=v.is_null().to_numpy(zero_copy_only=False) if v.null_count else None))
        out_u.append(pa.DictionaryArray.from_arrays(lut_u[key], pa.array(list(names), pa.string())))
        base += len(v)
    return pa.chunked_array(out_v, pa.float64()), pa.chunked_array(out_u)


def as_counts(ns: pa.ChunkedArray, source_path, locs) -> pa.ChunkedArray:
    if pa.types.is_floating(ns.type):
        nsv = ns.to_numpy(zero_copy_only=False)
        ok = np.isnan(nsv) | (nsv == np.round(nsv))
        if not ok.all():
            i = int(np.argmax(~ok))
            raise SchemaError(f"{where(source_path, locs, i)}: 'n_samples' must be a whole number, got {nsv[i]}")
    try:
        return ns.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SchemaError(f"{source_path or '<records>'}: 'n_samples' must be a whole number") from None


def as_timestamp(col: pa.ChunkedArray, source_path: str | None) -> pa.ChunkedArray:
    target = pa.timestamp("us", tz="UTC")
    t = col.type
    if pa.types.is_null(t):
        return col.cast(target)
    if pa.types.is_timestamp(t):
        if t.tz is None:
            col = pc.assume_timezone(col, "UTC")
        return col.cast(target)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        import pandas as pd

        s = pd.Series(col.to_pylist(), dtype=object)
        try:
            parsed = pd.to_datetime(s, utc=True, format="ISO8601")
        except (ValueError, TypeError) as e:
            raise SchemaError(
                f"{source_path or '<records>'}: 'timestamp' is not an ISO-8601 date/time ({e})"
            ) from None
        return pa.chunked_array([pa.array(parsed.dt.tz_convert("UTC").astype("datetime64[us, UTC]"), target)])
    raise SchemaError(f"{source_path or '<records>'}: 'timestamp' must be a date/time, got {t}")
