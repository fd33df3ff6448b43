"""Ingest: files -> adapter -> one normalizer -> temp parts -> one atomic commit."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from xfid.adapters import detect, get_adapter
from xfid.adapters.base import ReadContext, iter_batches
from xfid.errors import AdapterError, InputError, Interrupted, XfidError
from xfid.ingest_tree import SIDECAR, check_name, check_value, expand, load_sidecar
from xfid.schema import canonical_json, constant_column, normalize
from xfid.store import PreparedSource, Store

_IGNORED_NAMES = {SIDECAR, "README.md", "README", "README.txt", ".gitignore"}


@dataclass
class IngestOptions:
    """What the user said on the command line; flags supply what a file does not carry."""

    adapter: str | None = None  # None or "auto": sniff
    fidelity: str | None = None
    target: str | None = None
    workload: str | None = None
    run: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileResult:
    path: str
    adapter: str
    source_id: str
    rows: int = 0
    already: bool = False
    metrics: dict[str, int] = field(default_factory=dict)
    nulls: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped_rows: list[tuple[str, str]] = field(default_factory=list)
    skipped_keys: dict[str, int] = field(default_factory=dict)


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files if not f.already)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "files": [vars(f) for f in self.files],
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped]}


def source_id_of(content_hash: str, adapter: str, context: Mapping[str, Any]) -> str:
    blob = json.dumps({"h": content_hash, "a": adapter, "o": context}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def inputs_hash(main: str, extra: Sequence[Path]) -> str:
    """The content hash of a source read from `main` (its hash) and the `extra` files beside it."""
    if not extra:
        return main
    parts = [main, *(f"{f.name}:{file_hash(f)}" for f in extra)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _merge_meta(table: pa.Table, meta: Mapping[str, str]) -> pa.Table:
    """Merge `--meta k=v` into every row's canonical-JSON `config`."""
    col = table.column("config")
    enc = pc.dictionary_encode(col.cast(pa.string())).combine_chunks()
    new = [canonical_json({**(json.loads(v) if v else {}), **meta}) for v in enc.dictionary.to_pylist()]
    if enc.null_count:
        idx = pc.fill_null(enc.indices, len(new))
        new.append(canonical_json(dict(meta)))
    else:
        idx = enc.indices
    merged = pa.DictionaryArray.from_arrays(idx.cast(pa.int32()), pa.array(new, pa.string()))
    i = table.column_names.index("config")
    return table.set_column(i, table.schema.field(i), merged)


MAX_ERROR_CHARS = 600
"""An error about a file's content is cut to this length: an excerpt, never the file."""


def _bounded(e: XfidError) -> XfidError:
    """The error (changed in place) with control characters and bidi overrides escaped and its
    length bounded: a message may quote a file, never print it."""
    msg = str(e)
    clean = "".join(c if c.isprintable() or c in "\n\t" else ascii(c)[1:-1] for c in msg)
    if len(clean) > MAX_ERROR_CHARS:
        clean = clean[: MAX_ERROR_CHARS - 30] + f"... ({len(clean)} characters in all)"
    if clean != msg:
        e.args = (clean,)
    return e


def check_options(opts: IngestOptions) -> None:
    """The command line's context checked as a sidecar's is: known fidelity, no empty or
    overlong names, bounded meta and option values.

    Raises:
        InputError: naming the flag.
    """
    for k in ("target", "workload", "run", "fidelity"):
        v = getattr(opts, k)
        if v is not None:
            check_name(k, v, f"--{k}", None)
    for flag, table in (("--meta", opts.meta), ("--option", opts.options)):
        for m, x in table.items():
            check_value(x, f"{flag} {m}", None, flag.lstrip("-"))


def _same_fidelity(path: Path, table: pa.Table, fidelity: str) -> None:
    """Refuse `--fidelity` that a file giving its own fidelity per row would silently ignore
    (each such run a new source of the same rows)."""
    said = [f for f in pc.unique(table.column("fidelity").cast(pa.string())).to_pylist() if f != fidelity]
    if said:
        raise InputError(path, None, f"the file gives fidelity {said[0]!r} for its rows, so --fidelity / "
                         f"fidelity = {fidelity!r} would be ignored",
                         "leave --fidelity out (this adapter reads the fidelity from the file) or correct the file")


class _AlreadyIngested(Exception):
    """Internal: the hash, known once reading began, names a source the store already has."""


def _stamp(paths: Sequence[Path]) -> list[tuple[int, int, int]]:
    """What changes when a file is written: size, modification time (ns) and inode of each."""
    out = []
    for p in paths:
        st = os.stat(p)
        out.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return out


