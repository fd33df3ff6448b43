"""The correlation engine: align, compare, tolerances, discrepancies, calibration."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xfid.engine.contract import Correlation
from xfid.engine.fingerprint import fingerprint

if TYPE_CHECKING:
    from xfid.engine.calibrate import CalibrationResult

__all__ = ["CalibrationResult", "Correlation", "calibrate", "correlate", "fingerprint"]


def correlate(store: Any, config: Any, **kwargs: Any) -> Correlation:
    """Align the fidelities in a store and report errors (see xfid.engine.correlate.correlate)."""
    from xfid.engine.correlate import correlate as _correlate

    return _correlate(store, config, **kwargs)


def calibrate(store: Any, config: Any, candidate: str, reference: str, target: str, **kwargs: Any) -> CalibrationResult:
    """Fit efficiency factors of a model (see xfid.engine.calibrate.calibrate)."""
    from xfid.engine.calibrate import calibrate as _calibrate

    return _calibrate(store, config, candidate, reference, target, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "CalibrationResult":
        from xfid.engine.calibrate import CalibrationResult

        return CalibrationResult
    raise AttributeError(name)
