"""The catalog against the files beside it: is this database the one these files belong to?

A `part-*` file (on a bucket: a part whose mark says committed) and a `check-*` file are
always committed, and a committing one may be (xfid.committed). One that the database does not
know means the database is not the one these files belong to (missing, emptied, another
store's, or an older copy): every command stops with a CatalogMismatch instead of acting on it.
Parts and check files (xfid.tracker.checkfiles) word it with the one `why_unknown`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xfid.errors import StoreError
from xfid.manifest import read_part_meta

if TYPE_CHECKING:
    from xfid.partfiles import ObjectSurvey
    from xfid.store import Store


class CatalogMismatch(StoreError):
    """The database does not describe the part files beside it (missing, empty, foreign or older)."""


def why_unknown(n: str, other: str | None, store_id: str | None, none_known: bool, empty: str, newer: str) -> str:
    """Why a database does not name files it should: another store's, empty, or older than them.

    Args:
        n: "<count> <files> here, e.g. <first>,".
        other: the store id in the first file's footer.
        none_known: the database names none of its kind.
        empty / newer: how an empty database is said ("is empty") and what the files are ("the parts").
    """
    if other and store_id and other != store_id:
        return (f"belongs to another store (id {store_id[:12]}): {n} were written by store {other[:12]} "
                "(was xfid.db copied from elsewhere?)")
    if none_known:
        return f"{empty}: {n} are not in it"
    return f"is older than {newer}: {n} are not in it (was xfid.db restored from an older copy?)"


def manifest_files(store: Store) -> set[str]:
    """Every part file this catalog knows: the registered ones and those of removed sources."""
    with store._db("read the manifest"):
        return {r[0] for r in store.conn.execute("SELECT file FROM parts")} | removed_files(store)


def removed_files(store: Store) -> set[str]:
    """The parts of removed sources (xfid.removal): this store's files, read by no one."""
    from xfid import removal_db as removal

    store._removals = store._removals or removal.has_tables(store.conn)  # tables are never dropped
    return removal.removed_files(store.conn) if store._removals else set()


def check(store: Store, objects: ObjectSurvey | None = None) -> None:
    """Raise CatalogMismatch when a committed part on disk is not in the manifest.

    Parts are renamed into place only after their commit, so listing the files first and
    reading the manifest second never mistakes a concurrent writer's part for a stranger.
    On a bucket the marks play the names' role (xfid.committed); `objects`: a listing taken
    before the lock (else one is taken now).
    """
    if objects is None:
        objects = store.parts.survey(sweep=False)  # a bucket's listing (None: a directory's names)
    on_disk = store.parts.committed_on_disk(objects)
    known = manifest_files(store)
    unknown = [f for f in on_disk if f not in known]
    unknown += store.parts.unproven_committing(known, objects)  # listed before its journal is read
    if unknown:
        raise mismatch(store, unknown, len(known))


def matches(store: Store) -> bool:
    """Whether the catalog describes the parts on disk (a store id is given only then)."""
    try:
        check(store)
    except CatalogMismatch:
        return False
    return True


def mismatch(store: Store, unknown: Sequence[str], known: int) -> CatalogMismatch:
    """The error for committed parts the manifest does not know: what happened, and the fix."""
    first = store.records / unknown[0]
    other = read_part_meta(first, store.location).get("store_id")
    why = why_unknown(f"{len(unknown)} part file(s) here, e.g. {first},", other, store.store_id, known == 0,
                      "is empty", "the parts")
    return CatalogMismatch(f"{store.db_label}: the store database {why}; " + store.rebuild_hint)


def files_beside(store: Store) -> str:
    """What only a database could have written here: committed parts, saved check rows ("" if none)."""
    parts = store.parts.count_files()
    checks = len(list((store.root / "checks").glob("check-*.parquet"))) \
        if (store.root / "checks").is_dir() and not store.team else 0
    found = [f"{parts} part files in {store.location.label}" if parts else "",
             f"{checks} check files in checks/" if checks else ""]
    return " and ".join(x for x in found if x)


__all__ = ["CatalogMismatch", "check", "files_beside", "manifest_files", "matches", "mismatch", "removed_files",
           "why_unknown"]
