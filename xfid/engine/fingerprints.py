"""Stable discrepancy identity: a fingerprint of the key and the fidelity pair (the issue tracker keys on it)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

CHUNK = 1 << 18
"""Rows whose joined keys are built at once (the joined bytes of 3.7M rows would be ~400 MB)."""
FINGERPRINT_FIELDS = ("target", "workload", "op", "metric", "stat", "candidate", "reference")


def fingerprint(target: str, workload: str, op: str, metric: str, stat: str, candidate: str, reference: str) -> str:
    """16 hex digits, the same on every machine and in every release for the same key."""
    blob = "\x1f".join((target, workload, op, metric, stat, candidate, reference))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def fingerprint_many(parts: list[list[str]], codes: list[object]) -> list[str]:
    """Many fingerprints at once, equal to `fingerprint()` for each row.

    Adjacent fields are pre-joined per distinct combination present (few: e.g. target x
    workload x op, then metric x stat x pair), so each row costs one or two byte joins and a hash.

    Args:
        parts: for each of FINGERPRINT_FIELDS, the list of its distinct strings.
        codes: for each field, an integer array (one element per row) indexing into parts.
    """
    import numpy as np

    sep = b"\x1f"
    cols = [np.asarray(c, dtype=np.int64) for c in codes]
    n = len(cols[0]) if cols else 0
    groups: list[tuple[list[bytes], np.ndarray]] = []
    i = 0
    while i < len(parts):
        # join fields i..j-1 while the combined code space stays small
        key, card, j = np.zeros(n, np.int64), 1, i
        while j < len(parts) and (j == i or card * max(len(parts[j]), 1) <= GROUP_SPACE):
            key = key * max(len(parts[j]), 1) + cols[j]
            card *= max(len(parts[j]), 1)
            j += 1
        uniq, inv = _dense(key, card)
        radices = [max(len(p), 1) for p in parts[i:j]]
        texts = []
        for u in uniq.tolist():
            digits = []
            for r in reversed(radices):
                u, d = divmod(u, r)
                digits.append(d)
            texts.append(sep.join(parts[i + k][d].encode("utf-8") for k, d in enumerate(reversed(digits))))
        groups.append((texts, inv))
        i = j
    sha = hashlib.sha256
    # every group's texts but the first carry their leading separator: one bytes add per group
    tables = [np.array([t if g == 0 else sep + t for t in texts], dtype=object) for g, (texts, _) in enumerate(groups)]
    out: list[str] = []
    for a in range(0, n, CHUNK):  # the joined keys of one chunk at a time: bounded memory
        blobs = None
        for table, (_, inv) in zip(tables, groups, strict=True):
            col = table[inv[a:a + CHUNK]]
            blobs = col if blobs is None else blobs + col
        out += [sha(b).hexdigest()[:16] for b in (blobs.tolist() if blobs is not None else [])]
    return out


GROUP_SPACE = 1 << 16
"""Largest code space of one group of joined fields: its present combinations are joined in
Python (at most this many), and each further group costs every row a bytes add."""


def _dense(key: np.ndarray, card: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(key, return_inverse=True) for keys in [0, card): one counting pass, no sort."""
    import numpy as np

    present = np.bincount(key, minlength=card) > 0
    uniq = np.flatnonzero(present)
    lut = np.cumsum(present) - 1
    return uniq, lut[key]
