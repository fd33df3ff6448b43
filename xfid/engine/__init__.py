"""The correlation engine: align, compare, tolerances, discrepancies, calibration."""

from __future__ import annotations

# Imported eagerly: a lazy wrapper named like its submodule is replaced by the module object
# as soon as the submodule is first imported (`xfid.engine.correlate` would stop being callable).
from xfid.engine.calibrate import CalibrationResult, calibrate
from xfid.engine.contract import Correlation
from xfid.engine.correlate import correlate
from xfid.engine.fingerprint import fingerprint

__all__ = ["CalibrationResult", "Correlation", "calibrate", "correlate", "fingerprint"]
