"""Stable discrepancy identity: a fingerprint of the key and the fidelity pair (DESIGN.md)."""

from __future__ import annotations

import hashlib

FINGERPRINT_FIELDS = ("target", "workload", "op", "metric", "stat", "candidate", "reference")


def fingerprint(target: str, workload: str, op: str, metric: str, stat: str, candidate: str, reference: str) -> str:
    """16 hex digits, the same on every machine and in every release for the same key."""
    blob = "\x1f".join((target, workload, op, metric, stat, candidate, reference))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
