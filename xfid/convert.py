"""The normalizer's column checks and conversions: values, units, counts, timestamps.

They work chunk by chunk on dictionary codes and Arrow bitmaps, so a batch of a million rows
costs a few small arrays, not one large temporary per step (fresh memory is slow to touch).
"""

from __future__ import annotations

from fractions import Fraction

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


_P10 = np.array([float(10**i) for i in range(23)])  # the powers of ten a double holds exactly
_BLOCK = 1 << 14
"""Elements per block of `scale` (fresh memory is slow to touch; 128 KB temporaries are reused)."""
_MANTISSA = 2.0**50
"""Decimal digits recovered from a double must stay below this (15 significant digits)."""
_LOG_MANTISSA = float(np.log10(_MANTISSA))


def split_factor(f: Fraction) -> tuple[float, int, bool]:
    """An exact unit factor as (p, k) with f == p * 10**k, and whether p is a whole number
    (every factor of `xfid.units` is: 1/1000 -> (1, -3), 1024 -> (1024, 0), 60 -> (6, 1))."""
    num, den, k = f.numerator, f.denominator, 0
    while den % 10 == 0:
        den, k = den // 10, k - 1
    while num and num % 10 == 0:
        num, k = num // 10, k + 1
    if den != 1 or not -22 <= k <= 22 or num >= 2**53:
        return float(f), 0, False
    return float(num), k, True


