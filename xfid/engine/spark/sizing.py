"""Spark's memory and shuffle partitions in local mode, sized from the machine and the store.

In local mode (`local`, `local[N]`, `local[*]`) the driver JVM is also the executor: its heap
(`spark.driver.memory`, Spark's default 1g) holds every running task's sort and aggregation
memory, the persisted frames and the collects. Unless `[engine.spark] conf` (or the caller) sets
them, `spark.sql.shuffle.partitions` is sized so that a shuffle partition holds about
RECORDS_PER_PARTITION records, and the heap so that `cores` such tasks fit in Spark's unified
memory, plus the driver's own share and a part proportional to the store (persisted entries,
chunked collects). The heap is capped at SPARK_SHARE of the memory available now (the Python
driver, its workers and the rest of the machine need the rest). A setting the user made is kept
as it is; when it cannot fit the machine, a warning says so.

A local master's JVM also gets the options measured to cut Spark's CPU and wall time on one
machine (LOCAL_JAVA_OPTIONS; docs/scale.md, "Spark's local-mode settings"), unless the user sets
spark.driver.extraJavaOptions, which then replaces them (and the log4j option) whole.

When Spark still runs out of memory, `oom_advice` names the setting to raise and a value from
the same estimate (never less than twice what ran out).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

GB = 1 << 30
MB = 1 << 20
RECORDS_PER_PARTITION = 500_000
"""Records per shuffle partition (docs/scale.md: a window-stage task of 500k records used ~436 MB
of execution memory at 100M records)."""
TASK_BYTES_PER_RECORD = 900
"""Execution memory a task needs per record of its partition (the same measurement, rounded up)."""
STORE_BYTES_PER_RECORD = 50
"""Heap per record of the store for what stays on the driver JVM: persisted entries (about a
fifth of the records in the benchmark's stores, spilled to disk beyond the storage share) and the
chunked collects. At 100M records 8g of heap completed (docs/scale.md)."""
RESERVED = 300 * MB
"""Spark's reserved memory (taken off the heap before the unified memory)."""
MEMORY_FRACTION = 0.6
"""spark.memory.fraction's default: the share of (heap - RESERVED) tasks and storage use."""
DRIVER_BASE = 512 * MB
"""The driver's own share of the heap (planning, broadcasts, one collected chunk of rows)."""
MIN_HEAP = GB
"""Never below Spark's own default."""
SPARK_SHARE = 0.5
"""The share of the available memory the computed heap may take."""


def local_cores(master: str | None) -> int | None:
    """The task slots of a local master (`local` 1, `local[N]`/`local[N,F]` N, `local[*]` the
    cores), None for any other master (a cluster sizes its own executors)."""
    if master is None:
        return None
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:\s*,\s*\d+)?\]", master.strip())
    if not m:
        return None
    return (os.cpu_count() or 1) if m.group(1) == "*" else max(1, int(m.group(1)))


@dataclass(frozen=True)
class Sizing:
    """What a local session of `cores` slots needs for `records` records."""

    records: int
    cores: int
    partitions: int
    need: int  # heap bytes the estimate asks for
    heap: int  # heap bytes to set: need, at least MIN_HEAP, at most cap (when the cap is known)
    cap: int | None  # SPARK_SHARE of the available memory (None: unknown)

    @property
    def fits(self) -> bool:
        """Whether the estimate fits under the cap."""
        return self.cap is None or self.need <= self.cap


def heap_need(records: int, cores: int, partitions: int) -> int:
    """Heap bytes for `cores` concurrent tasks over `partitions` shuffle partitions of `records`
    records, plus the driver's share and the store's (see the module docstring)."""
    per_task = TASK_BYTES_PER_RECORD * math.ceil(max(records, 0) / max(partitions, 1))
    return int(RESERVED + DRIVER_BASE + cores * per_task / MEMORY_FRACTION + STORE_BYTES_PER_RECORD * records)


