"""`xfid correlate -o DIR.parquet` / `correlate(out=...)`: the discrepancies as a Parquet dataset.

Spark's executors write the parts (nothing of the discrepancies is collected to the driver); the
local engine writes the same layout from its frame. A reader of the dataset gets the same rows
and values as the collected path (and as the local engine), the comparisons (violation ids
included) are the collected path's, and the `-o` guard holds for the folder: never in a store,
never over something xfid did not write, nothing half-written on failure.

The Spark tests reuse tests/test_engine_spark.py's module session fixture (local[2], 1 GB heap).
"""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.test_engine_helpers import config, make_store
from tests.test_engine_oracle import (
    COMPARED_ROW_COLUMNS,
    assert_frames_equal,
    random_options,
    random_store_files,
)
from tests.test_engine_spark import rule_store, spark  # noqa: F401  (the module session fixture)
from xfid.engine import correlate, dataset
from xfid.engine.request import Request
from xfid.errors import XfidError


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return dataset.sort_rows(frame[list(dataset.COLUMNS)].astype(object).where(frame.notna(), None)
                             if len(frame) else frame[list(dataset.COLUMNS)])


def _same_rows(got: pd.DataFrame, want: pd.DataFrame, what: str) -> None:
    assert_frames_equal(_sorted(got), _sorted(want), COMPARED_ROW_COLUMNS, what)


def _api(tmp_path, store, user=None):
    from xfid.api import XfidStore

    toml = tmp_path / "xfid.toml"
    toml.write_text(user or "")
    store.close()
    return XfidStore(store.root, toml)


def test_local_engine_writes_the_dataset_of_its_discrepancies(tmp_path):
    store, cfg = rule_store(tmp_path)
    want = correlate(store, cfg, include_missing=True)
    out = tmp_path / "d.parquet"
    req = Request.of(include_missing=True, out=str(out))
    from xfid.engine.engines import get_engine

    with pytest.raises(FileNotFoundError):
        dataset.dataset(out, check=False).count_rows()
    get_engine(cfg, "local").correlate(store, cfg, req)
    got = dataset.dataset(out, check=False).to_table()
    assert got.schema.equals(dataset.DATASET_SCHEMA)
    assert got.num_rows == len(want.discrepancies) > 0
    _same_rows(got.to_pandas(), want.discrepancies, "local dataset")


def test_api_out_is_atomic_marked_and_replaces_only_its_own(tmp_path, monkeypatch):
    store, _ = rule_store(tmp_path)
    toml = ('[[op_map]]\nsource = "*"\nmatch = "^attn_qkv"\nop = "attn.qkv_proj"\n\n[[compare]]\n'
            'candidate = "roofline"\nreference = "measured"\n')
    out = tmp_path / "res.parquet"
    with _api(tmp_path, store, toml) as s:
        want = s.correlate(engine="local")
        got = s.correlate(engine="local", out=out)
        assert got.settings["output"] == {"dataset": str(out), "format": dataset.FORMAT,
                                          "rows": len(want.discrepancies)}
        assert dataset.summary(out)["rows"] == len(want.discrepancies) > 0
        _same_rows(dataset.read_frame(out), want.discrepancies, "API dataset")
        summary = json.loads((out / dataset.SUMMARY).read_text())
        assert summary["discrepancies"] == [] and summary["comparisons"] == json.loads(want.to_json())["comparisons"]
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".res")) == []
        # our own dataset is replaced; a failed write leaves it as it was and no temp folder
        s.correlate(engine="local", out=out)
        before = sorted(p.name for p in out.iterdir())

        def boom(frame, folder):
            from pathlib import Path

            Path(folder).mkdir()
            (Path(folder) / "part-00000.parquet").write_bytes(b"half")
            raise XfidError("disk full (simulated)")

        monkeypatch.setattr(dataset, "write_frame", boom)
        with pytest.raises(XfidError, match="simulated"):
            s.correlate(engine="local", out=out)
        assert sorted(p.name for p in out.iterdir()) == before
        assert [p.name for p in tmp_path.iterdir() if ".xfid-" in p.name] == []
        with pytest.raises(XfidError, match=r"must be a folder name ending in \.parquet"):
            s.correlate(engine="local", out=tmp_path / "res.json")


