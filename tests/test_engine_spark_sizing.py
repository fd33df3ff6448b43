"""Spark's defaults in local mode, sized from the machine and the store, and the error when
memory runs out (xfid.engine.spark.sizing): all without Java.

The sizing is a function of (records, cores, available memory); the user's own settings are
never changed (a warning says when they cannot fit the machine); an out-of-memory error from
Spark becomes an `Error:` naming the setting to raise and a computed value, exit 2.
"""

from __future__ import annotations

import re
import warnings

import pytest
from click.testing import CliRunner

from tests.test_engine_helpers import config
from xfid.engine.spark.sizing import (
    GB,
    MIN_HEAP,
    RECORDS_PER_PARTITION,
    SPARK_SHARE,
    apply_local_defaults,
    heap_need,
    is_oom,
    local_cores,
    local_sizing,
    mem_text,
    oom_advice,
    parse_mem,
)
from xfid.errors import EngineError

# what a Py4J error carries when the driver JVM ran out of heap in a task (its first lines)
PY4J_OOM = """An error occurred while calling o412.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 11.0 failed 1 times, \
most recent failure: Lost task 3.0 in stage 11.0 (TID 87) (10.0.0.5 executor driver): \
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
\tat org.apache.spark.unsafe.memory.HeapMemoryAllocator.allocate(HeapMemoryAllocator.java:47)
"""
PY4J_GC = "An error occurred while calling o9.toArrow.\n: java.lang.OutOfMemoryError: GC overhead limit exceeded\n"


