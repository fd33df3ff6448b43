"""The normalized record: one pyarrow schema, and the one normalizer every adapter goes through."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xfid import units
from xfid.convert import (
    as_counts,
    as_timestamp,
    as_values,
    check_values,
    first_null,
    null_array,
    repeated,
    to_canonical,
    zeros_index,
)
from xfid.convert import where as _where
from xfid.errors import SchemaError

FIDELITIES: tuple[str, ...] = ("roofline", "archmodel", "rtl", "measured")
"""Known fidelities, ordered low -> high. Derived labels (`roofline-cal`) rank as their base."""

_DERIVED_FIDELITY = re.compile(r"^(roofline|archmodel|rtl|measured)-[a-z0-9][a-z0-9_.-]*$")
STAT_RE = re.compile(r"^(value|mean|median|std|min|max|sum|p\d+(\.\d+)?)$")

_D = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema(
    [
        ("fidelity", _D),
        ("target", _D),
        ("workload", _D),
        ("op", _D),
        ("metric", _D),
        ("stat", _D),
        ("value", pa.float64()),
        ("unit", _D),
        ("n_samples", pa.int64()),
        ("source", _D),
        # Strings that repeat across rows are dictionary-encoded too (they read as plain
        # strings in DuckDB/Spark; in memory they cost one index per row, not one string).
        ("source_id", _D),
        ("source_path", _D),
        ("source_loc", pa.string()),
        ("run", _D),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("hardware", _D),
        ("software", _D),
        ("config", _D),
        # extensions (extend the vocabulary, never rename a metric)
        ("null_reason", _D),  # why `value` is null ("n/a in file", "[N/A]", sentinel ...)
        ("flags", _D),  # comma-separated: invalid, failed_test, failed_requests, ...
    ]
)
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
KEY_COLUMNS = ("target", "workload", "op", "metric", "stat")
REQUIRED = ("fidelity", "target", "workload", "op", "metric", "value")
PROVENANCE = ("source", "source_id", "source_path")
FLAG_NO_REFERENCE = ("invalid", "failed_test")
"""Flags that forbid a number from ever serving as a reference."""
KEY_CAP = 4 << 10
"""Longest key or name (target, workload, op, metric, stat, unit, run, ...), in UTF-8 bytes."""
PROVENANCE_CAP = 64 << 10
"""Longest provenance string (source_path, source_loc, config), in UTF-8 bytes."""
_LONG_TEXT = ("source_path", "source_loc", "config")


def fidelity_rank(fidelity: str) -> int:
    """Rank of a fidelity (0 = roofline ... 3 = measured); derived labels rank as their base."""
    base = fidelity.split("-", 1)[0]
    if base not in FIDELITIES:
        raise SchemaError(f"unknown fidelity {fidelity!r}; use one of {', '.join(FIDELITIES)}")
    return FIDELITIES.index(base)


def is_valid_fidelity(fidelity: str) -> bool:
    return fidelity in FIDELITIES or bool(_DERIVED_FIDELITY.match(fidelity))


def canonical_json(obj: Mapping[str, Any] | None) -> str | None:
    """Canonical JSON for the `config` column: sorted keys, no spaces."""
    if not obj:
        return None
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()


LOC_META = b"xfid.source_loc"
"""Schema metadata of a batch without a `source_loc` column: b"WORD START" says that the
source_loc of row i is f"{WORD} {START + i}" (e.g. "line 2", "line 3", ...). The store builds
those strings after sorting, from the permuted row numbers, instead of gathering strings."""


def with_lazy_loc(table: pa.Table, word: str, start: int) -> pa.Table:
    """`table` (without source_loc) marked so that row i's source_loc is f"{word} {start + i}"."""
    return table.replace_schema_metadata({LOC_META: f"{word} {start}".encode()})


def lazy_loc(table: pa.Table) -> tuple[str, int] | None:
    """(word, start) when `table` carries a lazy source_loc (see LOC_META), else None."""
    meta = table.schema.metadata or {}
    if LOC_META not in meta:
        return None
    word, start = meta[LOC_META].decode().rsplit(" ", 1)
    return word, int(start)


