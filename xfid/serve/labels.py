"""Snapshots recorded under a label (a branch such as `main`) in the catalog, for `compare --against`."""

from __future__ import annotations

import json
import re
from typing import Any

from xfid.errors import XfidError
from xfid.serve import catalog
from xfid.sqlbackend import Database
from xfid.store import write_tx

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@+-]{0,199}$")


def check_label(label: str) -> str:
    if not LABEL.match(label or ""):
        raise XfidError(f"snapshot label {label!r}: use letters, digits and . _ / @ + - (a branch name such as "
                        "main or release/1.2)")
    return label


def record(conn: Database, label: str, snap: dict[str, Any], actor: str) -> dict[str, Any]:
    """Keep `snap` as the newest snapshot of `label`; returns id, label, time, actor."""
    check_label(label)
    catalog.setup(conn)
    t = catalog.now_stamp()
    with write_tx(conn):
        row = conn.execute("INSERT INTO labelled_snapshots (label, time, actor, snapshot) VALUES (?,?,?,?) "
                           "RETURNING id", (label, t, actor, json.dumps(snap, default=str))).fetchone()
    return {"id": int(row[0]), "label": label, "time": t, "actor": actor}


def latest(conn: Database, label: str) -> dict[str, Any]:
    """The newest snapshot recorded under `label`.

    Raises:
        XfidError: none recorded under it (the labels that have one listed).
    """
    check_label(label)
    catalog.setup(conn)
    row = conn.execute("SELECT snapshot FROM labelled_snapshots WHERE label=? ORDER BY id DESC LIMIT 1",
                       (label,)).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT DISTINCT label FROM labelled_snapshots ORDER BY label")]
        raise XfidError(f"no snapshot recorded under the label {label!r}; record one with `xfid snapshot --label "
                        f"{label}` (labels with one: {', '.join(known) or 'none'})")
    return json.loads(row[0])