def local_sizing(records: int, cores: int, available: int | None, partitions: int | None = None) -> Sizing:
    """The partitions (unless given) and the heap for a store of `records` on `cores` local slots
    with `available` bytes free (None: unknown, no cap)."""
    parts = partitions or max(2 * cores, math.ceil(records / RECORDS_PER_PARTITION))
    need = heap_need(records, cores, parts)
    cap = None if available is None else int(SPARK_SHARE * available)
    heap = max(need, MIN_HEAP)
    if cap is not None:
        heap = max(min(heap, cap), min(MIN_HEAP, cap))
    return Sizing(records, cores, parts, need, _round_up(heap), cap)


def _round_up(n: int) -> int:
    """Bytes rounded up to a whole 256 MB (a heap size Spark is given in MB)."""
    step = 256 * MB
    return -(-n // step) * step


def mem_text(n: int) -> str:
    """Bytes as a Spark memory setting: whole GB (and from 4 GB up, GB rounded up) as `3g`, else
    MB as `2560m`."""
    if n % GB == 0 or n >= 4 * GB:
        return f"{-(-n // GB)}g"
    return f"{-(-n // MB)}m"


def parse_mem(text: str | None, default: int = GB) -> int:
    """A Spark memory setting (`1g`, `512m`, `2048` MB without a unit) in bytes; `default` when
    missing or unreadable."""
    if not text:
        return default
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)b?\s*", str(text).lower())
    if not m:
        return default
    mult = {"": MB, "k": 1 << 10, "m": MB, "g": GB, "t": 1 << 40, "p": 1 << 50}[m.group(2)]
    return int(float(m.group(1)) * mult)


LOCAL_JAVA_OPTIONS: tuple[str, ...] = (
    # The serial collector instead of G1 (the JVM's default): in local mode the driver JVM is
    # also the executor, its 2 cores shared with the Python workers; G1's concurrent threads and
    # its heavier write barriers cost more there than its short pauses save. Measured on the
    # 2-core, 24 GB machine at 10M records (docs/scale.md, "Spark's local-mode settings, measured
    # 2026-12-07 evening", medians of 2 G1 and 3 serial runs, interleaved): the JVM's CPU 225 ->
    # 168 s (-25%; JIT, GC threads and tasks all lower), its peak RSS 3.3 -> 2.5 GB, the floor
    # (benchmarks/spark_floor.py) 2.19x -> 1.98x the local engine, the same rows. Parallel GC, one
    # G1 thread, C1-only JIT (less JIT, slower tasks: a loss at 10M), shuffle/IO compression
    # codecs, AQE off and locality wait 0 were measured too and are not set (the section says why).
    "-XX:+UseSerialGC",
)
"""JVM options of a local master's driver (which is the executor too), after the log4j option,
unless the user sets spark.driver.extraJavaOptions (then theirs are kept whole)."""


def java_options(master: str | None, log4j: str | None) -> str | None:
    """The driver's JVM options when the user gave none: the log4j configuration (`log4j`, a file
    URI: the JVM logs errors only) and, for a local master, LOCAL_JAVA_OPTIONS; None when there
    are none."""
    options = [f"-Dlog4j2.configurationFile={log4j}"] if log4j else []
    if local_cores(master) is not None:
        options += LOCAL_JAVA_OPTIONS
    return " ".join(options) or None


