"""The correlation engine on Apache Spark (`--engine spark`): see engine.py; pyspark is optional."""

from __future__ import annotations

from typing import Any


def correlate(*args: Any, **kwargs: Any) -> Any:
    """`xfid.engine.spark.engine.correlate` (pyspark is imported only when it runs)."""
    from xfid.engine.spark.engine import correlate as run

    return run(*args, **kwargs)