def loc_strings(word: str, numbers: np.ndarray) -> pa.Array:
    """The source_loc strings f"{word} {n}" for an array of numbers."""
    numbers = np.asarray(numbers)
    nums = pc.cast(pa.array(numbers if numbers.dtype in (np.int32, np.int64) else numbers.astype(np.int64)), pa.string())
    return pc.binary_replace_slice(nums, 0, 0, f"{word} ")  # a prefix: one pass over the bytes


def normalize(
    data: pa.Table | Any,
    *,
    source_path: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    keep_lazy_loc: bool = False,
) -> pa.Table:
    """Validate records and return them in exactly `SCHEMA`, values in canonical units.

    Args:
        data: a pyarrow Table or a pandas DataFrame with at least the REQUIRED columns
            (`defaults` may supply a missing required column as a constant).
        source_path: the file the records came from, named in errors.
        defaults: constants for columns that are missing or null (e.g. target from `--target`).
        keep_lazy_loc: for a batch with a lazy source_loc (LOC_META), leave the column null and
            keep the marker, so the store builds the strings after sorting; by default they are
            built here.

    Returns:
        A table with SCHEMA. A non-canonical `unit` is converted and replaced by the canonical one.

    Raises:
        SchemaError: a missing column, wrong type, unknown fidelity/metric/stat, non-finite
            value, null value without a reason, or a unit that does not belong to the metric.
    """
    if isinstance(data, Mapping):
        data = _table_from_columns(data, source_path)
    elif not isinstance(data, pa.Table):
        data = pa.Table.from_pandas(data, preserve_index=False)
    n = data.num_rows
    defaults = dict(defaults or {})
    lazy = None if "source_loc" in data.column_names else lazy_loc(data)
    locs = data.column("source_loc") if "source_loc" in data.column_names else lazy
    unknown = [c for c in data.column_names if c not in COLUMNS]
    if unknown:
        raise SchemaError(
            f"{source_path or '<records>'}: unknown column(s) {', '.join(map(repr, unknown))}; "
            f"the normalized schema has {', '.join(COLUMNS)}"
        )
    cols: dict[str, pa.ChunkedArray] = {}
    for name in COLUMNS:
        plain = _plain(SCHEMA.field(name).type)
        if name in data.column_names:
            col = data.column(name)
            if pa.types.is_null(col.type):
                col = col.cast(plain)
        else:  # already in the schema's type: nothing to encode or cast later
            col = pa.chunked_array([null_array(SCHEMA.field(name).type, n)])
        default = defaults.get(name)
        if default is not None and col.null_count:
            if col.null_count == n:
                col = constant_column(name, _conv_default(name, default), n)
            else:
                if pa.types.is_dictionary(col.type):
                    col = col.cast(plain)
                col = pc.fill_null(col, pa.scalar(_conv_default(name, default), col.type))
        cols[name] = col
    missing = [(name, first_null(cols[name])) for name in ("fidelity", "target", "workload", "op", "metric")
               if cols[name].null_count]
    if missing:
        raise _missing_error(missing, source_path, locs)
    for name in _TEXT:
        cols[name] = _as_text(cols[name], name, source_path)
        _check_length(cols[name], name, source_path, locs)
    if cols["stat"].null_count == n:
        cols["stat"] = constant_column("stat", "value", n)
    elif cols["stat"].null_count:
        cols["stat"] = pc.fill_null(cols["stat"].cast(pa.string()), "value")
    # plain strings become dictionaries once, up front (two threads for big batches): the
    # checks and unit conversion below then work on small dictionaries and integer codes
    plain_text = [k for k in _TEXT if k != "source_loc" and not pa.types.is_dictionary(cols[k].type)]
    for k, c in zip(plain_text, _map(_encode, [cols[k] for k in plain_text], n), strict=True):
        cols[k] = c
    check_values(cols["fidelity"], is_valid_fidelity, "fidelity",
                 f"use one of {', '.join(FIDELITIES)} (or a derived label like roofline-cal)", source_path, locs)
    check_values(cols["metric"], units.is_known_metric, "metric",
                 f"use one of {', '.join(sorted(units.METRICS))}, or tool:name", source_path, locs)
    check_values(cols["stat"], lambda s: bool(STAT_RE.match(s)), "stat",
                 "use value, mean, median, std, min, max or pNN", source_path, locs)
    value = as_values(cols["value"], source_path, locs)
    if value.null_count:
        no_reason = pc.and_(value.is_null(), cols["null_reason"].is_null())
        if pc.any(no_reason).as_py():
            i = pc.index(no_reason, True).as_py()
            raise SchemaError(f"{_where(source_path, locs, i)}: 'value' is missing and no null_reason says why")
    cols["value"], cols["unit"] = to_canonical(value, cols["metric"], cols["unit"], source_path, locs)
    _check_sign(cols["value"], cols["metric"], source_path, locs)
    cols["n_samples"] = as_counts(cols["n_samples"], source_path, locs)
    cols["timestamp"] = as_timestamp(cols["timestamp"], source_path)
    if lazy is not None and not keep_lazy_loc:
        cols["source_loc"] = pa.chunked_array([loc_strings(lazy[0], np.arange(lazy[1], lazy[1] + n))])
    out = []
    for name in COLUMNS:
        t = SCHEMA.field(name).type
        c = cols[name]
        if pa.types.is_dictionary(t):
            c = c if c.type == t else pc.dictionary_encode(c.cast(pa.string())).cast(t)
        else:
            c = c.cast(t)
        out.append(c)
    table = pa.Table.from_arrays(out, schema=SCHEMA)
    return with_lazy_loc(table, *lazy) if lazy is not None and keep_lazy_loc else table


