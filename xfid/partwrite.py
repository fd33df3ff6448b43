"""Writing parts: a source's rows into hidden parts, then one commit that makes them visible.

The order is the committed-file protocol's (xfid.committed): parts written and made durable
outside any lock; their commit attempt recorded (and named: committing names on a directory,
empty marks on a bucket); under the write lock the catalog checked and settled, the sources
and parts registered; after COMMIT the renames (or the marks' rewrite), which a crash leaves
to the next writer. Where the store's records are decides only how a step is done
(`store.parts`, xfid.partfiles).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from xfid import committed, manifest, sqlbackend
from xfid.errors import StoreError
from xfid.manifest import PART_FORMAT, PART_META
from xfid.partfiles import VANISHED
from xfid.parts import PartWriter, WriteFailed

if TYPE_CHECKING:
    from xfid.store import Store


@dataclass
class PreparedSource:
    """One source file read and written to temp Parquet parts, not yet visible."""

    source_id: str
    path: str
    adapter: str
    options: dict[str, Any]
    content_hash: str
    rows: int = 0
    summary: dict[str, Any] = field(default_factory=dict)
    temps: dict[str, Path] = field(default_factory=dict)  # fidelity -> temp file
    already: bool = False
    ingested_at: str = ""  # set when its parts are written; the same in the manifest and the parts


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fault_point(name: str) -> None:
    """Fault injection for crash tests: env XFID_FAULT=name kills the process right here."""
    if os.environ.get("XFID_FAULT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def write_temp(store: Store, prep: PreparedSource, batches: Iterable[pa.Table],
               describe: Callable[[], dict[str, Any]] | None = None) -> None:
    """Write normalized batches into hidden temp parts, one per fidelity.

    Rows are buffered per fidelity and written as row groups of about ROW_GROUP rows,
    each sorted by target/workload/op/metric (xfid.parts), on two threads. Each part's
    footer carries its provenance (PART_META); `describe`, called once every batch is
    read, gives the source's summary that goes into it.
    """
    store.require_writable("ingest")

    def open_file(fid: str) -> Path:
        tmp = prep.temps[fid] = store.parts.new_part(fid)
        return tmp

    pw = PartWriter(open_file, filesystem=store.fs)
    try:
        for t in batches:
            pw.add(t)
        pw.finish()
        prep.rows += pw.rows
        if describe is not None:
            prep.summary = describe()
        prep.ingested_at = utc_now()
        fault_point("store.temp_written")
        pw.close(_part_meta(store, prep, pw.rows_of))
        try:
            store.parts.finished(list(prep.temps.values()))
        except OSError as e:
            raise WriteFailed() from e
    except BaseException as e:
        pw.abort()
        discard(store, prep)
        if isinstance(e, WriteFailed):
            raise write_error(store, e.__cause__ or e) from None
        raise


def _part_meta(store: Store, prep: PreparedSource, rows_of: dict[str, int]) -> Callable[[str], dict[str, str]]:
    """Each fidelity's footer metadata: the store, the part, its siblings and its source."""
    siblings = {fid: {"part": tmp.name.rsplit("-", 1)[1].removesuffix(".parquet"), "rows": rows_of.get(fid, 0)}
                for fid, tmp in prep.temps.items()}
    source = {"source_id": prep.source_id, "path": prep.path, "adapter": prep.adapter,
              "options": manifest.options_json(prep.options), "content_hash": prep.content_hash, "rows": prep.rows,
              "ingested_at": prep.ingested_at, "summary": manifest.summary_json(prep.summary)}

    def meta(fid: str) -> dict[str, str]:
        doc = {"format": PART_FORMAT, "commit_protocol": store.parts.footer_protocol, "store_id": store.store_id,
               "fidelity": fid, **siblings[fid],
               "parts": siblings, "source": source}
        return {PART_META: json.dumps(doc, sort_keys=True)}

    return meta


def keep_alive(store: Store, preps: Sequence[PreparedSource]) -> None:
    """Refresh the mtime of finished temps while later files are read, so no sweep takes them."""
    now = time.time()
    if now - store._touched < committed.temp_grace_s() / 8:
        return
    store._touched = now
    store.parts.touch([tmp for p in preps for tmp in p.temps.values()])


