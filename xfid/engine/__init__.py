"""The correlation engine: align, compare, tolerances, discrepancies, calibration.

The package's public names are loaded on first use (PEP 562), so that importing one of its
light modules (`xfid.engine.schema`, `xfid.engine.request`) does not import the whole engine:
a module the engine itself imports (the tracker's) may then use the schema without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xfid.engine.calibration import CalibrationResult as CalibrationResult
    from xfid.engine.calibration import calibrate as calibrate
    from xfid.engine.contract import Correlation as Correlation
    from xfid.engine.fingerprints import fingerprint as fingerprint
    from xfid.engine.pipeline import correlate as correlate

_HOME = {"CalibrationResult": "calibration", "calibrate": "calibration", "Correlation": "contract",
         "fingerprint": "fingerprints", "correlate": "pipeline"}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
