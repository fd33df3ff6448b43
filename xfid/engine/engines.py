"""Which engine correlates: the local one (in this process) or Spark (`--engine spark`).

Engines are registered by name in ENGINES (as cocotb's runners are): each is a class built
from its own settings object and satisfies the `Engine` protocol. `get_engine()` is the one
place an engine name is resolved: the argument, else `[engine] name` in xfid.toml, else local.
`correlate_with()` is what the API and the commands call. Before the local engine reads
anything it estimates the memory the selection needs from the catalog's row counts and stops
with an error naming `--engine spark` when that will not fit, instead of being killed halfway.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from xfid.config import Config
from xfid.engine.contract import Correlation
from xfid.engine.request import Request
from xfid.engine.result import Aligned, Start
from xfid.errors import ConfigError, EngineError
from xfid.store import Store
from xfid.sysmem import HEADROOM, available_memory

if TYPE_CHECKING:
    import pandas as pd

BYTES_PER_RECORD = 240
"""Peak memory of the local engine per record of the store (benchmarks/correlate.py at 10M
records, full default statistics: 2.17 GB peak RSS, about 217 bytes a record; rounded up)."""
BASE_BYTES = 300 << 20
"""What the process holds before the engine reads (interpreter, numpy, pandas, pyarrow)."""


class Engine(Protocol):
    """What a correlation engine offers: its steps select -> align -> aggregate, then the shared
    xfid.engine.result.finish(); `correlate` runs them (begin() first).

    `all_rows`: whether `Correlation.rows` holds every aligned row (local) or only the
    discrepancies plus the request's `track`/`keep` rows (Spark), so callers know when to ask
    for those."""

    name: ClassVar[str]
    all_rows: ClassVar[bool]

    def check_fits(self, store: Store) -> None:
        """Stop before reading when the engine cannot hold `store` (EngineError naming the way out)."""
        ...

    def select(self, store: Store, config: Config, request: Request, start: Start) -> Any:
        """The request's entries and pairs, ready to align."""
        ...

    def align(self, selected: Any) -> Aligned:
        """The aligned rows (or those brought back) and every pair's counts."""
        ...

    def aggregate(self, aligned: Aligned) -> pd.DataFrame:
        """The comparisons (xfid.engine.aggregate.pack_comparisons) of the aligned rows."""
        ...

    def correlate(self, store: Store, config: Config, request: Request) -> Correlation:
        """begin -> select -> align -> aggregate -> finish: the correlation of `request` (xfid.engine.contract)."""
        ...


@dataclass(frozen=True)
class EngineChoice:
    """An engine asked for by name (None: `[engine] name`, else local) with its own options
    (Spark: master, conf): what `--engine` and `--master` give, resolved by get_engine()."""

    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalSettings:
    """The local engine's settings: the memory it may assume (None: what the machine has now;
    env XFID_LOCAL_MEMORY stands in for it)."""

    available: int | None = None


class LocalEngine:
    """The engine in this process (xfid.engine.pipeline)."""

    name: ClassVar[str] = "local"
    all_rows: ClassVar[bool] = True

    def __init__(self, settings: LocalSettings | None = None):
        self.settings = settings or LocalSettings()

    @classmethod
    def from_config(cls, config: Config, **options: Any) -> LocalEngine:
        """The engine with `options` of LocalSettings; another engine's (Spark's master) change nothing here."""
        return cls(LocalSettings(available=options.get("available")))

    def check_fits(self, store: Store) -> None:
        check_local_fits(store, self.settings.available)

    def select(self, store: Store, config: Config, request: Request, start: Start) -> Any:
        from xfid.engine import pipeline

        return pipeline.select(store, config, request, start)

    def align(self, selected: Any) -> Aligned:
        from xfid.engine import pipeline

        return pipeline.align(selected)

    def aggregate(self, aligned: Any) -> pd.DataFrame:
        from xfid.engine import pipeline

        return pipeline.aggregate(aligned)

    def correlate(self, store: Store, config: Config, request: Request) -> Correlation:
        from xfid.engine.pipeline import correlate  # the same steps

        if request.out_ordered:  # its parts hold the discrepancies in their listed order (severity)
            raise EngineError("the local engine writes the discrepancies in the order it lists them (by severity), "
                              "not in the rows' order (out_ordered): read its rows instead (it returns them all)")
        self.check_fits(store)
        corr = correlate(store, config, request)
        if request.out:  # the same dataset as Spark's executors write, from this process
            from xfid.engine.dataset import write_frame

            write_frame(corr.discrepancies, request.out)
        return corr


