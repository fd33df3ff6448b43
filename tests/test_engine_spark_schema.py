"""The Spark engine's entries schema is derived from the record schema (xfid.schema.SCHEMA) and
the selection produces exactly it (the latter needs Java: it reuses test_engine_spark's session)."""

from __future__ import annotations

import pyarrow as pa

from tests.test_engine_spark import rule_store, spark  # noqa: F401 - the module's session fixture
from xfid.engine.spark.select import ENTRY_FIELDS, ENTRY_KEY, ENTRY_PROV, ENTRY_SCHEMA, READ
from xfid.schema import SCHEMA


def test_entry_fields_follow_the_record_schema():
    by_name = {f.name: f for f in ENTRY_FIELDS}
    for name in (*ENTRY_KEY, *ENTRY_PROV):
        t = SCHEMA.field(name).type
        assert by_name[name].type == (t.value_type if pa.types.is_dictionary(t) else t), name
    assert set(READ) <= set(SCHEMA.names)  # the selection reads record columns only
    assert ENTRY_SCHEMA.startswith("fidelity string, target string")


def test_selected_entries_have_the_declared_schema(spark, tmp_path):  # noqa: F811
    from pyspark.sql.types import _parse_datatype_string

    from xfid.engine.spark.select import select_spark
    from xfid.engine.spark.session import quiet

    store, cfg = rule_store(tmp_path)
    with quiet():
        sel = select_spark(spark, store, cfg)
        try:
            got = sel.entries.schema
        finally:
            sel.persisted.unpersist()
    want = _parse_datatype_string(ENTRY_SCHEMA)
    assert [(f.name, f.dataType) for f in got.fields] == [(f.name, f.dataType) for f in want.fields]


def test_spark_sql_fingerprints_are_the_same_bytes(spark):  # noqa: F811
    """engine.fingerprint_column (sha2 in Spark SQL) equals fingerprint() (hashlib), non-ASCII,
    separators' neighbours and empty fields included."""
    from xfid.engine.fingerprints import fingerprint
    from xfid.engine.schema import FINGERPRINT_FIELDS
    from xfid.engine.spark.engine import fingerprint_column

    keys = [("h100-sxm", "llama/decode/bs8", "gemm", "latency", "value", "archmodel", "measured"),
            ("t100-a0", "wörkload µs/日本", "attn.qkv_proj[m=64]", "bytes", "p99.9", "roofline-cal", "rtl"),
            ("", "w", "", "m", "", "a", "b"), ("a b", "x\ty", "op,1", "cycles", "max", "rtl", "measured")]
    df = spark.createDataFrame(keys, ", ".join(f"{c} string" for c in FINGERPRINT_FIELDS))
    got = [r[0] for r in df.select(fingerprint_column()).collect()]
    assert got == [fingerprint(*k) for k in keys]
