"""`check` with the rows handed to the tracker in chunks (issue 28, xfid.tracker.chunks).

The chunked check (a few rows per chunk, so that fingerprints, uncertain and ok rows fall on
chunk boundaries) and the one-frame check give the same tracker: the same issues, transitions,
observations, pending streaks and checks, the same summaries and the same check files, over
consecutive checks that file, reopen, hold and resolve.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import FIXTURES
from tests.test_engine_helpers import make_store, rec, write_csv
from tests.test_engine_spark import spark  # noqa: F401  (the module session fixture)
from tests.test_tracker_helpers import corr, row
from xfid.errors import TrackerError
from xfid.store import Store
from xfid.tracker import Tracker
from xfid.tracker.chunks import RowChunks
from xfid.tracker.noise import UNCERTAIN, NoiseSettings

STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
TRACKER_TABLES = ("issues", "transitions", "observations", "checks", "check_configs", "triage_pending",
                  "tracker_seq")
VARIES = {"rows_sha256"}  # the check file's bytes: one row group per chunk


def _plain(v: Any, home: str = "") -> Any:
    """A value with its timestamps and the runs' folder blanked (two runs of the same checks differ
    only in time and where their inputs were)."""
    if isinstance(v, str):
        return STAMP.sub("<t>", v.replace(home, "<home>") if home else v)
    return v


def _sources(text: str) -> str:
    """A check's sources in one order (the store lists them in an order of its own)."""
    return json.dumps(sorted(json.loads(text), key=lambda d: str(d.get("content_hash"))), sort_keys=True)


def _settings(text: str) -> str:
    """A check's settings less what says how Spark's rows came back (collected, or written as
    Parquet and read back: xfid.tracker.chunks)."""
    d = json.loads(text)
    for k in ("rows_returned", "rows_kept"):
        (d.get("spark") or {}).pop(k, None)
    return json.dumps(d, sort_keys=True)


def tracker_db(path: Path) -> dict[str, list[tuple]]:
    """Every tracker table of a store's database, row by row, timestamps and folder blanked."""
    home = str(path.parent)
    con = sqlite3.connect(path / "xfid.db")
    try:
        out = {}
        for t in TRACKER_TABLES:
            cur = con.execute(f"SELECT * FROM {t} ORDER BY rowid")
            cols = [d[0] for d in cur.description]
            out[t] = [tuple(_plain(_sources(v) if c == "sources" else _settings(v) if c == "settings" else v, home)
                            for c, v in zip(cols, r, strict=True) if c not in VARIES) for r in cur]
        return out
    finally:
        con.close()