def write_error(store: Store, e: BaseException) -> StoreError:
    why = getattr(e, "strerror", None) or str(e)
    return StoreError(f"{store.location.label}: cannot write to the store: {sqlbackend.mask(why)} "
                      "(free disk space or raise the file-size limit; nothing was written)")


def discard(store: Store, prep: PreparedSource) -> None:
    for tmp in prep.temps.values():
        with contextlib.suppress(FileNotFoundError, StoreError):
            store.location.delete(tmp)
    prep.temps.clear()


def commit(store: Store, preps: Sequence[PreparedSource]) -> None:
    """Make every prepared source visible at once, or none. Already-ingested ones are dropped.

    Under the write lock: the catalog is checked against the parts on disk, then settled
    (see `Store.settle`), then the sources and their parts are registered. Temps are renamed to
    their part names after COMMIT; a crash before the renames leaves committed temps that
    readers use in their place and the next writer renames.
    """
    if any(p.temps for p in preps):
        store.require_writable("ingest")
    renames: list[tuple[Path, Path]] = []
    attempted = False  # True once COMMIT was sent: its outcome may be unknown, the files are kept
    try:
        fault_point("store.before_attempt")
        store.parts.mark_committing(preps)
        # everything slow before the lock (xfid.committed; a bucket's requests): the footers'
        # row counts, the bucket's listing for the sweep
        rows_of = {tmp: footer_rows(store, tmp) for p in preps for tmp in p.temps.values()}
        objects = store.parts.survey()
        with store.conn.write_tx():
            store.check_catalog(objects)
            store.settle(keep={tmp for p in preps for tmp in p.temps.values()}, objects=objects)
            for p in preps:
                if store.has_source(p.source_id):
                    p.already = True
                    discard(store, p)
                    continue
                store.conn.execute(
                    "INSERT INTO sources (source_id, path, adapter, options, content_hash, rows, ingested_at,"
                    " summary) VALUES (?,?,?,?,?,?,?,?)",
                    (p.source_id, p.path, p.adapter, manifest.options_json(p.options), p.content_hash, p.rows,
                     p.ingested_at or utc_now(), manifest.summary_json(p.summary)),
                )
                for fid, tmp in p.temps.items():
                    final = store.final_name(tmp)
                    store.conn.execute("INSERT INTO parts (file, source_id, fidelity, rows) VALUES (?,?,?,?)",
                                       (str(final.relative_to(store.records)), p.source_id, fid, rows_of[tmp]))
                    if final != tmp:
                        renames.append((tmp, final))
            fault_point("store.before_commit")
            attempted = True
    except BaseException as e:
        for p in preps:
            if not attempted:  # rolled back for certain: this writer's own files, never committed
                discard(store, p)
        if isinstance(e, OSError):
            raise write_error(store, e) from None
        if isinstance(e, sqlite3.OperationalError) and ("full" in str(e) or "disk" in str(e)):
            raise write_error(store, e) from None
        if isinstance(e, sqlbackend.errors()):
            with store._db("commit the ingest"):
                raise
        raise
    fault_point("store.before_rename")
    store.parts.committed_marks(preps)
    for tmp, final in renames:
        with contextlib.suppress(OSError):  # left to the next writer: readers use the temp meanwhile
            os.replace(tmp, final)
        fault_point("store.after_rename")
    for p in preps:
        p.temps.clear()


def footer_rows(store: Store, tmp: Path) -> int:
    """A written part's row count from its footer (read before the write lock)."""
    try:
        if store.location.object_store and not store.location.exists(tmp):
            raise FileNotFoundError(str(tmp))
        with store.location.reading(tmp) as src, pq.ParquetFile(src) as pf:  # closed: on a bucket, a connection
            return int(pf.metadata.num_rows)
    except FileNotFoundError:
        raise StoreError(f"{tmp}: {VANISHED}") from None


__all__ = ["PreparedSource", "commit", "discard", "fault_point", "footer_rows", "keep_alive", "utc_now", "write_error", "write_temp"]
