"""xfid: multi-fidelity correlation and discrepancy tracker.

The Python API (docs/api.md): `xfid.open_store(...)` returns a store whose methods are the
commands of the `xfid` command line; `xfid.compare(baseline, current)` is the CI drift gate.
"""

from __future__ import annotations

from typing import Any

from xfid.api import KeyHistory, ReportResult, XfidStore, compare, open_store

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`xfid.adapters`, imported on first use: the adapter registry package, which is callable
    (`xfid.adapters()` lists the adapters). A public function of that name would be replaced by the
    package as soon as anything imported `xfid.adapters` (every ingest does)."""
    if name == "adapters":
        import xfid.adapters

        return xfid.adapters
    raise AttributeError(f"module 'xfid' has no attribute {name!r}")

__all__ = ["KeyHistory", "ReportResult", "XfidStore", "__version__", "adapters", "compare", "open_store"]
