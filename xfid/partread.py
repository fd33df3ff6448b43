"""Reading a store's committed parts: the manifest's list, checked against the files before any data is read.

Every read goes through `part_files` (the catalog's list, in commit order, a committed temp
standing in for its part until its rename) and `open_parts` (each footer's row count compared
with the manifest's, page checksums verified): a flipped bit or a truncated part is an error
naming the part, never a wrong value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from xfid import sqlbackend
from xfid.errors import StoreError
from xfid.schema import SCHEMA

if TYPE_CHECKING:
    from xfid.store import Store

VERIFIED_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))
"""Reads check every page's CRC: a flipped bit is an error naming the part, never a wrong value."""


def part_files(store: Store, fidelities: Sequence[str] | None = None) -> list[Path]:
    """The committed parts (of some fidelities), in commit order; a committed temp not yet
    renamed stands in for its part."""
    q = "SELECT file, rows FROM parts"
    args: tuple[Any, ...] = ()
    if fidelities:
        q += f" WHERE fidelity IN ({','.join('?' * len(fidelities))})"
        args = tuple(fidelities)
    with store._db("read the manifest"):
        rows = store.conn.execute(q + f" ORDER BY {store.conn.rowid}", args).fetchall()
    out = []
    for file, n in rows:
        f = store.parts.stand_in(store.records / file)
        store._expected[str(f)] = (file, n)
        out.append(f)
    return out


def dataset(store: Store, fidelities: Sequence[str] | None = None) -> ds.Dataset | None:
    files = part_files(store, fidelities)
    if not files:
        return None
    missing = store.parts.missing(files, store._expected)
    if missing:
        raise StoreError(f"{missing[0]}: a part named in the manifest is missing (run `xfid doctor`)")
    return open_parts(store, files)


def open_parts(store: Store, files: Sequence[Path], fmt: ds.ParquetFileFormat = VERIFIED_PARQUET) -> ds.Dataset:
    """A dataset over some part files, Hive partitions read from their paths.

    Each part's footer row count is compared with the manifest's before any data is read.

    Raises:
        StoreError: a part whose footer does not hold the rows the manifest registered.
    """
    store.parts.first_request(files)
    # a fresh partitioning factory per dataset: discovery mutates it (threads sharing one crash)
    dset = ds.dataset([str(f) for f in files], format=fmt, filesystem=store.fs,
                      partitioning=ds.HivePartitioning.discover(infer_dictionary=True),
                      partition_base_dir=str(store.records))
    for frag in dset.get_fragments():
        want = store._expected.get(frag.path)
        if want is None:
            continue
        try:
            have = frag.metadata.num_rows
        except (pa.ArrowInvalid, OSError):
            continue  # an unreadable footer: the read names it (unreadable)
        if have != want[1]:
            raise StoreError(f"{frag.path}: this part's footer says {have} rows, the manifest registered "
                             f"{want[1]}; it was not read (run `xfid doctor`)")
    return dset


def read(store: Store, filters: dict[str, Sequence[str]] | None = None,
         columns: Sequence[str] | None = None) -> pa.Table:
    """All visible records (optionally filtered by column values) in SCHEMA column order."""
    filters = {k: v for k, v in (filters or {}).items() if v}
    cols = list(columns) if columns else list(SCHEMA.names)
    expr = None
    for k, vals in filters.items():
        e = pc.field(k).isin(list(vals))
        expr = e if expr is None else expr & e
    for attempt in range(2):  # a second try when a committed temp was renamed while we read it
        try:
            dset = store.dataset(filters.get("fidelity"))
        except (pa.ArrowInvalid, OSError):
            raise unreadable(store, store.part_files(filters.get("fidelity")), "unreadable") from None
        if dset is None:
            return SCHEMA.empty_table().select(cols)
        try:
            t = dset.to_table(columns=cols, filter=expr)
            break
        except FileNotFoundError:
            if attempt:
                raise unreadable(store, store.part_files(filters.get("fidelity")), "missing") from None
        except (pa.ArrowInvalid, OSError) as e:
            raise unreadable(store, store.part_files(filters.get("fidelity")), e) from None
    if "fidelity" in cols:
        i = t.column_names.index("fidelity")
        t = t.set_column(i, SCHEMA.field("fidelity"), t.column(i).cast(SCHEMA.field("fidelity").type))
    # one dictionary per column across all parts, so Arrow group-bys and joins work directly
    return t.unify_dictionaries()


def unreadable(store: Store, files: Sequence[Path], error: object) -> StoreError:
    """The error for a failed read of `files`: the first part that fails a full read, and why
    (else the store and `error`)."""
    bad = find_unreadable(store, files)
    return StoreError(f"{bad[0] if bad else store.location.label}: cannot read this part of the store: "
                      f"{sqlbackend.mask(bad[1] if bad else error)} (run `xfid doctor`)")


def find_unreadable(store: Store, files: Sequence[Path]) -> tuple[Path, str] | None:
    """The first part file that fails a full, checksum-verified read, and why.

    A part whose footer holds more rows than the manifest registered is named without
    being read whole.
    """
    for f in files:
        want = store._expected.get(str(f))
        try:
            with store.location.reading(f) as src, pq.ParquetFile(src, page_checksum_verification=True) as pf:
                if want is not None and pf.metadata.num_rows != want[1]:
                    return f, f"its footer says {pf.metadata.num_rows} rows, the manifest registered {want[1]}"
                for g in range(pf.num_row_groups):
                    pf.read_row_group(g)
        except (pa.ArrowInvalid, OSError) as e:
            return f, str(e)
    return None


__all__ = ["VERIFIED_PARQUET", "dataset", "find_unreadable", "open_parts", "part_files", "read", "unreadable"]
