"""Which files only AIPerf writes: shared by the aiperf adapter (which claims them) and the
genai-perf adapter (which declines them), in a module of its own so neither imports the other."""

from __future__ import annotations

from pathlib import Path

from xfid.adapters.base import head_text


def is_aiperf(path: Path, head: bytes) -> bool:
    """True for a file only AIPerf writes (the genai-perf adapter declines these)."""
    t = head_text(head)
    s = t.lstrip()
    if s.startswith("{"):
        return '"aiperf_version"' in t or ('"unit"' in t and (
            path.name.endswith("_aiperf.json") or ('"records"' in t and '"tag"' in t and '"header"' in t)))
    first = s.splitlines()[0] if s else ""
    if not first.startswith("Metric,"):
        return False
    cols = [c.strip() for c in first.split(",")]
    return "avg" in cols and ("std" in cols or "sum" in cols or path.name.endswith("_aiperf.csv"))