def _check_length(col: pa.ChunkedArray, name: str, source_path: str | None, locs) -> None:
    """Every string of a text column within its cap (KEY_CAP or PROVENANCE_CAP), or an error
    naming the first row over it: one oversized name must not cost gigabytes downstream."""
    cap = PROVENANCE_CAP if name in _LONG_TEXT else KEY_CAP
    base = 0
    for chunk in col.chunks:
        values = chunk.dictionary if isinstance(chunk, pa.DictionaryArray) else chunk
        if values.nbytes > cap:  # else no string in it can be longer
            lens = pc.binary_length(values)
            if (pc.max(lens).as_py() or 0) > cap:
                over = pc.greater(lens, cap)
                if isinstance(chunk, pa.DictionaryArray):  # the first row using a long entry
                    rows = pc.is_in(chunk.indices, pc.indices_nonzero(over).cast(chunk.indices.type))
                    i = pc.index(rows, True).as_py()
                    size = lens[chunk.indices[i].as_py()].as_py() if i >= 0 else 0
                else:
                    i = pc.index(over, True).as_py()
                    size = lens[i].as_py() if i >= 0 else 0
                if i >= 0:
                    kind = "a provenance string" if name in _LONG_TEXT else "a key or name"
                    raise SchemaError(
                        f"{_where(source_path, locs, base + i)}: {name!r} is {size:,} bytes long; {kind} may "
                        f"be at most {cap:,} bytes ({cap >> 10} KiB) (shorten it; long free text belongs "
                        "in a file beside the data, not in a record)"
                    )
        base += len(chunk)


def _check_sign(value: pa.ChunkedArray, metric: pa.ChunkedArray, source_path: str | None, locs) -> None:
    """No negative value for a metric that cannot be negative (a time, an energy, a rate, a count)."""
    low = pc.min(value).as_py()  # one pass, no temporary
    if low is None or low >= 0:
        return
    rows = pc.indices_nonzero(pc.fill_null(pc.less(value, 0.0), False))
    names = pc.take(metric, rows).cast(pa.string()).to_pylist()
    for i, m in zip(rows.to_pylist(), names, strict=True):
        if units.is_non_negative(m):
            dim = units.METRICS[m].replace("_", " ")
            raise SchemaError(
                f"{_where(source_path, locs, i)}: 'value' is {value[i].as_py()!r} for metric {m!r}, which "
                f"cannot be negative (a {dim} quantity); check the sign and the column the number came from"
            )


def _encode(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.dictionary_encode(col).cast(_D)


def _map(fn, items: list, n: int) -> list:
    """fn over items, on two threads when the batch is big (Arrow kernels release the GIL)."""
    if n < 100_000 or len(items) < 2:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(fn, items))


