"""The Spark engine's entries schema is derived from the record schema (xfid.schema.SCHEMA) and
the selection produces exactly it (the latter needs Java: it reuses test_engine_spark's session)."""

from __future__ import annotations

import pyarrow as pa

from tests.test_engine_spark import rule_store, spark  # noqa: F401 - the module's session fixture
from xfid.engine.spark.groups import ENTRY_FIELDS, ENTRY_KEY, ENTRY_PROV, ENTRY_SCHEMA
from xfid.engine.spark.select import READ
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