class SparkEngine:
    """The engine on Apache Spark (xfid.engine.spark), with its SparkSettings."""

    name: ClassVar[str] = "spark"
    all_rows: ClassVar[bool] = False

    def __init__(self, settings: Any = None):
        from xfid.engine.spark.session import SparkSettings

        self.settings = settings or SparkSettings()

    @classmethod
    def from_config(cls, config: Config, **options: Any) -> SparkEngine:
        from xfid.engine.spark.session import SparkSettings

        return cls(SparkSettings(**options))

    def check_fits(self, store: Store) -> None:
        """The cluster holds what it is given: nothing to check before it runs."""

    def select(self, store: Store, config: Config, request: Request, start: Start) -> Any:
        """On the session of this engine's settings (the active one, else a new one)."""
        from xfid.engine.spark import engine

        return engine.select(self.settings.spark(config, engine.store_records(store)), store, config, request, start)

    def align(self, selected: Any) -> Aligned:
        from xfid.engine.spark import engine

        return engine.align(selected)

    def aggregate(self, aligned: Any) -> pd.DataFrame:
        from xfid.engine.spark import engine

        return engine.aggregate(aligned)

    def correlate(self, store: Store, config: Config, request: Request) -> Correlation:
        from xfid.engine.spark import correlate as spark_correlate
        from xfid.engine.spark.session import require_pyspark

        require_pyspark()
        if request.exclude_keys:  # not built on Spark yet: said, never silent
            import warnings

            from xfid.errors import XfidWarning

            warnings.warn(XfidWarning("the Spark engine does not yet leave the keys of invalid issues out of the "
                                      "statistics (the local engine does)"), stacklevel=2)
        return spark_correlate(store, config, request, settings=self.settings)


ENGINES: dict[str, type[LocalEngine] | type[SparkEngine]] = {"local": LocalEngine, "spark": SparkEngine}
"""The engines by name (`--engine NAME`, `[engine] name`)."""


def engine_name(config: Config, explicit: str | None = None) -> str:
    """The engine to use: `explicit`, else `[engine] name`, else "local"."""
    name = explicit or (config.raw.get("engine") or {}).get("name") or "local"
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; use {' or '.join(ENGINES)}")
    return name


def get_engine(config: Config, choice: str | EngineChoice | Engine | None = None) -> Engine:
    """The engine for `choice`: an Engine as given, a name or EngineChoice built from its
    options, None the configured one (`[engine] name`, else local).

    Raises:
        ConfigError: an unknown engine name.
    """
    if choice is not None and not isinstance(choice, (str, EngineChoice)):
        return choice
    c = choice if isinstance(choice, EngineChoice) else EngineChoice(choice)
    return ENGINES[engine_name(config, c.name)].from_config(config, **c.options)


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


def correlate_with(store: Store, config: Config, engine: str | EngineChoice | Engine | None = None, *,
                   request: Request | None = None, **fields: Any) -> Correlation:
    """The correlation of `request` (or a Request of `fields`) on the engine `get_engine` chooses.

    Raises:
        EngineError: pyspark missing, or the local engine's estimate does not fit in memory.
    """
    req = request if request is not None else Request.of(**fields)
    return get_engine(config, engine).correlate(store, config, req)


def calibration_rows(store: Store, config: Config, engine: str | EngineChoice | Engine | None,
                     request: Request, candidate: str, reference: str, target: str) -> Any:
    """The rows a calibration fits, from an engine that returns only some rows (Spark: only
    those rows come back); None for one that returns every row (calibrate correlates the pair
    itself)."""
    eng = get_engine(config, engine)
    if eng.all_rows:
        eng.check_fits(store)
        return None
    from xfid.engine.calibration import CAL_METRICS

    keep = {"target": (target,), "candidate": (candidate,), "reference": (reference,), "metric": tuple(CAL_METRICS)}
    req = request.but(keep=keep, targets=(target,), pairs=(f"{candidate}->{reference}",), kendall=False,
                      bootstrap=False)
    return eng.correlate(store, config, req).rows