def _table_from_columns(cols: Mapping[str, Any], source_path: str | None) -> pa.Table:
    """A dict of Python lists/arrays (what simple adapters build) as a Table."""
    arrays = {}
    for name, vals in cols.items():
        if isinstance(vals, (pa.Array, pa.ChunkedArray)):
            arrays[name] = vals
            continue
        t = _plain(SCHEMA.field(name).type) if name in COLUMNS else None
        try:
            arrays[name] = pa.array(vals, type=t) if t is not None else pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            if name == "timestamp":
                arrays[name] = pa.array(vals)
                continue
            raise SchemaError(f"{source_path or '<records>'}: column {name!r} has values of the wrong type ({e})") from None
    return pa.table(arrays)


_TEXT = ("fidelity", "target", "workload", "op", "metric", "stat", "unit", "source", "source_id",
         "source_path", "source_loc", "run", "hardware", "software", "config", "null_reason", "flags")


def constant_column(name: str, value: Any, n: int) -> pa.ChunkedArray:
    """A column holding one value n times, built without materialising n copies where possible."""
    t = SCHEMA.field(name).type
    if pa.types.is_dictionary(t):
        dictionary = pa.array([value], pa.string())
        return pa.chunked_array([pa.DictionaryArray.from_arrays(zeros_index(n), dictionary, safe=False)])
    return pa.chunked_array([repeated(pa.scalar(value, t), n)])


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


CONTEXT_FIELDS = ("fidelity", "target", "workload")
"""The fields a file may leave to the caller: ingest's parameters (--target ... on the command line)."""


def _missing_error(missing: list[tuple[str, int]], source_path: str | None, locs: Any) -> SchemaError:
    """Every missing field at once, each at its record's place (the record's line or row, not the
    key of the value it was read from: the field is what is missing there, e.g. no `$.target`)."""
    base = source_path or "<records>"
    places = {name: _record_loc(locs, i) for name, i in missing}
    if len(set(places.values())) == 1:
        loc = next(iter(places.values()))
        said = f"{base}{', ' + loc if loc else ''}: missing {_and([repr(n) for n in places])}"
    else:
        said = f"{base}: missing " + _and([f"{n!r} ({loc or 'the file'})" for n, loc in places.items()])
    names = [n for n, _ in missing]
    context = [n for n in names if n in CONTEXT_FIELDS]
    fixes = []
    if context:
        fixes.append(f"pass {_and(['{' + n + '}' for n in context])} or set "
                     f"{'it' if len(context) == 1 else 'them'} in xfid-source.toml beside the file")
    if "op" in names:
        fixes.append('use op "" for an end-to-end metric')
    if "metric" in names:
        fixes.append("every record needs a metric")
    if not context:
        return SchemaError(f"{said} ({'; '.join(fixes)})")
    return SchemaError(said.replace("{", "{{").replace("}", "}}") + f" ({'; '.join(fixes)})", params=tuple(context))


def _record_loc(locs: Any, i: int) -> str:
    """Row i's place (`line N`, `record N`) without the value's key (`: $.duration`, `, column 'value'`)."""
    if isinstance(locs, tuple):
        return f"{locs[0]} {locs[1] + i}"
    loc = locs[i].as_py() if isinstance(locs, pa.ChunkedArray) and i < len(locs) else None
    if loc is None:
        return f"record {i + 1}"
    return re.sub(r"^\$.*|: .*$|, column .*$", "", str(loc))


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _conv_default(name: str, value: Any) -> Any:
    if name == "config" and isinstance(value, Mapping):
        return canonical_json(value)
    return str(value) if name not in ("n_samples", "value", "timestamp") else value


def _as_text(col: pa.ChunkedArray, name: str, source_path: str | None) -> pa.ChunkedArray:
    t = col.type
    if pa.types.is_dictionary(t) and pa.types.is_string(t.value_type):
        return col
    if pa.types.is_dictionary(t):
        t = t.value_type
        col = col.cast(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return col.cast(pa.string())
    raise SchemaError(
        f"{source_path or '<records>'}: column {name!r} must hold text, got {t}"
        " (quote the values, e.g. workload \"NA\" or op \"1\")"
    )


STACK_HINTS = ("version", "vllm", "sglang", "trtllm", "driver", "cuda", "model", "precision", "dtype", "clock",
               "engine", "gpu", "commit")
"""Config keys shown first when a side's config changed (the software stack and the conditions)."""
