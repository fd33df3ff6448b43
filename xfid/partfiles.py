"""Where a store's parts are written and how a commit makes them visible, per kind of location.

A directory (local or network) renames: a written temp `.tmp-<store id>-<part id>.parquet`
becomes `.tmp-….committing.parquet` once its commit attempt is recorded, and `part-<part id>.parquet`
after COMMIT. A bucket (s3://, gs://) has no rename: a part is uploaded once under its final
name `part-<store id>-<part id>.parquet`, and a commit mark under `_committing/` plays the names'
role. Both follow the one committed-file protocol of xfid.committed (which temp may be deleted,
ever); this module is the one place that knows which kind of location a store has. The Store
holds one of these as `store.parts` (`for_store`) and never asks `fs is None` itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid import committed, outfile, sqlbackend
from xfid import records as recloc
from xfid.errors import StoreError
from xfid.manifest import PART_META

if TYPE_CHECKING:
    from xfid.partwrite import PreparedSource
    from xfid.store import Store

OBJECT_PART_NAME = re.compile(r"part-([0-9a-f]{32})-([0-9a-f]{32})\.parquet")
"""`part-<store id>-<part id>.parquet`: a part in a bucket, uploaded once, visible when registered."""
CHECKS_IN_BUCKET = "_checks"
"""Where a bucket's store keeps the committed checks' rows (beside, never inside, fidelity=*)."""
VANISHED = ("this ingest's temp part vanished before its commit (was it removed by hand, or left untouched "
            "past the sweep's grace period?); nothing was committed, ingest again")


@dataclass
class ObjectSurvey:
    """A bucket's parts and commit marks, listed before the write lock (xfid.committed)."""

    listing: list[recloc.FileEntry]
    marks: dict[str, int]  # records-relative part -> its mark's size (0: committing; else committed)
    sweepable: set[str] = field(default_factory=set)  # unmarked, unregistered, expired: the sweep's candidates
    unmarked: set[str] = field(default_factory=set)  # registered parts of an older writer without a mark


def committing_part(name: str) -> bool:
    """Whether `name` is a part's committing name (`.tmp-<store>-<part>.committing.parquet`)."""
    c = committed.committing(name)
    return c is not None and re.fullmatch(r"[0-9a-f]{32}", c[1]) is not None


def for_store(store: Store) -> DirectoryParts | BucketParts:
    """The parts of `store`, as its records location keeps them."""
    return DirectoryParts(store) if store.location.fs is None else BucketParts(store)


class _Parts:
    """What both kinds share: the store, its records, its commit journal."""

    footer_protocol = committed.PROTOCOL

    def __init__(self, store: Store):
        self.store = store

    @property
    def records(self) -> Any:
        return self.store.records

    def rel(self, path: Any) -> str:
        return str(path.relative_to(self.records))

    def record_attempts(self, files: Sequence[Path]) -> None:
        """The journal's entries for these files' commit (its own short transaction, before the lock)."""
        with self.store._db("record the commit attempt"):
            committed.record_attempts(self.store.conn, [committed.attempt_key(f) for f in files])

    def unproven_committing(self, known: set[str] | None = None, objects: ObjectSurvey | None = None) -> list[str]:
        """Committing parts (records-relative) the catalog neither registers nor recorded an attempt
        for: the database is older than them (xfid.committed). List before reading the catalog."""
        found = self.committing_on_disk(objects)
        if not found:
            return []
        known = self.store.manifest_files() if known is None else known
        unknown = [f for f in found if self.rel(self.final_name(self.records / f)) not in known]
        if not unknown:
            return []
        with self.store._db("read the commit journal"):
            seen = committed.attempted(self.store.conn, [committed.attempt_key(Path(f)) for f in unknown])
        return sorted(f for f in unknown if committed.attempt_key(Path(f)) not in seen and self.still_there(f))

    # the kind-specific parts, below
    def committing_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        raise NotImplementedError

    def final_name(self, tmp: Path) -> Path:
        raise NotImplementedError

    def still_there(self, rel: str) -> bool:
        raise NotImplementedError