def _unchanged(path: Path, files: Sequence[Path], before: list[tuple[int, int, int]]) -> None:
    """Refuse a source whose files changed while they were hashed and read: the hash would not
    describe the rows stored, and the finished file would later be stored again in full.

    Raises:
        InputError: naming the file that changed, with its size before and after.
    """
    try:
        after = _stamp(files)
    except OSError:
        after = []
    for f, b, a in zip(files, before, after + [None] * (len(before) - len(after)), strict=True):
        if a != b:
            now = f"{a[0]:,} bytes" if a else "gone"
            raise InputError(f, None, f"changed while it was read ({b[0]:,} bytes before, {now} after): "
                             "nothing of it was stored",
                             "ingest it again once whatever writes it has finished")


def prepare(store: Store, path: Path, opts: IngestOptions, explicit: bool,
            root: Path | None = None, roots: tuple[Path, ...] = ()) -> PreparedSource | FileResult | str:
    """Read one file into temp parts. Returns a prepared source, a FileResult when it is
    already ingested, or a skip reason (str) for a file found in a directory that nothing reads.

    Only files inside the trees given are read: the sidecar beside it inside its own tree
    `root` (default: the file's folder), any file an option names inside `roots` (every tree
    of this ingest; see xfid.ingest_tree)."""
    if not explicit and path.name in _IGNORED_NAMES:
        return "not a data file"
    root = root if root is not None else path.absolute().parent.resolve()
    side = load_sidecar(path, root)
    if side.get("skip") is True:
        return "skipped by xfid-source.toml"
    name = opts.adapter if opts.adapter not in (None, "auto") else side.get("adapter")
    if name:
        cls = get_adapter(name)
    else:
        try:
            cls = detect(path)
        except AdapterError as e:
            if explicit:
                raise
            return getattr(e, "reason", "no adapter recognises it")  # a known unread format says which
    ctx = ReadContext(
        path=path,
        target=opts.target or side.get("target"),
        workload=opts.workload or side.get("workload"),
        run=opts.run or side.get("run"),
        fidelity=opts.fidelity or side.get("fidelity"),
        meta={**side.get("meta", {}), **opts.meta},
        options={**side.get("options", {}), **opts.options},
        roots=roots or (root,),
    )
    context = {k: getattr(ctx, k) for k in ("target", "workload", "run", "fidelity", "meta", "options")}
    extra = cls.inputs(ctx) if hasattr(cls, "inputs") else []  # other files the records come from
    watched = [path, *extra]
    before = _stamp(watched)  # the bytes hashed must be the bytes read: see _unchanged
    hashing: Future[str] | None = None
    known = ""
    if store.has_path(str(path)):  # seen before (a re-ingest?): hash first, skip without reading
        known = inputs_hash(file_hash(path), extra)
        sid = source_id_of(known, cls.name, context)
        if store.has_source(sid):
            _unchanged(path, watched, before)
            return FileResult(str(path), cls.name, sid, already=True)
    else:  # a new path: hash the bytes on a thread while the adapter reads them
        pool = ThreadPoolExecutor(1, "xfid-hash")
        hashing = pool.submit(file_hash, path)
        pool.shutdown(wait=False)  # the thread ends with the hash
    prep = PreparedSource("", str(path), cls.name, context, "")
    defaults = {
        "fidelity": ctx.fidelity or cls.fidelity, "target": ctx.target, "workload": ctx.workload,
        "source": cls.name, "source_path": str(path),
        "timestamp": pa.scalar(int(time.time() * 1e6), pa.timestamp("us", tz="UTC")),
    }
    metrics: Counter[str] = Counter()
    nulls: Counter[str] = Counter()

    def identify() -> None:
        """The source id (once the hash is known) and the defaults that name it."""
        if prep.source_id:
            return
        prep.content_hash = inputs_hash(hashing.result(), extra) if hashing is not None else known
        prep.source_id = source_id_of(prep.content_hash, cls.name, context)
        defaults.update(source_id=prep.source_id, run=ctx.run or f"src-{prep.source_id[:10]}")
        if store.has_source(prep.source_id):
            raise _AlreadyIngested()

    def batches() -> Iterable[pa.Table]:
        adapter = cls()
        for b in iter_batches(adapter.read(ctx)):
            identify()
            t = normalize(b, source_path=str(path), defaults=defaults, keep_lazy_loc=True)
            if ctx.fidelity and cls.fidelity is not None:  # --fidelity overrides a fixed-fidelity adapter
                t = t.set_column(0, "fidelity", constant_column("fidelity", ctx.fidelity, t.num_rows))
            elif ctx.fidelity:  # the file gives each row's fidelity: the flag only fills rows that do not
                _same_fidelity(path, t, ctx.fidelity)
            if ctx.meta:
                t = _merge_meta(t, ctx.meta)
            for r in pc.value_counts(t.column("metric")).to_pylist():
                metrics[r["values"]] += r["counts"]
            if t.column("value").null_count:
                for r in pc.value_counts(pc.filter(t.column("null_reason"), t.column("value").is_null())).to_pylist():
                    nulls[r["values"] or "?"] += r["counts"]
            yield t
        identify()

    def describe() -> dict[str, Any]:
        return {"metrics": dict(metrics), "nulls": dict(nulls), "warnings": ctx.warnings,
                "skipped_rows": ctx.skipped[:100], "skipped_rows_total": len(ctx.skipped),
                "skipped_keys": ctx.skipped_keys}

    try:
        try:
            store.write_temp(prep, batches(), describe)
            if hashing is not None:
                hashing.result()
            _unchanged(path, watched, before)
        except BaseException:
            store.discard(prep)  # the temps of a file refused or interrupted go at once
            raise
    except _AlreadyIngested:
        return FileResult(str(path), cls.name, prep.source_id, already=True)
    except XfidError:
        raise
    except csv.Error as e:  # e.g. a field over Python's csv limit: binary or corrupt input
        raise InputError(path, None, f"not well-formed CSV for {cls.name}: {e}",
                         f"check that it is a {cls.formats} file") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError, UnicodeError,
            pa.ArrowException) as e:
        raise InputError(path, None, f"{cls.name} could not read this file: {type(e).__name__}: {e}",
                         f"check that it is a {cls.formats} file") from None
    return prep