def _cli(args):
    from xfid.cli import cli

    return CliRunner().invoke(cli, args)


def test_cli_refuses_a_bad_dataset_output_with_an_error(tmp_path):
    store, _ = rule_store(tmp_path)
    root = store.root
    store.close()
    base = ["--store", str(root), "correlate", "--engine", "local"]
    listing = sorted(p.name for p in tmp_path.rglob("*"))

    inside = _cli([*base, "-o", str(root / "x.parquet")])
    assert inside.exit_code == 2 and "Error:" in inside.output and "inside the store" in inside.output
    file = tmp_path / "f.parquet"
    file.write_bytes(b"not ours")
    a_file = _cli([*base, "-o", str(file)])
    assert a_file.exit_code == 2 and "is a file that is not a discrepancy dataset" in a_file.output
    assert file.read_bytes() == b"not ours"
    other = tmp_path / "other.parquet"
    other.mkdir()
    (other / "part-0.parquet").write_bytes(b"someone else's")
    a_dir = _cli([*base, "-o", str(other)])
    assert a_dir.exit_code == 2 and "is a folder that is not a discrepancy dataset" in a_dir.output
    assert [p.name for p in other.iterdir()] == ["part-0.parquet"]
    fmt = _cli([*base, "--format", "json", "-o", str(tmp_path / "y.parquet")])
    assert fmt.exit_code == 2 and "--format json does not apply" in fmt.output
    nowhere = _cli([*base, "-o", str(tmp_path / "no" / "z.parquet")])
    assert nowhere.exit_code == 2 and "does not exist (create it first)" in nowhere.output
    for r in (inside, a_file, a_dir, fmt, nowhere):
        assert "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*listing, "f.parquet", "other.parquet",
                                                                 "part-0.parquet"])


def test_a_dataset_folder_never_lands_in_a_store(tmp_path):
    """Into the store's folder, its records, a partition, through a symlink, or a folder that holds
    a store: Error:, exit 2, nothing written (the guard as a folder, before anything runs)."""
    holder = tmp_path / "hold.parquet"
    holder.mkdir()
    store, _ = rule_store(holder)
    root = store.root
    store.close()
    link = tmp_path / "link.parquet"
    link.symlink_to(root / "records")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    part = next((root / "records").glob("fidelity=*"))
    for dest in (root / "x.parquet", root / "records" / "x.parquet", part / "x.parquet", link, holder,
                 root / ".." / "rules" / "y.parquet"):
        for engine in ("local", "spark"):  # refused before any engine starts
            r = _cli(["--store", str(root), "correlate", "--engine", engine, "-o", str(dest)])
            assert r.exit_code == 2, (dest, r.output)
            assert "Error:" in r.output and "store" in r.output and "Traceback" not in r.output, (dest, r.output)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_cli_local_writes_and_rewrites_the_dataset(tmp_path):
    store, _ = rule_store(tmp_path)
    root = store.root
    store.close()
    out = tmp_path / "d.parquet"
    for _ in range(2):  # the second run replaces the first one's dataset
        r = _cli(["--store", str(root), "correlate", "--engine", "local", "-o", str(out)])
        assert r.exit_code == 0, r.output
        assert r.stdout == "" and f"wrote {out}: " in r.stderr
    assert dataset.summary(out)["engine"] == "local"
    plain = _cli(["--store", str(root), "correlate", "--engine", "local", "--format", "json"])
    disc = pd.DataFrame(json.loads(plain.stdout)["discrepancies"])
    got = dataset.read_frame(out)
    assert len(got) == len(disc) > 0
    assert set(got["fingerprint"].dropna()) == set(disc["fingerprint"].dropna())


# --- Spark --------------------------------------------------------------------------------

def _spark_out(store, cfg, session, out, **kw):
    from xfid.engine.spark import correlate as run

    return run(store, cfg, Request.of(out=str(out), **kw), spark=session)


@pytest.mark.parametrize("kw", [{}, {"runs": {"archmodel": "a1"}, "include_missing": True},
                                {"fingerprints": "discrepancies", "include_missing": True}],
                         ids=["default", "run-include-missing", "fingerprints-of-discrepancies"])
