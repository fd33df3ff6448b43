"""One records location per store: which folder or bucket holds this store's parts.

A store's id (`store_meta.store_id`) is written, at creation, into `.xfid-store-id` at its
records location, and a team store's catalog also records that location (`store_meta.records`).
A writer opens the store only when the id file at its records location names the store:

- another id there: that location is another store's;
- no id file, and no folder at all: an unmounted share or a moved records folder (the
  folders are never created for an existing store, so nothing lands on a local disk);
- no id file in a folder that is there: the store is adopted (the id written) only when the
  location is verifiably this store's: every part the catalog registers is found there (a
  store from before id files), or the catalog registers none and (team stores) the location
  is the one recorded in the catalog. Otherwise it is refused.

Refusals name both locations (credentials masked) and happen before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from xfid import committed
from xfid.errors import StoreError

if TYPE_CHECKING:
    from xfid.store import Store

ID_FILE = ".xfid-store-id"
DATABASE_ENV = "XFID_DATABASE_URL"
RECORDS_ENV = "XFID_RECORDS_URL"


def env_database_url() -> str | None:
    """The catalog's URL from the environment (XFID_DATABASE_URL), None when unset or empty.

    The one place this variable is read; xfid.store.resolve_database validates it."""
    return os.environ.get(DATABASE_ENV) or None


def env_records_url() -> str | None:
    """The records location from the environment (XFID_RECORDS_URL), None when unset or empty.

    The one place this variable is read; callers resolve it (xfid.records.resolve)."""
    return os.environ.get(RECORDS_ENV) or None


def env_urls() -> tuple[str, str]:
    """Both URLs the environment gives ("" when unset), for the masking of their secrets
    (xfid.sqlbackend.mask): read here too, never elsewhere."""
    return env_database_url() or "", env_records_url() or ""


def read_id(store: Store) -> str | None:
    """The store id written at the records location, None when there is no id file."""
    path = store.records / ID_FILE
    try:
        if store.fs is None:
            return Path(path).read_text(encoding="utf-8").strip() or None
        if not store.location.exists(path):
            return None
        def read() -> bytes:
            with store.fs.open_input_stream(str(path)) as f:
                return bytes(f.read())

        return store.location.bounded(f"read {ID_FILE}", read).decode("utf-8", "replace").strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise StoreError(f"{store.location.label}: cannot read the store id file {ID_FILE}: {e.strerror or e}") from None


def write_id(store: Store) -> None:
    """Write the store id at the records location (atomically: concurrent creators write the same id)."""
    assert store.store_id
    path = store.records / ID_FILE
    data = (store.store_id + "\n").encode()
    try:
        if store.fs is None:
            tmp = committed.scratch_name(Path(path).parent, "id")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            return
        store.location.put(path, data)
    except OSError as e:
        raise StoreError(f"{store.location.label}: cannot write the store id file {ID_FILE}: "
                         f"{getattr(e, 'strerror', None) or e}") from None


def here(store: Store) -> str:
    """This machine's records location, as the catalog records it (masked for a bucket)."""
    return store.location.label if store.fs is not None else str(Path(store.records).absolute())


def problem(store: Store, recorded: str | None) -> str | None:
    """Why this writer's records location is not the store's (None: it is; an old store is adopted).

    Call once the store id is known, outside any lock (it may read a bucket).
    """
    assert store.store_id
    have = read_id(store)
    theirs = f"this store (id {store.store_id[:12]}) keeps its records at {recorded or 'another location'}"
    if have == store.store_id:
        return None
    if have is not None:
        return (f"{store.location.label}: this records location belongs to another store (id {have[:12]}); "
                f"{theirs}. Point XFID_RECORDS_URL (or [store] records) at this store's records; nothing was written")
    if store.fs is None and not Path(store.records).is_dir():
        return (f"{store.location.label}: no records folder here (a share not mounted, or the folder moved?); "
                f"{theirs}. Mount or move it back, or point XFID_RECORDS_URL (or [store] records) at it; "
                "nothing was written")
    if _adoptable(store, recorded):
        write_id(store)
        return None
    return (f"{store.location.label}: this records location has no store id file ({ID_FILE}) and does not hold "
            f"the parts the catalog registers; {theirs}. Point XFID_RECORDS_URL (or [store] records) at this "
            "store's records; nothing was written")


def _adoptable(store: Store, recorded: str | None) -> bool:
    """Whether a location without an id file is verifiably this store's (see the module docstring)."""
    files = sorted(store.manifest_files())
    if not files:
        return not store.team or recorded is None or recorded == here(store)
    if store.fs is not None:
        listed = {e.rel for e in store.location.list()}
        return all(f in listed for f in files)
    for f in files:
        p = Path(store.records) / f
        twin = store.twin(p)
        if not (p.exists() or (twin is not None and twin.exists())):
            return False
    return True


__all__ = ["DATABASE_ENV", "ID_FILE", "RECORDS_ENV", "env_database_url", "env_records_url", "env_urls", "here",
           "problem", "read_id", "write_id"]