def check_files(path: Path) -> list[pd.DataFrame]:
    """The check files' rows, in check order, categories as their strings, the folder blanked."""
    home = str(path.parent)
    files = sorted((path / "checks").glob("check-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    out = []
    for f in files:
        df = pq.read_table(f).to_pandas()
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(object)
            if c.endswith("source_path"):
                df[c] = df[c].map(lambda v: _plain(v, home))
        out.append(df)
    return out


def schemas(path: Path) -> list[Any]:
    return [pq.read_schema(f).remove_metadata()
            for f in sorted((path / "checks").glob("check-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))]


def summary(s: Any) -> dict[str, Any]:
    d = s.to_dict()
    d.pop("time")
    return json.loads(STAMP.sub("<t>", json.dumps(d, sort_keys=True, default=str)))


def assert_same_stores(a: Path, b: Path) -> None:
    da, db_ = tracker_db(a), tracker_db(b)
    for t in TRACKER_TABLES:
        assert da[t] == db_[t], t
    fa, fb = check_files(a), check_files(b)
    assert len(fa) == len(fb) > 0
    for i, (x, y) in enumerate(zip(fa, fb, strict=True)):
        pd.testing.assert_frame_equal(x, y, obj=f"check file {i + 1}")
    assert schemas(a) == schemas(b)


# --- the store: many keys, repeats on the measured side, consecutive runs of the model ----------
def _keys(rnd: random.Random) -> list[tuple[str, str, str, str]]:
    return [(t, w, f"op{o}", s) for t in ("ta", "tb") for w in ("w1", "w2", "w3") for o in range(8)
            for s in ("value", "p99") if rnd.random() < 0.8]


def _run(rnd: random.Random, keys: list, errors: dict, run: str, ts: str) -> list[dict[str, Any]]:
    return [rec("archmodel", o, 1.0 + errors[(t, w, o, s)], target=t, workload=w, stat=s, run=run, timestamp=ts)
            for t, w, o, s in keys]


def busy_store_steps(tmp: Path, seed: int) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """(the first files' records, the model's later runs): errors around the 10% tolerance, three
    repeats of the measured side for half of the keys (intervals: uncertain, held, ok), and each
    later run fixing some keys (resolve), breaking others (file) and bringing some back (reopen)."""
    rnd = random.Random(seed)
    keys = _keys(rnd)
    meas = []
    for t, w, o, s in keys:
        reps = 3 if rnd.random() < 0.5 else 1
        for _ in range(reps):
            meas.append(rec("measured", o, 1.0 + rnd.uniform(-0.04, 0.04) * (reps > 1), target=t, workload=w,
                            stat=s, run="m1", timestamp="2026-11-01T00:00:00Z"))
    errors = {k: rnd.choice((0.0, 0.02, 0.09, 0.1, 0.11, 0.3, -0.4)) for k in keys}
    first = _run(rnd, keys, errors, "a1", "2026-11-01T00:00:00Z")
    later = []
    for i in range(3):
        for k in keys:
            if rnd.random() < 0.35:
                errors[k] = rnd.choice((0.0, 0.01, 0.3, 0.1)) if errors[k] > 0.12 or errors[k] < -0.12 else \
                    rnd.choice((0.25, -0.3, 0.0, 0.095))
        later.append(_run(rnd, keys, errors, f"a{i + 2}", f"2026-11-0{i + 3}T00:00:00Z"))
    return [*meas, *first], later


TOML = ('[[compare]]\ncandidate = "archmodel"\nreference = "measured"\n\n[[tolerance]]\nrel = 0.10\n\n'
        '[tracker]\nconfirm_after = 2\nresolve_after = 2\n')


def busy_checks(tmp: Path, name: str, seed: int, check: Callable[[Any], dict[str, Any]],
                again: bool = False) -> tuple[Path, list[dict[str, Any]]]:
    """The busy store built in `tmp / name` and checked by `check(store)` after its first files and
    after each later run (`again`: once more on the same data at the end); returns (the store's
    folder, the summaries)."""
    from xfid.api import XfidStore

    first, later = busy_store_steps(tmp, seed)
    d = tmp / name
    d.mkdir()
    make_store(d, {"a.csv": first}, name="s").close()
    (d / "xfid.toml").write_text(TOML)
    with XfidStore(d / "s", d / "xfid.toml") as s:
        out = [check(s)]
        for i, recs in enumerate(later):
            s.ingest(write_csv(d / f"run{i}.csv", recs), adapter="xfid-records")
            out.append(check(s))
        if again:  # the same data again: streaks move on
            out.append(check(s))
    return d / "s", out


def run_busy(tmp: Path, name: str, chunk_rows: int | None, seed: int) -> tuple[Path, list[dict[str, Any]]]:
    return busy_checks(tmp, name, seed, lambda s: summary(s.check(actor="t", chunk_rows=chunk_rows)), again=True)


@pytest.mark.parametrize("seed", (1, 6))
def test_chunked_checks_equal_the_one_frame_checks(tmp_path, seed):
    whole, want = run_busy(tmp_path, "whole", None, seed)
    for size in (7, 1):
        got_path, got = run_busy(tmp_path, f"by{size}", size, seed)
        assert got == want, size
        assert_same_stores(got_path, whole)
    # the checks did what the test is for: filed, resolved, reopened, held uncertain rows, in several chunks
    assert sum(len(s["new"]) for s in want) > 7 and sum(len(s["resolved"]) for s in want) > 0
    assert sum(s["counts"]["uncertain"] for s in want) > 0 and sum(len(s["held"]) for s in want) > 0
    assert any(s["reopened"] for s in want) and any(s["pending"] for s in want)
    assert all(s["rows"] > 7 for s in want)


def test_chunked_check_on_the_demo_store_equals_the_one_frame_check(tmp_path):
    import xfid

    config = FIXTURES / "demo" / "xfid.toml"
    inputs = [FIXTURES / "records" / "archmodel.csv", FIXTURES / "records" / "measured.csv",
              FIXTURES / "demo" / "t100_block_model.csv"]
    got = {}
    for name, size in (("whole", None), ("by7", 7)):
        with xfid.open_store(tmp_path / name, config=config) as s:
            s.ingest(inputs)
            s.ingest(FIXTURES / "rtl" / "probe_output", adapter="cocotb")
            got[name] = [summary(s.check(actor="ci", chunk_rows=size)), summary(s.check(actor="ci", chunk_rows=size))]
    assert got["by7"] == got["whole"] and got["whole"][0]["new"]
    assert_same_stores(tmp_path / "by7", tmp_path / "whole")


# --- the tracker alone: duplicated fingerprints across chunk boundaries --------------------------
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _rows(step: int) -> list[dict[str, Any]]:
    """Rows whose fingerprints repeat (same key twice or three times, with equal, higher and missing
    severities), uncertain rows of filed and unfiled keys, ok rows after a filed row of their key."""
    out = []
    for i in range(12):
        op = f"op{i % 5}"  # 12 rows over 5 keys: each key two or three times
        err = [0.3, 0.5, 0.5, 0.02, 0.12, 0.05][(i + step) % 6]
        r = row(1.0 + err, op=op)
        if i % 4 == 3:
            r["kind"], r["rel_error_low"], r["rel_error_high"] = UNCERTAIN, 0.05, 0.15
        if i == 7:
            r["severity"] = None
        out.append(r)
    out.append(row(1.0, op="op9"))  # an ok key never filed
    out.append({**row(1.2, op="op8"), "kind": UNCERTAIN})  # uncertain only: pending, then filed
    out.append(row(1.5, op="op8", kind="bound_violation") if step == 2 else row(1.01, op="op7"))
    return out


def _record(tmp: Path, name: str, size: int | None) -> tuple[Path, list[dict[str, Any]]]:
    store = Store(tmp / name)
    tr = Tracker(store)
    sums = []
    for step in range(4):
        c = corr(*_rows(step))
        chunks = None if size is None else RowChunks.of_frame(c.rows, size)
        s = tr.record_check(c, actor="ci", now=T0 + timedelta(days=step), clean_checks_to_resolve=1,
                            noise=NoiseSettings(), rows=chunks)
        sums.append(summary(s))
    store.close()
    return tmp / name, sums


def test_record_in_chunks_equals_one_frame_with_repeated_fingerprints(tmp_path):
    whole, want = _record(tmp_path, "whole", None)
    for size in (1, 2, 3, 5, 100):
        got_path, got = _record(tmp_path, f"by{size}", size)
        assert got == want, size
        assert_same_stores(got_path, whole)
    assert any(s["new"] for s in want) and any(s["pending"] for s in want)


def test_a_filed_row_without_fingerprint_in_a_later_chunk_writes_nothing(tmp_path):
    store = Store(tmp_path / "s")
    tr = Tracker(store)
    rows = [row(1.5, op=f"op{i}") for i in range(6)]
    rows[4]["fingerprint"] = None
    c = corr(*rows)
    with pytest.raises(TrackerError, match=r"correlation row 4 .* has no fingerprint"):
        tr.record_check(c, actor="ci", now=T0, rows=RowChunks.of_frame(c.rows, 2))
    assert tr.checks() == [] and not [p for p in (tmp_path / "s" / "checks").iterdir()]
    store.close()


def test_chunks_are_positioned_and_read_again(tmp_path):
    frame = pd.DataFrame({"x": range(10)}, index=range(100, 110))
    chunks = RowChunks.of_frame(frame, 3, transform=lambda f: f.assign(y=f["x"] * 2))
    parts = list(chunks)
    assert [len(p) for p in parts] == [3, 3, 3, 1]
    assert [list(p.index) for p in parts] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [r["y"] for r in chunks.records([9, 2, 3, 2])] == [4, 6, 18]
    assert len(list(chunks)) == 4  # again
    assert [len(p) for p in RowChunks.of_frame(frame.iloc[:0], 3)] == [0]
    with pytest.raises(TrackerError, match="rows per chunk"):
        RowChunks.of_frame(frame, 0)


# --- Spark: the executors write the discrepancies, the tracker reads them back in chunks -------------
def _spark_runs(tmp: Path, name: str, chunked: bool, seed: int) -> tuple[Path, list[dict[str, Any]]]:
    """The busy store's checks under Spark: `chunked`, as `check` does it (the discrepancies written
    by the executors, read back 7 rows at a time); else the collected rows given as one frame."""
    from xfid.engine.engines import open_fingerprints

    def check(s: Any) -> dict[str, Any]:
        if chunked:
            return summary(s.check(actor="t", engine="spark", chunk_rows=7))
        req = s.request().but(track=tuple(open_fingerprints(s.tracker)))
        return summary(s.check(actor="t", correlation=s.correlate(request=req, engine="spark")))

    store, out = busy_checks(tmp, name, seed, check)
    assert not [p for p in (store / "checks").iterdir() if p.name.startswith(".check-rows-")]
    return store, out


def test_spark_check_reads_the_written_discrepancies_in_the_collected_order(spark, tmp_path):  # noqa: F811
    whole, want = _spark_runs(tmp_path, "collected", False, 1)
    got_path, got = _spark_runs(tmp_path, "chunked", True, 1)
    assert got == want
    assert_same_stores(got_path, whole)
    assert sum(len(s["new"]) for s in want) > 7 and sum(len(s["resolved"]) for s in want) > 0
    assert any(s["reopened"] for s in want) and sum(s["counts"]["uncertain"] for s in want) > 0


def test_the_rows_file_takes_later_chunks_with_values_and_categories_the_first_lacked(tmp_path):
    from xfid.tracker import checkfiles

    first = pd.DataFrame({"op": pd.Categorical(["a"]), "note": [None], "rel_error_low": [None], "x": [1.0]})
    later = pd.DataFrame({"op": pd.Categorical([f"op{i}" for i in range(300)]), "note": ["n"] * 300,
                          "rel_error_low": [0.5] * 300, "x": [2.0] * 300})
    path = checkfiles.write_temp_chunks(tmp_path, [first, later], "sid")
    got = pq.read_table(path).to_pandas()
    assert len(got) == 301 and list(got["op"].astype(str)[:2]) == ["a", "op0"]
    assert got["note"].iloc[0] is None or pd.isna(got["note"].iloc[0])
    assert got["note"].iloc[1] == "n" and got["rel_error_low"].iloc[1] == 0.5


@pytest.mark.parametrize("seed", (1, 6))
def test_repeats_of_the_rows_keys_only_give_the_same_intervals(tmp_path, seed):
    """The lookup restricted to the rows' keys (what check builds) against the plain one, which
    reads every record of the rows' targets and runs."""
    from xfid.api import XfidStore
    from xfid.tracker import noise

    first, later = busy_store_steps(tmp_path, seed)
    make_store(tmp_path, {"a.csv": first, "b.csv": later[0]}, name="s").close()
    (tmp_path / "xfid.toml").write_text(TOML)
    with XfidStore(tmp_path / "s", tmp_path / "xfid.toml") as s:
        rows = s.correlate(engine="local").rows
        settings = noise.NoiseSettings()
        plain, n_plain = noise.attach_rows(rows, noise.store_repeats(s.backend(), s.config, rows), settings)
        targets, runs = noise.repeats_needed(rows)
        keyed = noise.repeats_of(s.backend(), s.config, targets, runs, noise.repeats_keys(rows))
        got, n_got = noise.attach_rows(rows, keyed, settings)
    pd.testing.assert_frame_equal(got, plain)
    assert n_got == n_plain > 5


def test_the_stale_summary_gathers_the_rows_only_when_it_can_use_them(tmp_path, monkeypatch):
    """The first `stale_after` checks of a store gather nothing of their rows for the stale summary
    (it lists nothing before them: on a large store that gathering was the local check's driver
    peak); later checks gather it chunk by chunk, and the summary equals the one read from the
    check files (stale.find given no rows)."""
    from xfid.api import XfidStore
    from xfid.tracker import stale

    gathered: list[int] = []
    add_seen = stale.add_seen

    def counting(out: Any, rows: Any) -> Any:
        gathered.append(len(rows))
        return add_seen(out, rows)

    first, later = busy_store_steps(tmp_path, 1)
    d = tmp_path / "gate"
    d.mkdir()
    make_store(d, {"a.csv": first}, name="s").close()
    (d / "xfid.toml").write_text(TOML + "stale_after = 2\n")
    with XfidStore(d / "s", d / "xfid.toml") as s:
        per_check = []
        for i in range(4):
            if i:
                s.ingest(write_csv(d / f"run{i}.csv", later[i - 1][: len(later[i - 1]) // (i + 1)]),
                         adapter="xfid-records")  # fewer keys each time: some go stale
            gathered.clear()
            monkeypatch.setattr(stale, "add_seen", counting)
            got = s.check(actor="t", chunk_rows=7)
            monkeypatch.setattr(stale, "add_seen", add_seen)
            per_check.append((sum(gathered), got.rows))  # its rows, and the earlier checks' read back by find
            assert got.stale == stale.find(s.tracker, got.check_id, stale.StaleSettings(2, 10)), i
    assert [n for n, _ in per_check[:2]] == [0, 0]
    assert all(n >= rows > 0 for n, rows in per_check[2:])
    assert got.stale["keys"]  # the last check did list stale keys
