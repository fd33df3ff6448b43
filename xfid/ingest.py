"""Ingest: files -> adapter -> one normalizer -> temp parts -> one atomic commit."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import time
import tomllib
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
from xfid.errors import AdapterError, InputError, XfidError
from xfid.schema import canonical_json, constant_column, normalize
from xfid.store import PreparedSource, Store

SIDECAR = "xfid-source.toml"
_CONTEXT_KEYS = ("adapter", "fidelity", "target", "workload", "run")
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


def expand(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, bool]], list[tuple[str, str]]]:
    """Files to ingest, (path, explicit), and the entries left out, (path, reason).

    A directory yields the files under it, sorted; hidden entries are left out, and no
    symbolic link is followed out of the directory named (nor into a linked directory).
    """
    out: list[tuple[Path, bool]] = []
    left_out: list[tuple[str, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            files, skipped = _walk(p)
            out.extend((f, False) for f in files)
            left_out.extend(skipped)
        elif p.is_file():
            out.append((p, True))
        else:
            raise InputError(p, None, "no such file or directory")
    return out, left_out


def _walk(top: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """The regular files under `top` (links only to files inside it), and the links not followed."""
    root = top.resolve()
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for d, dirs, names in os.walk(top, followlinks=False):
        base = Path(d)
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for x in dirs:
            if (base / x).is_symlink():
                skipped.append((str(base / x), "a symbolic link to a directory: not followed"))
        for x in sorted(names):
            if x.startswith("."):
                continue
            f = base / x
            if f.is_symlink():
                target = f.resolve()
                if not target.is_relative_to(root):
                    skipped.append((str(f), f"a symbolic link out of {top}: not followed"))
                    continue
                if not target.is_file():
                    skipped.append((str(f), "a symbolic link to no regular file: not followed"))
                    continue
            elif not f.is_file():
                continue
            files.append(f)
    files.sort()
    return files, skipped


_SCALAR = (str, int, float, bool)


def load_sidecar(path: Path) -> dict[str, Any]:
    """Context for `path` from `xfid-source.toml` beside it: top-level keys, then [files."NAME"].

    Raises:
        InputError: not TOML, an unknown key, or a value of the wrong type (naming the key).
    """
    side = path.parent / SIDECAR
    if not side.is_file():
        return {}
    try:
        doc = tomllib.loads(side.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(side, None, f"not valid TOML: {e}") from None
    files = doc.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise InputError(side, "key 'files'", "must be a table of tables", '[files."NAME"] with keys for one file')
    ctx = {k: v for k, v in doc.items() if k != "files"}
    per_file = files.get(path.name, {})
    where = f'[files."{path.name}"]'
    _check_sidecar(side, ctx, "")
    _check_sidecar(side, per_file, where + ".")
    for k in ("meta", "options"):
        merged = dict(ctx.get(k, {}))
        merged.update(per_file.get(k, {}))
        if merged:
            per_file = {**per_file, k: merged}
    ctx.update(per_file)
    return ctx


def _check_sidecar(side: Path, table: Mapping[str, Any], prefix: str) -> None:
    """Each key of a sidecar table known and of its type."""
    allowed = (*_CONTEXT_KEYS, "meta", "options", "skip")
    for k, v in table.items():
        key = f"key {prefix}{k!r}" if prefix else f"key {k!r}"
        if k not in allowed:
            raise InputError(side, key, "unknown key", f"allowed: {', '.join(allowed)}")
        if k == "skip":
            if not isinstance(v, bool):
                raise InputError(side, key, f"must be true or false, got {_short(v)}", "write skip = true")
        elif k == "meta":
            bad = [m for m, x in v.items() if not isinstance(x, _SCALAR)] if isinstance(v, dict) else [None]
            if bad:
                what = "must be a table" if bad == [None] else f"value of {bad[0]!r} must be a string or number"
                raise InputError(side, key, what, 'write meta = { name = "value" }')
        elif k == "options":
            if not isinstance(v, dict):
                raise InputError(side, key, "must be a table", "write options = { name = value }")
        elif not isinstance(v, str):
            raise InputError(side, key, f"must be a string, got {_short(v)}", f'write {k} = "..."')


def _short(v: Any, limit: int = 40) -> str:
    """A value for an error message: its repr (escaped), cut to `limit` characters."""
    r = ascii(v)
    return r if len(r) <= limit else r[: limit - 3] + "..."


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


class _AlreadyIngested(Exception):
    """Internal: the hash, known once reading began, names a source the store already has."""


def prepare(store: Store, path: Path, opts: IngestOptions, explicit: bool) -> PreparedSource | FileResult | str:
    """Read one file into temp parts. Returns a prepared source, a FileResult when it is
    already ingested, or a skip reason (str) for a file found in a directory that nothing reads."""
    if not explicit and path.name in _IGNORED_NAMES:
        return "not a data file"
    side = load_sidecar(path)
    if side.get("skip") is True:
        return "skipped by xfid-source.toml"
    name = opts.adapter if opts.adapter not in (None, "auto") else side.get("adapter")
    if name:
        cls = get_adapter(name)
    else:
        try:
            cls = detect(path)
        except AdapterError:
            if explicit:
                raise
            return "no adapter recognises it"
    ctx = ReadContext(
        path=path,
        target=opts.target or side.get("target"),
        workload=opts.workload or side.get("workload"),
        run=opts.run or side.get("run"),
        fidelity=opts.fidelity or side.get("fidelity"),
        meta={**side.get("meta", {}), **opts.meta},
        options={**side.get("options", {}), **opts.options},
    )
    context = {k: getattr(ctx, k) for k in ("target", "workload", "run", "fidelity", "meta", "options")}
    extra = cls.inputs(ctx) if hasattr(cls, "inputs") else []  # other files the records come from
    hashing: Future[str] | None = None
    known = ""
    if store.has_path(str(path)):  # seen before (a re-ingest?): hash first, skip without reading
        known = inputs_hash(file_hash(path), extra)
        sid = source_id_of(known, cls.name, context)
        if store.has_source(sid):
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
        store.write_temp(prep, batches(), describe)
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
        files, left_out = expand(paths)
        report.skipped.extend(left_out)
        for i, (path, explicit) in enumerate(files):
            if progress:
                progress(path, i, len(files))
            store.keep_alive(preps)
            try:
                r = prepare(store, path, opts, explicit)
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
    except BaseException:
        for p in preps:
            store.discard(p)
        raise
    for p in preps:
        s = p.summary
        report.files.append(FileResult(p.path, p.adapter, p.source_id, rows=0 if p.already else p.rows,
                                       already=p.already, metrics=s.get("metrics", {}), nulls=s.get("nulls", {}),
                                       warnings=s.get("warnings", []), skipped_rows=s.get("skipped_rows", []),
                                       skipped_keys=s.get("skipped_keys", {})))
    report.files.sort(key=lambda f: f.path)
    return report