class DirectoryParts(_Parts):
    """Parts in a directory: written temp → committing → `part-<part id>.parquet` (renamed after COMMIT)."""

    fs = None

    @property
    def checks_root(self) -> Path:
        """The folder whose `checks/` holds the checks' rows: beside the records (so every machine
        of a team store reads them)."""
        return Path(self.records).parent

    def guarded_area(self) -> outfile.StoreArea:
        """The store's folder, its records folder and the checks beside it (xfid.outfile.guard)."""
        return outfile.store_area(self.store.root, Path(self.records))

    def readonly(self) -> bool:
        """Whether this machine may not write the records folder (a team store's check)."""
        records = Path(self.records)
        return records.exists() and not os.access(records, os.W_OK)

    def create_folder(self) -> None:
        """Make a new store's records folder (never called for an existing store's)."""
        try:
            Path(self.records).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{self.records}: cannot create the records directory: {e.strerror}") from None

    def new_part(self, fid: str) -> Path:
        """A new written temp for one fidelity (its folder made)."""
        folder = self.records / f"fidelity={fid}"
        folder.mkdir(exist_ok=True)
        return committed.written_name(folder, str(self.store.store_id))

    def final_name(self, tmp: Path) -> Path:
        """The name a written part is registered under."""
        part_id = committed.attempt_key(tmp).rsplit("-", 1)[1]
        return tmp.with_name(f"part-{part_id}.parquet")

    def twin(self, part: Path) -> Path | None:
        """The temp a committed part is renamed from (present between COMMIT and the rename)."""
        if not (part.name.startswith("part-") and self.store.store_id):
            return None
        written = committed.written_name(part.parent, self.store.store_id, part.name[5:].removesuffix(".parquet"))
        now = committed.committing_name(written)
        return now if now.exists() or not written.exists() else written  # an older xfid's committed temp

    def stand_in(self, part: Path) -> Path:
        """The file a read of a registered part opens: the part, or before its rename its committed temp."""
        if not part.exists():
            twin = self.twin(part)
            if twin is not None and twin.exists():
                return twin
        return part

    def finished(self, temps: Sequence[Path]) -> None:
        """Make the written temps durable (fsync) before their commit."""
        for tmp in temps:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())

    def touch(self, temps: Sequence[Path]) -> None:
        """Refresh finished temps' mtime, so no sweep takes them while later files are read."""
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                os.utime(tmp)

    def footer_rows_file(self, tmp: Path) -> Path:
        return tmp

    def mark_committing(self, preps: Sequence[PreparedSource]) -> None:
        """Record the commit attempt of every temp, then give each its committing name (xfid.committed)."""
        temps = [(p, fid, tmp) for p in preps for fid, tmp in p.temps.items()]
        if not temps:
            return
        self.record_attempts([t for _, _, t in temps])
        for p, fid, tmp in temps:
            if committed.committing(tmp.name):
                continue
            dest = committed.committing_name(tmp)
            try:
                os.replace(tmp, dest)
            except FileNotFoundError:
                raise StoreError(f"{tmp}: {VANISHED}") from None
            p.temps[fid] = dest

    def survey(self, sweep: bool = True) -> None:
        """A directory needs no listing before the lock (its names say what each file is)."""
        return None

    def committed_marks(self, preps: Sequence[PreparedSource]) -> None:
        """After COMMIT: nothing here (the renames say it)."""

    def committed_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committed-looking part file (`part-*`), relative to records/, sorted."""
        out: list[str] = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for d in os.scandir(self.records):
                if d.name.startswith("fidelity=") and d.is_dir():
                    out.extend(f"{d.name}/{f.name}" for f in os.scandir(d.path)
                               if f.name.startswith("part-") and f.name.endswith(".parquet"))
        return sorted(out)

    def committing_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """Every committing part file (records-relative): committed, or its commit was cut short."""
        return sorted(f"{d.name}/{f.name}" for d in _scandir(Path(self.records)) if d.name.startswith("fidelity=")
                      for f in _scandir(Path(d.path)) if committing_part(f.name))

    def still_there(self, rel: str) -> bool:
        return (self.records / rel).exists()

    def count_files(self) -> int:
        """How many part files (committed or committing) are here."""
        return len(self.committed_on_disk()) + len(self.committing_on_disk())

    def settle(self, keep: set[Path] | frozenset[Path] = frozenset(),
               objects: ObjectSurvey | None = None) -> dict[str, list[Path]]:
        """Finish the renames of committed temps and remove this store's abandoned temps (under
        the write lock): xfid.committed.settle_temps, the rule check files follow too."""
        if not self.store.store_id or not self.records.is_dir():
            return {"renamed": [], "removed": []}
        temps = [t for t in committed.find_temps(self.records, self.store.store_id, sub="fidelity=*/")
                 if committed.WRITTEN.fullmatch(t.name) or committing_part(t.name)]
        if not temps:
            return {"renamed": [], "removed": []}
        known = self.store.manifest_files()
        return committed.settle_temps(temps, self.final_name, lambda final: self.rel(final) in known, PART_META,
                                      keep=keep)

    def missing(self, files: Sequence[Path], expected: dict[str, tuple[str, int]]) -> list[Path]:
        """The registered parts that are not here."""
        return [f for f in files if not f.exists()]

    def first_request(self, files: Sequence[Path]) -> None:
        """Nothing to bound on a directory."""

    def share_check_file(self, local: Path) -> None:
        """A directory's checks/ is already where every machine reads it."""

    def fetch_check_file(self, name: str) -> None:
        """Nothing to fetch: checks/ is beside the records."""