def ingest(store: Store, paths: Iterable[str | Path], opts: IngestOptions,
           progress: Callable[[Path, int, int], None] | None = None) -> IngestReport:
    """Ingest files (all or nothing). Re-ingesting the same bytes with the same context is a no-op.

    Raises:
        XfidError: any file is unreadable; nothing is written to the store.
    """
    report = IngestReport()
    preps: list[PreparedSource] = []
    try:
        check_options(opts)
        files, left_out = expand(paths)
        report.skipped.extend(left_out)
        roots = tuple(dict.fromkeys(f.root for f in files))
        for i, found in enumerate(files):
            path = found.path
            if progress:
                progress(path, i, len(files))
            store.keep_alive(preps)
            try:
                r = prepare(store, path, opts, found.explicit, found.root, roots)
            except XfidError as e:
                raise _bounded(e) from None
            if isinstance(r, str):
                report.skipped.append((str(path), r))
            elif isinstance(r, FileResult):
                report.files.append(r)
            else:
                preps.append(r)
        # Energy hook (xfid/power.py): runs that now hold both a power log and a benchmark
        # result get derived energy / tokens-per-joule records, committed atomically with them.
        from xfid.power import derive_energy_sources

        preps.extend(derive_energy_sources(store, preps))
        store.commit(preps)
    except BaseException as e:
        kept = _discard_uncommitted(store, preps)
        if isinstance(e, KeyboardInterrupt) and not isinstance(e, Interrupted):
            raise _interrupted(preps, kept) from None
        raise
    for p in preps:
        s = p.summary
        report.files.append(FileResult(p.path, p.adapter, p.source_id, rows=0 if p.already else p.rows,
                                       already=p.already, metrics=s.get("metrics", {}), nulls=s.get("nulls", {}),
                                       warnings=s.get("warnings", []), skipped_rows=s.get("skipped_rows", []),
                                       skipped_keys=s.get("skipped_keys", {})))
    report.files.sort(key=lambda f: f.path)
    return report


def _committed(store: Store, tmp: Path) -> bool:
    """Whether the catalog registers the part `tmp` becomes (then `tmp` is data, not litter).

    When the catalog cannot be asked (a lost server), the answer is "maybe": True, so the temp
    is kept and left to the next writer's sweep, which decides with the database.
    """
    try:
        name = str(store.final_name(tmp).relative_to(store.records))
        with store._db("read the manifest"):
            return store.conn.execute("SELECT 1 FROM parts WHERE file=?", (name,)).fetchone() is not None
    except Exception:
        return True


def _discard_uncommitted(store: Store, preps: list[PreparedSource]) -> list[PreparedSource]:
    """Remove this ingest's temps, except those the catalog holds: a Ctrl-C (or error) that comes
    after COMMIT but before the renames must not delete committed data. Returns the preps kept."""
    kept = []
    for p in preps:
        if p.temps and any(_committed(store, t) for t in p.temps.values()):
            p.temps.clear()  # committed: the next writer renames them; readers use them meanwhile
            kept.append(p)
        else:
            store.discard(p)
    return kept


def _interrupted(preps: list[PreparedSource], committed: list[PreparedSource]) -> Interrupted:
    """What a Ctrl-C during ingest left: nothing (its temps were removed) or everything."""
    if committed:
        return Interrupted(f"after the commit: {len(committed)} file(s) are in the store; "
                           "their parts keep temporary names until the next writer (or `xfid doctor --repair`) "
                           "renames them; readers already use them. Nothing needs to be done.")
    return Interrupted(f"nothing was ingested ({len(preps)} file(s) were prepared; their "
                       "temporary parts were removed - any that could not be are swept by the next "
                       "writer after the grace period). Run the same ingest again.")