def test_spark_executors_write_what_the_collected_path_brings_back(spark, tmp_path, kw):  # noqa: F811
    from xfid.engine.spark import correlate as run

    store, cfg = rule_store(tmp_path)
    collected = run(store, cfg, spark=spark, **kw)
    out = tmp_path / "spark.parquet"
    written = _spark_out(store, cfg, spark, out, **kw)
    assert len(written.discrepancies) == 0 and written.settings["spark"]["rows_returned"] == 0
    table = dataset.dataset(out, check=False).to_table()
    assert table.schema.equals(dataset.DATASET_SCHEMA)
    assert table.num_rows == len(collected.discrepancies) > 0
    _same_rows(table.to_pandas(), collected.discrepancies, f"spark dataset {kw}")
    # the comparisons (bound violations' ids included) are the collected path's
    pd.testing.assert_frame_equal(written.comparisons, collected.comparisons)
    assert any(v for v in written.comparisons["violation_ids"].dropna())
    # and the same rows as the local engine writes
    local_out = tmp_path / "local.parquet"
    from xfid.engine.engines import get_engine

    get_engine(cfg, "local").correlate(store, cfg, Request.of(out=str(local_out), **kw))
    _same_rows(table.to_pandas(), dataset.dataset(local_out, check=False).to_table().to_pandas(),
               f"spark vs local dataset {kw}")


@pytest.mark.parametrize("seed", (3, 10))
def test_spark_dataset_equals_local_on_random_stores(spark, tmp_path, seed):  # noqa: F811
    rnd = random.Random(seed)
    files = random_store_files(rnd)
    user, kw = random_options(rnd)
    store = make_store(tmp_path, files, name=f"r{seed}")
    cfg = config(user)
    want = correlate(store, cfg, **kw)
    out = tmp_path / "r.parquet"
    got = _spark_out(store, cfg, spark, out, **kw)
    _same_rows(dataset.dataset(out, check=False).to_table().to_pandas(), want.discrepancies, f"seed {seed}")
    pd.testing.assert_frame_equal(got.comparisons, want.comparisons, check_exact=False, rtol=1e-9)


def test_cli_spark_dataset_is_the_local_one(spark, tmp_path):  # noqa: F811
    store, _ = rule_store(tmp_path)
    root = store.root
    store.close()
    toml = tmp_path / "xfid.toml"
    toml.write_text('[[op_map]]\nsource = "*"\nmatch = "^attn_qkv"\nop = "attn.qkv_proj"\n\n'
                    '[[compare]]\ncandidate = "roofline"\nreference = "measured"\n\n'
                    '[engine.spark]\nmaster = "local[2]"\n')
    got = {}
    where = tmp_path / "out dir %20 é"  # a space, a %-escape look-alike, non-ASCII: the folder keeps its name
    where.mkdir()
    for engine in ("spark", "local"):
        out = where / f"{engine}.parquet"
        r = _cli(["--store", str(root), "--config", str(toml), "correlate", "--engine", engine, "-o", str(out)])
        assert r.exit_code == 0, r.output
        assert dataset.summary(out)["engine"] == engine
        got[engine] = dataset.read_frame(out)
        summary = json.loads((out / dataset.SUMMARY).read_text())
        got[engine + "-comparisons"] = summary["comparisons"]
    _same_rows(got["spark"], got["local"], "CLI datasets")
    assert sorted(p.name for p in where.iterdir()) == ["local.parquet", "spark.parquet"]
    assert len(got["spark"]) > 0
    assert got["spark-comparisons"] == got["local-comparisons"]


def test_calls_that_read_the_discrepancies_refuse_a_request_that_writes_them(tmp_path):
    from xfid.api import compare

    store, _ = rule_store(tmp_path)
    out = tmp_path / "never.parquet"
    req = Request.of(out=str(out))
    with _api(tmp_path, store) as s:
        for call in (lambda: s.check(actor="t", request=req), lambda: s.snapshot(request=req),
                     lambda: s.calibrate("roofline", "measured", "h100-sxm", request=req),
                     lambda: compare({"aggregates": []}, s, request=req)):
            with pytest.raises(XfidError, match="is for correlate"):
                call()
        assert len(s.issues()) == 0  # refused before the check recorded anything
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".xfid-" in p.name]
