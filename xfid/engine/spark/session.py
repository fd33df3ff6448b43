"""The SparkSession: master and settings from the arguments, env XFID_SPARK_MASTER, `[engine.spark]`."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid.config import Config
from xfid.engine.spark.sizing import apply_local_defaults, java_options
from xfid.errors import EngineError, XfidWarning
from xfid.sysmem import available_memory

INSTALL = "pip install 'xfid[spark]'"
LOG4J = Path(__file__).with_name("log4j2.properties")
"""The JVM's logging configuration (errors only), given as a `-D` option unless the user sets
spark.driver.extraJavaOptions."""
DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # the cap on what one collect brings to the driver: the rows come back ~500k at a time
    # (engine.CHUNK_ROWS, ~190 MB serialized), and other collects stay small; 4g leaves room for
    # wide rows (long notes, paths, configs) where Spark's default is 1g
    "spark.driver.maxResultSize": "4g",
}


@dataclass(frozen=True)
class SparkSettings:
    """The Spark engine's own settings (what `--master` gives, or an API caller):

    master: the Spark master (None: env XFID_SPARK_MASTER, else `[engine.spark] master`, else
        local[*] or spark-submit's); conf: Spark settings over `[engine.spark] conf`; session: an
        existing SparkSession to use instead of building one."""

    master: str | None = None
    conf: Mapping[str, Any] = field(default_factory=dict)
    session: Any = None

    def spark(self, config: Config | None, records: int | None = None) -> Any:
        """The session these settings name (xfid.engine.spark.session.spark_session); `records`
        (the store's record count) sizes a local session (xfid.engine.spark.sizing)."""
        return self.session or spark_session(config, master=self.master, conf=self.conf, records=records)


def require_pyspark() -> None:
    """An EngineError naming the install command when pyspark is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise EngineError("{engine} spark needs pyspark, which is not installed: {install}", params=("engine",),
                          install=INSTALL) from None


def spark_settings(config: Config | None, master: str | None = None,
                   conf: Mapping[str, Any] | None = None) -> tuple[str | None, dict[str, str]]:
    """(master, conf): `master` (--master, SparkSettings.master) over env XFID_SPARK_MASTER over
    `[engine.spark] master`; `conf` over `[engine.spark] conf` over DEFAULTS."""
    chosen, out, _ = _settings(config, master, conf)
    return chosen, out


def _settings(config: Config | None, master: str | None,
              conf: Mapping[str, Any] | None) -> tuple[str | None, dict[str, str], set[str]]:
    """spark_settings, and the keys the user set (`[engine.spark] conf` or `conf`)."""
    section = ((config.raw.get("engine") or {}).get("spark") or {}) if config is not None else {}
    chosen = master or os.environ.get("XFID_SPARK_MASTER") or section.get("master")
    out = dict(DEFAULTS)
    mine = {str(k): str(v) for k, v in (section.get("conf") or {}).items()}
    mine.update({str(k): str(v) for k, v in (conf or {}).items()})
    out.update(mine)
    return chosen, out, set(mine)


def prepare(settings: dict[str, str], user: set[str], master: str | None, records: int | None,
            available: int | None) -> list[str]:
    """Complete a new session's `settings` for `master`: a local master's heap and shuffle
    partitions (sized from `records` and `available` memory) unless the user set them (`user`);
    the JVM's options (the log4j option, and for a local master sizing.LOCAL_JAVA_OPTIONS) unless
    the user set spark.driver.extraJavaOptions, which is then kept whole. Returns the warnings
    to give."""
    said = apply_local_defaults(settings, user, master, records, available)
    if "spark.driver.extraJavaOptions" not in settings:
        options = java_options(master, LOG4J.as_uri() if LOG4J.exists() else None)
        if options:
            settings["spark.driver.extraJavaOptions"] = options
    return said


def spark_session(config: Config | None, master: str | None = None, conf: Mapping[str, Any] | None = None,
                  records: int | None = None) -> Any:
    """The active SparkSession, else a new one (local[*] unless a master is configured or given
    by spark-submit). Local masters run the executors' Python as this interpreter; with
    `records` (the store's record count) a new local session's driver memory and shuffle
    partitions are sized from the machine unless the user set them, and a local session gets
    the settings measured to be cheaper on one machine (xfid.engine.spark.sizing; `prepare`)."""
    require_pyspark()
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    chosen, settings, user = _settings(config, master, conf)
    active = SparkSession.getActiveSession()
    if active is not None and (chosen is None or active.sparkContext.master == chosen):
        return active
    if chosen is None and "spark.master" not in dict(SparkConf().getAll()):
        chosen = "local[*]"
    for said in prepare(settings, user, chosen, records, available_memory()):
        warnings.warn(XfidWarning(said), stacklevel=2)
    if chosen and chosen.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("xfid")
    if chosen:
        builder = builder.master(chosen)
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # no Java, a master that cannot be reached
        raise EngineError(f"cannot start Spark (master {chosen or 'from spark-submit'}): "
                          f"{str(e).splitlines()[0] if str(e) else type(e).__name__} "
                          "(is Java 17 installed and JAVA_HOME set?)") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """pyspark's warning about pandas versions it has not certified is not the user's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="pyspark")
        yield