def apply_local_defaults(settings: dict[str, str], user: set[str], master: str | None, records: int | None,
                         available: int | None) -> list[str]:
    """Fill `spark.driver.memory` and `spark.sql.shuffle.partitions` of a local master in
    `settings` unless the user set them (`user`); returns what should be said about the user's
    own settings and the estimate (warnings), never changing a setting the user made."""
    cores = local_cores(master)
    if cores is None or records is None:
        return []
    given_parts = settings.get("spark.sql.shuffle.partitions") if "spark.sql.shuffle.partitions" in user else None
    try:
        parts = int(given_parts) if given_parts else None
    except ValueError:
        parts = None
    s = local_sizing(records, cores, available, parts)
    said = []
    if "spark.sql.shuffle.partitions" not in user:
        settings["spark.sql.shuffle.partitions"] = str(s.partitions)
    if "spark.driver.memory" not in user:
        settings["spark.driver.memory"] = mem_text(s.heap)
        if not s.fits:
            said.append(f"the store holds {records:,} records: Spark on {master} needs about {s.need / GB:.1f} GB "
                        f"of driver memory, more than the {s.cap / GB:.1f} GB it may take of this machine "
                        f"({available / GB:.1f} GB available); spark.driver.memory is set to {mem_text(s.heap)} "
                        "and the job may run out of memory (use a cluster, or narrow it with --target)")
        return said
    mine = parse_mem(settings.get("spark.driver.memory"))
    if available is not None and mine > available:
        said.append(f"spark.driver.memory = {settings.get('spark.driver.memory')} (as set) is more than the "
                    f"{available / GB:.1f} GB this machine has available: kept as set; the JVM may be killed or "
                    "swap (lower it, or run on a cluster)")
    return said


OOM_PATTERNS = ("java.lang.OutOfMemoryError", "Java heap space", "GC overhead limit exceeded",
                "SparkOutOfMemoryError", "Unable to acquire", "Not enough memory to build and broadcast")
"""Texts of a Spark error that mean the JVM (driver or executor) ran out of memory."""


def is_oom(text: str) -> bool:
    """Whether a Spark error's text says that memory ran out."""
    return any(p in text for p in OOM_PATTERNS)


def oom_cause(text: str) -> str:
    """The out-of-memory line of a Spark error (what the JVM said), shortened."""
    for line in text.splitlines():
        for p in OOM_PATTERNS:
            if p in line:
                i = line.find("java.lang.OutOfMemoryError")
                return (line[i:] if i >= 0 else line.strip())[:200]
    return "out of memory"


def oom_advice(master: str, conf: dict[str, str], records: int, available: int | None) -> str:
    """What to raise after Spark ran out of memory, with a value that would fit: in local mode
    `spark.driver.memory` (the estimate for the store, at least twice what ran out, and more
    shuffle partitions when that is more than the machine has); on a cluster the executors'
    memory (twice what ran out) and the shuffle partitions."""
    parts = _int(conf.get("spark.sql.shuffle.partitions"), 200)
    cores = local_cores(master)
    if cores is not None:
        had = parse_mem(conf.get("spark.driver.memory"))
        want = _round_up(max(2 * had, heap_need(records, cores, parts)))
        cap = None if available is None else int(SPARK_SHARE * available)
        if cap is None or want <= cap:
            return (f'set spark.driver.memory = "{mem_text(want)}" in [engine.spark] conf (it was {mem_text(had)}; '
                    f"the estimate for {records:,} records on {master} with {parts} shuffle partitions)")
        more = max(2 * parts, math.ceil(records / RECORDS_PER_PARTITION))
        fit = _round_up(max(heap_need(records, cores, more), had + 256 * MB))
        if fit <= cap:
            return (f'set spark.driver.memory = "{mem_text(fit)}" and spark.sql.shuffle.partitions = "{more}" in '
                    f"[engine.spark] conf (they were {mem_text(had)} and {parts}; this machine has "
                    f"{available / GB:.1f} GB available)")
        return (f"{records:,} records need about {mem_text(want)} of spark.driver.memory on {master} (it was "
                f"{mem_text(had)}), more than this machine can give ({available / GB:.1f} GB available): run on a "
                "cluster, or narrow the job with --target")
    had = parse_mem(conf.get("spark.executor.memory"))
    return (f'set spark.executor.memory = "{mem_text(_round_up(2 * had))}" and spark.sql.shuffle.partitions = '
            f'"{2 * parts}" in [engine.spark] conf (they were {mem_text(had)} and {parts}), or narrow the job '
            "with --target")


def _int(text: str | None, default: int) -> int:
    try:
        return int(str(text)) if text else default
    except ValueError:
        return default
