"""Stable discrepancy identity: a fingerprint of the key and the fidelity pair (DESIGN.md)."""

from __future__ import annotations

import hashlib

FINGERPRINT_FIELDS = ("target", "workload", "op", "metric", "stat", "candidate", "reference")


def fingerprint(target: str, workload: str, op: str, metric: str, stat: str, candidate: str, reference: str) -> str:
    """16 hex digits, the same on every machine and in every release for the same key."""
    blob = "\x1f".join((target, workload, op, metric, stat, candidate, reference))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def fingerprints(parts: list[list[str]], codes: list[object]) -> list[str]:
    """Many fingerprints at once, equal to `fingerprint()` for each row.

    The fields are split into two halves, (target, workload) and (op, metric, stat, candidate,
    reference); each half is joined once per distinct combination present, so a row costs one
    byte join and one hash; the digests are turned into hex in one pass.

    Args:
        parts: for each of FINGERPRINT_FIELDS, the list of its distinct strings.
        codes: for each field, an integer array (one element per row) indexing into parts.
    """
    import numpy as np

    from xfid.engine.keys import combine

    cols = [np.asarray(c, dtype=np.int64) for c in codes]
    n = len(cols[0]) if cols else 0
    if not n:
        return []
    enc = [[p.encode("utf-8") for p in field] for field in parts]
    halves = []
    for lo, hi in ((0, 2), (2, len(parts))):
        key, _ = combine(cols[lo:hi], [len(p) for p in parts[lo:hi]])
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        rows = [[int(cols[f][i]) for f in range(lo, hi)] for i in first.tolist()]
        texts = [b"\x1f".join(enc[lo + k][d] for k, d in enumerate(r)) + (b"\x1f" if lo == 0 else b"")
                 for r in rows]
        halves.append((texts, inv.reshape(-1).tolist()))
    (lt, li), (rt, ri) = halves
    sha = hashlib.sha256
    digests = b"".join([sha(lt[a] + rt[b]).digest()[:8] for a, b in zip(li, ri)])
    return np.frombuffer(digests.hex().encode("ascii"), dtype="S16").astype("U16").astype(object).tolist()
