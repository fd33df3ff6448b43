"""xfid: multi-fidelity correlation and discrepancy tracker.

The Python API (docs/api.md): `xfid.open_store(...)` returns a store whose methods are the
commands of the `xfid` command line; `xfid.compare(baseline, current)` is the CI drift gate.
"""

from __future__ import annotations

from xfid.api import KeyHistory, ReportResult, XfidStore, adapters, compare, open_store

__version__ = "0.1.0"

__all__ = ["KeyHistory", "ReportResult", "XfidStore", "__version__", "adapters", "compare", "open_store"]
