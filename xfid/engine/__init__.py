"""The correlation engine: align, compare, tolerances, discrepancies, calibration."""

from __future__ import annotations

from xfid.engine.calibration import CalibrationResult, calibrate
from xfid.engine.contract import Correlation
from xfid.engine.fingerprints import fingerprint
from xfid.engine.pipeline import correlate

__all__ = ["CalibrationResult", "Correlation", "calibrate", "correlate", "fingerprint"]
