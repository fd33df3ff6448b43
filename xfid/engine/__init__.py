"""The correlation engine: align, compare, tolerances, discrepancies, calibration."""

from __future__ import annotations

from xfid.engine.contract import Correlation
from xfid.engine.fingerprint import fingerprint

__all__ = ["Correlation", "fingerprint"]
