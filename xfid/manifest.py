"""The manifest: the catalog's tables of sources and parts, their migrations, and the
provenance each part carries in its footer (enough to rebuild the manifest from the parts).

Kept apart from xfid.store (where the store lives and how it is opened) so that the tables
are defined once for the store, `--rebuild-catalog` and `store copy`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid import committed, sqlbackend

if TYPE_CHECKING:
    from xfid.records import Location

PART_META = "xfid.part"
"""The Parquet footer key holding a part's provenance: enough to rebuild the catalog from it."""
PART_FORMAT = 1

PARTS_AND_SOURCES = """
    CREATE TABLE sources (
        source_id TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        adapter TEXT NOT NULL,
        options TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        rows INTEGER NOT NULL,
        ingested_at TEXT NOT NULL,
        summary TEXT NOT NULL
    );
    CREATE TABLE parts (
        file TEXT PRIMARY KEY,
        source_id TEXT NOT NULL REFERENCES sources(source_id),
        fidelity TEXT NOT NULL,
        rows INTEGER NOT NULL
    );
    CREATE INDEX parts_source ON parts(source_id);
    """
MIGRATIONS: list[sqlbackend.Migration] = [
    {  # PostgreSQL has no rowid: `seq` orders the parts by registration
        sqlbackend.SQLITE: PARTS_AND_SOURCES,
        sqlbackend.POSTGRESQL: sqlbackend.ddl(PARTS_AND_SOURCES, sqlbackend.POSTGRESQL)
        + "ALTER TABLE parts ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;",
    },
    """
    CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    committed.ATTEMPTS_DDL,  # 3: the commit journal of xfid.committed
]
"""The manifest component's migrations, in order (xfid.sqlbackend.migrate)."""


def options_json(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=str)


def summary_json(summary: dict[str, Any]) -> str:
    return json.dumps(summary, sort_keys=True, default=str)


def read_part_meta(path: Path, location: Location | None = None) -> dict[str, Any]:
    """The provenance in a part's footer (PART_META), or {} when it has none or cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # a bucket's reader is closed too (a ParquetFile does not close what it was handed)
        with (contextlib.nullcontext(path) if location is None else location.reading(path)) as src, \
                pq.ParquetFile(src) as pf:
            kv = pf.metadata.metadata or {}
        doc = json.loads(kv.get(PART_META.encode(), b"{}"))
    except (pa.ArrowInvalid, OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


__all__ = ["MIGRATIONS", "PARTS_AND_SOURCES", "PART_FORMAT", "PART_META", "options_json", "read_part_meta",
           "summary_json"]