def scale(x: np.ndarray, p: np.ndarray, k: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
    """x * p * 10**k per element, as the correctly rounded double of the decimal x was read from.

    A double parsed from a decimal text d is already a rounding of d; multiplying it by an
    inexact 1e-9 rounds again (196445828 ns gave 0.19644582800000002 s). Here each x is
    first turned back into its decimal m * 10**-j (the largest j <= 22 that keeps m*p below
    2**50, m = rint(x * 10**j), accepted only when m / 10**j == x), and the result is one
    IEEE operation on exact operands, m*p times or divided by a power of ten <= 10**22: the
    correctly rounded value of d * p * 10**k. That holds for every d of at most 15
    significant digits (and up to 22 + k decimals), which covers what tools print. A double
    that no short decimal explains (a full-precision computed value) gets x * p / 10**-k (or
    * 10**k): a single rounding when p is 1, since dividing by an exact power of ten is
    correctly rounded for the double x itself. `units.convert` does the same for one value
    from its text, exactly, with no digit limit.

    Args:
        x: values (NaN for nulls stays NaN).
        p, k: the factor p * 10**k (see `split_factor`), per element or one for all; p whole.
        whole: per element, False where p is not a whole number (no recovery there).
    """
    if len(x) > _BLOCK:  # block by block: small temporaries stay in cache and are reused
        out = np.empty(len(x))
        for a in range(0, len(x), _BLOCK):
            cut = slice(a, a + _BLOCK)
            out[cut] = scale(x[cut], p if np.ndim(p) == 0 else p[cut], k if np.ndim(k) == 0 else k[cut],
                             None if whole is None else whole[cut])
        return out
    if np.ndim(p) or np.ndim(k) or whole is not None:
        return _scale_each(x, p, k, whole)
    with np.errstate(all="ignore"):
        px = x * p if p != 1 else x
        if not (np.rint(x) != x).any():  # whole numbers (counts, ns): x is the file's decimal and
            return px / _P10[-k] if k < 0 else px * _P10[k]  # x * p is exact: one rounding is right
        # one number of decimals j for the block, from its largest value (short decimals of one
        # quantity rarely span more than a few decades); the rest get their own j below
        top = float(np.fmax.reduce(np.abs(px)))  # NaN (nulls) ignored; NaN when all are
        j = int(min(22, 22 + k, max(0, np.floor(_LOG_MANTISSA - np.log10(top))) if top > 0 else 22))
        while j > 0 and top * _P10[j] > _MANTISSA:
            j -= 1
        m = np.rint(x * _P10[j])
        ok = m / _P10[j] == x
        if p != 1:
            m *= p
        out = m / _P10[j - k] if j >= k else m * _P10[k - j]
        if not ok.all():
            bad = ~ok & ~np.isnan(x)  # a null stays NaN
            if bad.any():
                out[bad] = _scale_each(x[bad], p, k, None)
    return out


def _scale_each(x: np.ndarray, p, k, whole: np.ndarray | None) -> np.ndarray:
    """`scale` with a number of decimals per element (and p, k per element or scalars)."""
    scalar_k = np.ndim(k) == 0
    with np.errstate(all="ignore"):
        px = x * p if np.ndim(p) or p != 1 else x
        if scalar_k:
            plain = px / _P10[-k] if k < 0 else px * _P10[k]
        else:
            plain = np.where(k < 0, px / _P10[np.maximum(-k, 0)], px * _P10[np.maximum(k, 0)])
        mag = np.abs(px)
        jf = np.log10(mag)
        np.subtract(_LOG_MANTISSA, jf, out=jf)
        np.floor(jf, out=jf)
        np.fmax(jf, 0, out=jf)  # NaN (a null) -> 0
        np.fmin(jf, np.minimum(22, 22 + k), out=jf)  # inf (a zero) -> the most decimals
        j = jf.astype(np.intp)
        s = _P10[j]
        over = (mag * s > _MANTISSA) & (j > 0)  # log10 rounded up at a boundary: one decimal less
        if over.any():
            j[over] -= 1
            s = _P10[j]
        m = np.rint(x * s)
        ok = m / s == x
        if whole is not None:
            ok &= whole
        if np.ndim(p) or p != 1:
            m *= p
        if scalar_k and k <= 0:  # k - j <= 0: one exact division
            exact = m / _P10[j - k]
        else:
            e = k - j  # in [-22, 12]
            exact = np.where(e >= 0, m * _P10[np.maximum(e, 0)], m / _P10[np.maximum(-e, 0)])
        np.copyto(plain, exact, where=ok)
    return plain


def to_canonical(values: pa.ChunkedArray, metric: pa.ChunkedArray, unit: pa.ChunkedArray,
                 source_path, locs) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """Convert values per (metric, unit) pair; returns (values, canonical units).

    Per chunk: one check per distinct pair of dictionary codes, then lookup tables indexed by
    the pair code give each row its canonical unit and exact factor; `scale` applies it.
    """
    if len(values) == 0:
        return pa.chunked_array([pa.array([], pa.float64())]), pa.chunked_array([pa.array([], pa.string())])
    known: dict[tuple[str, str | None], tuple[int, float, int, bool] | Exception] = {}
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
        lut_p = np.ones(len(lut_u))  # factor = p * 10**k (exact, see scale)
        lut_k = np.zeros(len(lut_u), dtype=np.int64)
        lut_w = np.ones(len(lut_u), dtype=bool)
        bad = []
        for j, k in enumerate(present.tolist()):
            pair = (mvals[k // width], uvals[k % width] if k % width < len(uvals) else None)
            if pair not in known:
                try:
                    cu = units.canonical_unit(*pair)
                    f = units.exact_factor(pair[0], pair[1]) if pair[1] is not None and pair[1] != cu else Fraction(1)
                    known[pair] = (names.setdefault(cu, len(names)), *split_factor(f))
                except (UnitError, SchemaError) as err:
                    known[pair] = err
            r, slot = known[pair], k if dense else j
            if isinstance(r, Exception):
                bad.append((base + int(np.argmax(key == slot)), r))
            else:
                lut_u[slot], lut_p[slot], lut_k[slot], lut_w[slot] = r
        if bad:  # the first offending row, as a row-by-row check would find it
            i, first = min(bad, key=lambda x: x[0])
            raise SchemaError(f"{where(source_path, locs, i)}: {first}") from None
        if np.all(lut_p == 1.0) and not lut_k.any():
            out_v.append(v)
        else:
            used = present if dense else np.arange(len(present))
            if len(used) == 1:  # one unit in the chunk: scalars, no per-row gathers
                fp, fk, fw = lut_p[used[0]], lut_k[used[0]], None if lut_w[used[0]] else np.zeros(len(v), bool)
            else:
                fp, fk, fw = lut_p[key], lut_k[key], None if lut_w.all() else lut_w[key]
            scaled = scale(v.to_numpy(zero_copy_only=False), fp, fk, fw)
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
