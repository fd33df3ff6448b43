"""The correlation as the Python API returns it: the engine's Correlation, able to write its JSON."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from xfid.engine import Correlation


class CorrelationResult(Correlation):
    """`.rows`, `.comparisons`, `.discrepancies`, `.coverage` DataFrames, plus the JSON document."""

    @classmethod
    def of(cls, corr: Correlation) -> CorrelationResult:
        """`corr` itself when it is one already, else the same frames (not copied) in this class."""
        if isinstance(corr, cls):
            return corr
        return cls(**{f.name: getattr(corr, f.name) for f in fields(corr)})

    def to_json(self) -> str:
        """The document `xfid correlate --format json` prints."""
        from xfid.engine.output import to_json

        return to_json(self)

    def to_dict(self) -> dict[str, Any]:
        """That document as Python objects."""
        from xfid.engine.output import to_dict

        return to_dict(self)
