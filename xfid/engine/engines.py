"""Which engine correlates: the local one (in this process) or Spark (`--engine spark`).

`correlate_with()` is what the API and the commands call: the engine from the argument, else
`[engine] name` in xfid.toml, else local. Before the local engine reads anything it estimates
the memory the selection needs from the catalog's row counts and stops with an error naming
`--engine spark` when that will not fit, instead of being killed halfway.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xfid.config import ENGINES, Config
from xfid.engine.contract import Correlation
from xfid.errors import ConfigError, EngineError
from xfid.store import Store
from xfid.sysmem import HEADROOM, available_memory

BYTES_PER_RECORD = 240
"""Peak memory of the local engine per record of the store (benchmarks/correlate.py at 10M
records, full default statistics: 2.17 GB peak RSS, about 217 bytes a record; rounded up)."""
BASE_BYTES = 300 << 20
"""What the process holds before the engine reads (interpreter, numpy, pandas, pyarrow)."""
def engine_name(config: Config, explicit: str | None = None) -> str:
    """The engine to use: `explicit`, else `[engine] name`, else "local"."""
    name = explicit or (config.raw.get("engine") or {}).get("name") or "local"
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; use {' or '.join(ENGINES)}")
    return name


def local_estimate(records: int) -> int:
    """Bytes the local engine needs for a store of `records` records (BYTES_PER_RECORD each)."""
    return BASE_BYTES + BYTES_PER_RECORD * int(records)


def check_local_fits(store: Store, available: int | None = None) -> None:
    """Stop before reading when the local engine's estimate exceeds the memory available.

    The estimate may take HEADROOM of the available memory. `XFID_LOCAL_MEMORY` (bytes, or with
    a K/M/G suffix) stands in for the available memory.

    Raises:
        EngineError: the estimate does not fit; the message names --engine spark.
    """
    records = sum(int(n or 0) for n in store.counts().values())
    if available is None:
        env = os.environ.get("XFID_LOCAL_MEMORY")
        available = _bytes(env) if env else available_memory()
    if available is None:
        return
    need = local_estimate(records)
    if need > HEADROOM * available:
        raise EngineError(f"the store holds {records:,} records: the local engine would need about "
                          f"{need / 1e9:.1f} GB of memory, more than {HEADROOM:.0%} of the "
                          f"{available / 1e9:.1f} GB available (use {{engine}} spark)", params=("engine",))


def _bytes(text: str) -> int:
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if mult > 1 else t) * mult)
    except ValueError:
        raise ConfigError(f"XFID_LOCAL_MEMORY must be a byte count like 8G or 8589934592, got {text!r}") from None


def open_fingerprints(tracker: Any) -> list[str]:
    """Fingerprints of the issues a check can resolve (open, acknowledged, reopened, waived)."""
    from xfid.tracker.lifecycle import ACTIVE

    return sorted({str(i["fingerprint"]) for i in tracker.issues() if i.get("state") in (*ACTIVE, "waived")})


def correlate_with(store: Store, config: Config, engine: str | None = None, *, track: Iterable[str] | None = None,
                   keep: Mapping[str, Sequence[str]] | None = None, master: str | None = None,
                   **kwargs: Any) -> Correlation:
    """`xfid.engine.correlate(store, config, **kwargs)` on the chosen engine.

    `track` (fingerprints) and `keep` (column -> values) name rows Spark brings back besides the
    discrepancies; the local engine returns every row anyway.

    Raises:
        EngineError: pyspark missing, or the local engine's estimate does not fit in memory.
    """
    if engine_name(config, engine) == "spark":
        if kwargs.pop("exclude_keys", None):  # not built on Spark yet: said, never silent
            import warnings

            from xfid.errors import XfidWarning

            warnings.warn(XfidWarning("the Spark engine does not yet leave the keys of invalid issues out of the "
                                      "statistics (the local engine does)"), stacklevel=2)
        from xfid.engine.spark import correlate as spark_correlate
        from xfid.engine.spark.session import require_pyspark

        require_pyspark()
        return spark_correlate(store, config, track=track, keep=keep, master=master, **kwargs)
    from xfid.engine.pipeline import correlate

    check_local_fits(store)
    return correlate(store, config, **kwargs)


def calibration_rows(store: Store, config: Config, engine: str | None, candidate: str, reference: str,
                     target: str, run: Any, as_of: Any) -> Any:
    """The rows a calibration fits, from Spark (only those rows come back); None for the local
    engine (calibrate correlates the pair itself)."""
    if engine_name(config, engine) != "spark":
        check_local_fits(store)
        return None
    from xfid.engine.calibration import CAL_METRICS

    keep = {"target": [target], "candidate": [candidate], "reference": [reference], "metric": list(CAL_METRICS)}
    return correlate_with(store, config, "spark", keep=keep, run=run, as_of=as_of, targets=[target],
                          pairs=[f"{candidate}->{reference}"], kendall=False, bootstrap=False).rows