def test_local_cores_reads_local_masters_only(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert local_cores("local") == 1
    assert local_cores("local[2]") == 2
    assert local_cores("local[4, 3]") == 4
    assert local_cores("local[*]") == 16
    for other in ("yarn", "spark://h:7077", "k8s://https://x", "local-cluster[2,1,1024]", None):
        assert local_cores(other) is None, other


def test_sizing_follows_records_cores_and_the_machine():
    small = local_sizing(10_000, 2, 20 * GB)
    assert small.partitions == 4 and small.heap == MIN_HEAP  # never below Spark's own default
    ten = local_sizing(10_000_000, 2, 20 * GB)
    assert ten.partitions == 10_000_000 // RECORDS_PER_PARTITION
    assert ten.heap >= ten.need and ten.heap - ten.need < 256 << 20 and ten.fits  # the estimate, rounded up
    hundred = local_sizing(100_000_000, 2, 20 * GB)
    assert hundred.partitions == 200 and hundred.need > ten.need  # more records: more heap
    assert local_sizing(10_000_000, 4, 20 * GB).need > ten.need  # more concurrent tasks: more heap
    assert local_sizing(10_000_000, 2, 20 * GB, partitions=200).need < ten.need  # smaller partitions: less
    # a machine with little free memory caps the heap at its share, and says it does not fit
    tight = local_sizing(100_000_000, 2, 8 * GB)
    assert tight.heap <= SPARK_SHARE * 8 * GB and not tight.fits
    assert local_sizing(10_000_000, 2, None).heap >= ten.need  # unknown memory: no cap


def test_defaults_fill_only_what_the_user_left_unset():
    s: dict[str, str] = {}
    assert apply_local_defaults(s, set(), "local[2]", 10_000_000, 20 * GB) == []
    assert s == {"spark.sql.shuffle.partitions": "20", "spark.driver.memory": mem_text(
        local_sizing(10_000_000, 2, 20 * GB).heap)}
    assert parse_mem(s["spark.driver.memory"]) >= heap_need(10_000_000, 2, 20)
    mine = {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "7"}
    assert apply_local_defaults(mine, set(mine), "local[2]", 10_000_000, 20 * GB) == []
    assert mine == {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "7"}  # kept as set
    only = {"spark.sql.shuffle.partitions": "400"}
    apply_local_defaults(only, set(only), "local[2]", 10_000_000, 20 * GB)
    assert only["spark.sql.shuffle.partitions"] == "400"  # the user's partitions size the heap
    assert parse_mem(only["spark.driver.memory"]) >= heap_need(10_000_000, 2, 400)
    for master, records in (("yarn", 10_000_000), ("spark://h:7077", 10), ("local[2]", None)):
        s = {}
        assert apply_local_defaults(s, set(), master, records, 20 * GB) == [] and s == {}


def test_a_setting_that_cannot_fit_the_machine_is_kept_and_said():
    mine = {"spark.driver.memory": "64g"}
    said = apply_local_defaults(mine, set(mine), "local[2]", 1_000, 16 * GB)
    assert mine["spark.driver.memory"] == "64g"
    assert len(said) == 1 and "spark.driver.memory = 64g" in said[0] and "kept as set" in said[0]
    assert "16.0 GB" in said[0]
    s: dict[str, str] = {}
    said = apply_local_defaults(s, set(), "local[2]", 1_000_000_000, 16 * GB)  # the estimate does not fit
    assert parse_mem(s["spark.driver.memory"]) <= SPARK_SHARE * 16 * GB
    assert len(said) == 1 and "1,000,000,000 records" in said[0] and "--target" in said[0]


def test_session_settings_know_which_keys_the_user_set(monkeypatch):
    from xfid.engine.spark.session import _settings

    monkeypatch.delenv("XFID_SPARK_MASTER", raising=False)
    cfg = config({"engine": {"spark": {"conf": {"spark.driver.memory": "3g"}}}})
    master, conf, user = _settings(cfg, "local[2]", {"spark.sql.shuffle.partitions": "9"})
    assert master == "local[2]" and user == {"spark.driver.memory", "spark.sql.shuffle.partitions"}
    assert conf["spark.driver.memory"] == "3g" and "spark.driver.maxResultSize" in conf  # defaults are not the user's
    assert _settings(None, None, None)[2] == set()


def test_parse_and_write_memory_settings():
    assert parse_mem("1g") == GB and parse_mem("512m") == 512 << 20 and parse_mem("2048") == 2 * GB
    assert parse_mem("1.5g") == int(1.5 * GB) and parse_mem(None) == GB and parse_mem("lots") == GB
    assert mem_text(2 * GB) == "2g" and mem_text(1792 << 20) == "1792m" and mem_text(int(6.2 * GB)) == "7g"


def test_out_of_memory_advice_names_the_setting_and_a_value_that_fits():
    assert is_oom(PY4J_OOM) and is_oom(PY4J_GC) and not is_oom("Py4JJavaError: AnalysisException: no column x")
    conf = {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "200"}
    said = oom_advice("local[2]", conf, 10_000_000, 20 * GB)
    m = re.search(r'set spark\.driver\.memory = "(\w+)" in \[engine\.spark\] conf', said)
    assert m, said
    want = parse_mem(m.group(1))
    assert want >= 2 * GB and want >= heap_need(10_000_000, 2, 200)  # at least twice what ran out, the estimate
    assert "it was 1g" in said
    # twice what ran out when that is above the estimate
    said = oom_advice("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "200"},
                      1_000, 20 * GB)
    assert 'spark.driver.memory = "8g"' in said
    # more than the machine can give at these partitions: more partitions too, still within the machine
    said = oom_advice("local[2]", {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"},
                      100_000_000, 20 * GB)
    m = re.search(r'spark\.driver\.memory = "(\w+)" and spark\.sql\.shuffle\.partitions = "(\d+)"', said)
    assert m, said
    assert parse_mem(m.group(1)) <= SPARK_SHARE * 20 * GB and int(m.group(2)) >= 200
    # nothing on this machine fits: say so, name the way out
    said = oom_advice("local[2]", {"spark.driver.memory": "8g"}, 10_000_000_000, 20 * GB)
    assert "more than this machine can give" in said and "cluster" in said
    # on a cluster: the executors' memory (twice it) and the partitions
    said = oom_advice("spark://h:7077", {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "300"},
                      10**9, None)
    assert 'spark.executor.memory = "8g"' in said and 'spark.sql.shuffle.partitions = "600"' in said


class Py4JJavaError(Exception):
    """Stands in for py4j.protocol.Py4JJavaError (what a failed Spark action raises)."""


Py4JJavaError.__module__ = "py4j.protocol"


def test_spark_error_maps_an_out_of_memory_error():
    from xfid.engine.spark.engine import spark_error

    conf = {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "20"}
    e = spark_error(Py4JJavaError(PY4J_OOM), "local[2]", conf, 10_000_000, 20 * GB)
    assert isinstance(e, EngineError)
    text = str(e)
    assert text.startswith("Spark (local[2]) ran out of memory (java.lang.OutOfMemoryError: Java heap space): set "
                           "spark.driver.memory = "), text
    assert "\tat " not in text and len(text.splitlines()) == 1
    other = spark_error(Py4JJavaError("An error occurred\n: org.apache.spark.SparkException: Job aborted: "
                                      "no such file"), "local[2]", conf, 10, 20 * GB)
    assert str(other).startswith("Spark (local[2]) failed: ") and "ran out of memory" not in str(other)


class FakeSession:
    """Enough of a SparkSession for engine.correlate to reach its error handling."""

    class sparkContext:
        master = "local[2]"

    class conf:
        @staticmethod
        def get(key, default=None):
            return {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "20"}.get(key, default)


def test_cli_out_of_memory_is_an_error_with_the_fix_exit_2(tmp_path, monkeypatch):
    """Through the command line: `Error:` with the setting and a value, exit 2, no traceback."""
    pytest.importorskip("pyspark")
    import xfid.engine.spark.engine as spark_engine
    from tests.test_engine_spark import rule_store
    from xfid.cli import cli
    from xfid.engine.spark.session import SparkSettings

    store, _ = rule_store(tmp_path)
    store.close()
    monkeypatch.setattr(SparkSettings, "spark", lambda self, config, records=None: FakeSession())

    def fail(*a, **k):
        raise Py4JJavaError(PY4J_OOM)

    monkeypatch.setattr(spark_engine, "_correlate", fail)
    with warnings.catch_warnings():
        r = CliRunner().invoke(cli, ["--store", str(tmp_path / "rules"), "correlate", "--engine", "spark"])
    assert r.exit_code == 2, r.output
    assert "Error: Spark (local[2]) ran out of memory" in r.output and "spark.driver.memory = " in r.output
    assert "[engine.spark] conf" in r.output and "Traceback" not in r.output


# --- the measured local-mode JVM options (sizing.LOCAL_JAVA_OPTIONS), through session.prepare


def _prepared(master: str | None, section: dict | None = None, conf: dict | None = None,
              records: int | None = 10_000_000) -> dict[str, str]:
    """What a new session of `master` would be given, from `[engine.spark] conf` = section and the
    caller's conf (as spark_session builds it, without starting Spark)."""
    from xfid.engine.spark.session import _settings, prepare

    cfg = config({"engine": {"spark": {"conf": section}}}) if section else None
    _, settings, user = _settings(cfg, master, conf)
    prepare(settings, user, master, records, 20 * GB)
    return settings


def _log4j_option() -> str:
    from xfid.engine.spark.session import LOG4J

    assert LOG4J.exists()
    return f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"


def test_the_jvm_options_are_the_ones_docs_give_a_measured_reason_for():
    from pathlib import Path

    from xfid.engine.spark.sizing import LOCAL_JAVA_OPTIONS

    assert LOCAL_JAVA_OPTIONS and all(o.startswith("-XX:") for o in LOCAL_JAVA_OPTIONS)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "scale.md").read_text()
    section = docs[docs.index("## Spark's local-mode settings"):]
    for option in LOCAL_JAVA_OPTIONS:
        assert option in section, option


@pytest.mark.parametrize("master", ["local[2]", "local", "local[*]", "local[4, 2]"])
def test_a_local_master_gets_the_jvm_options_after_the_log4j_option(master):
    from xfid.engine.spark.sizing import LOCAL_JAVA_OPTIONS

    for records in (10_000_000, None):  # with or without a record count to size the heap from
        options = _prepared(master, records=records)["spark.driver.extraJavaOptions"].split()
        assert options[0] == _log4j_option()  # the JVM still logs errors only
        assert options[1:] == list(LOCAL_JAVA_OPTIONS)


@pytest.mark.parametrize("master", ["yarn", "spark://h:7077", "k8s://https://x", "local-cluster[2,1,1024]"])
def test_a_cluster_master_gets_the_log4j_option_alone(master):
    s = _prepared(master)
    assert s["spark.driver.extraJavaOptions"] == _log4j_option()  # as before
    assert "spark.driver.memory" not in s and "spark.sql.shuffle.partitions" not in s


@pytest.mark.parametrize("where", ["section", "conf"])
def test_a_users_own_java_options_are_kept_whole(where):
    mine = {"spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dmy.flag=1"}
    s = _prepared("local[2]", **{where: mine})
    assert s["spark.driver.extraJavaOptions"] == "-XX:+UseG1GC -Dmy.flag=1"  # no log4j, no xfid options
    # the caller's conf wins over [engine.spark] conf, as for every setting
    both = _prepared("local[2]", section={"spark.driver.extraJavaOptions": "-Dfrom.toml=1"},
                     conf={"spark.driver.extraJavaOptions": "-Dfrom.caller=1"})
    assert both["spark.driver.extraJavaOptions"] == "-Dfrom.caller=1"


def test_other_user_settings_leave_the_jvm_options_and_are_kept():
    from xfid.engine.spark.sizing import LOCAL_JAVA_OPTIONS

    mine = {"spark.driver.memory": "3g", "spark.io.compression.codec": "zstd", "spark.driver.extraClassPath": "/x"}
    s = _prepared("local[2]", section=mine)
    assert {k: s[k] for k in mine} == mine
    assert s["spark.driver.extraJavaOptions"].split()[1:] == list(LOCAL_JAVA_OPTIONS)


SESSION_PROBE = """
import json, sys
from xfid.engine.spark.session import quiet, spark_session
with quiet():
    spark = spark_session(None, sys.argv[1], json.loads(sys.argv[2]), records=1000)
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    print(json.dumps(list(bean.getInputArguments())))
    spark.stop()
"""


def _jvm_arguments(master: str, conf: dict) -> list[str]:
    """The arguments the JVM of a new session (started as xfid starts one, in its own interpreter)
    reports it was started with."""
    import json
    import subprocess
    import sys

    from tests.test_engine_spark import CI, _missing_prerequisite

    why = _missing_prerequisite()
    if why:
        if CI:
            pytest.fail(f"CI=true and {why}: the Spark engine tests must run in CI")
        pytest.skip(why)
    p = subprocess.run([sys.executable, "-c", SESSION_PROBE, master, json.dumps(conf)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_started_local_session_runs_its_jvm_with_the_options_unless_the_user_gives_some():
    """With Java: the local JVM really runs with the options (the JVM's own list of its arguments),
    the log4j option first; a user's own options replace them."""
    from xfid.engine.spark.sizing import LOCAL_JAVA_OPTIONS

    args = _jvm_arguments("local[1]", {"spark.ui.enabled": "false"})
    assert _log4j_option() in args
    for option in LOCAL_JAVA_OPTIONS:
        assert option in args, (option, args)
    args = _jvm_arguments("local[1]", {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": "-Dxfid.mine=1"})
    assert "-Dxfid.mine=1" in args and _log4j_option() not in args
    assert not [o for o in LOCAL_JAVA_OPTIONS if o in args]