class BucketParts(_Parts):
    """Parts in a bucket: uploaded once under their final name, a commit mark per part (xfid.committed)."""

    footer_protocol = committed.OBJECT_PROTOCOL

    @property
    def fs(self) -> Any:
        return self.store.location.fs

    @property
    def checks_root(self) -> Path:
        """The folder whose `checks/` holds this machine's copy of the checks' rows: the store."""
        return self.store.root

    def guarded_area(self) -> outfile.StoreArea:
        """The store's folder (its checks/) and the bucket's records prefix (xfid.outfile.guard)."""
        from urllib.parse import urlsplit

        scheme = urlsplit(self.store.location.label).scheme
        return outfile.store_area(self.store.root, url=f"{scheme}://{self.records}")

    def readonly(self) -> bool:
        return False

    def create_folder(self) -> None:
        """A bucket's prefix needs no folder."""

    def new_part(self, fid: str) -> Any:
        """A new part's final name (visible once registered)."""
        import uuid

        return self.records / f"fidelity={fid}" / f"part-{self.store.store_id}-{uuid.uuid4().hex}.parquet"

    def final_name(self, tmp: Any) -> Any:
        return tmp

    def twin(self, part: Any) -> None:
        return None

    def stand_in(self, part: Any) -> Any:
        return part

    def finished(self, temps: Sequence[Any]) -> None:
        """An upload is complete when its writer closes."""

    def touch(self, temps: Sequence[Any]) -> None:
        """An object's time is its upload's: a bucket's ingest commits within the grace period."""

    def mark_committing(self, preps: Sequence[PreparedSource]) -> None:
        """A bucket's commit attempt: recorded in the journal, then each part's empty mark uploaded."""
        objs = [tmp for p in preps for tmp in p.temps.values()]
        if not objs:
            return
        self.record_attempts(objs)
        for o in objs:
            try:
                self.store.location.put(committed.mark_path(self.records, self.rel(o)), b"")
            except OSError as e:
                raise StoreError(f"{self.store.location.label}: cannot write the commit mark of {o}: "
                                 f"{sqlbackend.mask(e)}; nothing was committed, ingest again") from None

    def committed_marks(self, preps: Sequence[PreparedSource]) -> None:
        """After COMMIT: each part's mark says committed (a failure leaves it to the next writer)."""
        for p in preps:
            for o in p.temps.values():
                with contextlib.suppress(OSError):
                    self.store.location.put(committed.mark_path(self.records, self.rel(o)), committed.COMMITTED_MARK)

    def survey(self, sweep: bool = True) -> ObjectSurvey:
        """A bucket's parts and marks (two listing requests) and, with `sweep`, which of this
        store's parts the sweep may take (their footers read here): call it before the lock."""
        store = self.store
        survey = ObjectSurvey(store.location.list(), store.location.list_marks())
        if not (sweep and store.store_id):
            return survey
        known = store.manifest_files()
        now = time.time()
        for e in survey.listing:
            m = OBJECT_PART_NAME.fullmatch(e.rel.split("/", 1)[1])
            if not (m and m[1] == store.store_id) or e.rel in survey.marks:
                continue
            if e.rel in known:
                survey.unmarked.add(e.rel)  # registered by a writer from before the marks: marked in settle
                continue
            if now - e.mtime <= committed.temp_grace_s():
                continue
            doc = committed.footer(self.records / e.rel, PART_META, self.fs)
            if committed.object_deletable(e.rel, survey.marks, now - e.mtime, doc):
                survey.sweepable.add(e.rel)
        return survey

    def committed_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """A `part-*` object is uploaded before its commit, so its name proves nothing: the parts
        whose mark says committed (xfid.committed)."""
        objects = objects or self.survey(sweep=False)
        listed = {e.rel for e in objects.listing}
        return sorted(r for r, size in objects.marks.items() if size and r in listed)

    def committing_on_disk(self, objects: ObjectSurvey | None = None) -> list[str]:
        """The parts whose mark is still empty: committed, or their commit was cut short."""
        objects = objects or self.survey(sweep=False)
        listed = {e.rel for e in objects.listing}
        return sorted(r for r, size in objects.marks.items() if not size and r in listed)

    def still_there(self, rel: str) -> bool:
        return True  # just listed

    def count_files(self) -> int:
        return sum(1 for e in self.store.location.list() if e.rel.endswith(".parquet"))

    def settle(self, keep: set[Path] | frozenset[Path] = frozenset(),
               objects: ObjectSurvey | None = None) -> dict[str, list[Path]]:
        """settle() on a bucket (under the write lock): a committed part's empty mark is rewritten
        (its "rename"), as is the missing mark of a registered part of an older writer; an unmarked,
        unregistered part of this store past the grace period, that the journal does not name and
        whose footer says protocol 3, goes (xfid.committed: never one that may be committed)."""
        done: dict[str, list[Path]] = {"renamed": [], "removed": []}
        if not self.store.store_id:
            return done
        objects = objects or self.survey()
        known = self.store.manifest_files()
        unmarked = {r for r in objects.unmarked if r in known}
        for rel in sorted(unmarked | {r for r, size in objects.marks.items() if not size and r in known}):
            with contextlib.suppress(OSError):  # left to the next writer
                self.store.location.put(committed.mark_path(self.records, rel), committed.COMMITTED_MARK)
                done["renamed"].append(self.records / rel)
        gone = [r for r in sorted(objects.sweepable) if r not in known and self.records / r not in keep]
        journal = committed.attempted(self.store.conn, [committed.attempt_key(Path(r)) for r in gone])
        for rel in gone:
            if committed.attempt_key(Path(rel)) in journal:
                continue  # its attempt is recorded: it may have been committed
            self.store.location.delete(self.records / rel)
            done["removed"].append(self.records / rel)
        return done

    def missing(self, files: Sequence[Any], expected: dict[str, tuple[str, int]]) -> list[Any]:
        listed = {e.rel for e in self.store.location.list()}
        return [f for f in files if expected.get(str(f), ("",))[0] not in listed]

    def first_request(self, files: Sequence[Any]) -> None:
        """The first request of every read, bounded (xfid.records.bounded): a bucket that never
        answers is an error here, not a hang; a stall later in a read ends at the client's own
        transfer timeout (S3: request_timeout; GCS: its stall timeout, ~120 s: docs/reliability.md)."""
        if files:
            self.store.location.bounded(f"read {files[0]}", self.fs.get_file_info, str(files[0]))

    def share_check_file(self, local: Path) -> None:
        """Upload a committed check's rows to the bucket (`<records>/_checks/`), for the other machines."""
        try:
            self.store.location.copy_in(local, f"{CHECKS_IN_BUCKET}/{local.name}")
        except OSError as e:
            raise StoreError(f"{self.store.location.label}: the check is recorded, but its rows could not be "
                             f"uploaded ({sqlbackend.mask(e)}): other machines cannot show them until "
                             f"{local} is copied to {CHECKS_IN_BUCKET}/ there") from None

    def fetch_check_file(self, name: str) -> None:
        """Download a check's rows from the bucket when this machine does not have them."""
        local = self.checks_root / "checks" / name
        if local.exists():
            return
        import pyarrow.fs as pafs

        remote = self.records / CHECKS_IN_BUCKET / name
        if not self.store.location.exists(remote):
            return  # checkfiles.read names what is missing
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = committed.scratch_name(local.parent, "download", ".parquet")
        pafs.copy_files(str(remote), str(tmp), source_filesystem=self.fs)
        os.replace(tmp, local)


def _scandir(path: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []


__all__ = ["CHECKS_IN_BUCKET", "OBJECT_PART_NAME", "BucketParts", "DirectoryParts", "ObjectSurvey",
           "committing_part", "for_store"]
