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

    Args:
        parts: for each of FINGERPRINT_FIELDS, the list of its distinct strings.
        codes: for each field, an integer array (one element per row) indexing into parts.
    """
    enc = [[s.encode("utf-8") for s in p] for p in parts]
    sep = b"\x1f"
    cols = [[e[i] for i in c.tolist()] for e, c in zip(enc, codes, strict=True)]  # type: ignore[attr-defined]
    sha = hashlib.sha256
    return [sha(sep.join(row)).hexdigest()[:16] for row in zip(*cols, strict=True)]
