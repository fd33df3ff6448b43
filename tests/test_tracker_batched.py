"""The batched filing of a check (recording.file_batched) against the per-row one (file_each).

The same checks and manual actions on two stores, one filing row by row (`_observe`), the other
deciding every row first and writing each table with one statement per kind of write: the
tracker's tables (issues, transitions, observations, checks, pending streaks) and the summaries
must be equal, on SQLite and on PostgreSQL (a real server: tests/servers.py).
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from tests.test_tracker_helpers import corr, row
from xfid.store import Store
from xfid.tracker import Tracker, recording
from xfid.tracker.noise import NoiseSettings

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NOISE = NoiseSettings(confirm_after=2)


def _check(tr: Tracker, i: int, *rows: dict[str, Any]) -> dict[str, Any]:
    return tr.record_check(corr(*rows), actor="ci", now=T0 + timedelta(hours=i), label=f"c{i}",
                           clean_checks_to_resolve=1, noise=NOISE).to_dict()


def _scenario(tr: Tracker) -> list[Any]:
    """Every kind of filing: new, still open, reopened, waived within and beyond its bound, a
    triaged issue seen again (said once, then only updated), resolved by a clean check, held,
    uncertain keys pending and then filed; rows with missing values and several rows of a key."""
    odd = row(2.0, op="h")  # values the conversions must keep: NaN, inf, no count, text in a number's place
    odd.update(log_ratio=float("nan"), tolerance_abs=math.inf, candidate_n=None, reference_run=None, unit=None)
    out = [_check(tr, 1, *(row(1.3 + i / 100, op=op) for i, op in enumerate("abcdefg")), odd,
                  row(1.12, op="u", kind="uncertain"), row(1.0, op="ok"), row(2.0, None, op="m"))]
    tr.transition("XF-2", "resolve", actor="lead", now=T0 + timedelta(minutes=5))
    tr.transition("XF-3", "waive", actor="lead", reason="known gap", until=date(2026, 12, 31), max_error=0.2,
                  now=T0 + timedelta(minutes=5))
    tr.transition("XF-4", "waive", actor="lead", reason="model gap", until=date(2026, 12, 31), max_error=1.0,
                  now=T0 + timedelta(minutes=5))
    tr.transition("XF-5", "invalid", actor="lead", reason="debug build", now=T0 + timedelta(minutes=5))
    tr.transition("XF-6", "duplicate", actor="lead", of="XF-1", now=T0 + timedelta(minutes=5))
    out.append(_check(tr, 2, row(1.25, op="a"), row(1.1, op="a"), row(1.4, op="b"), row(1.5, op="c"),
                      row(1.3, op="d"), row(1.35, op="e"), row(1.3, op="f"), row(1.02, op="g"), odd,
                      row(1.12, op="u", kind="uncertain"), row(1.13, op="v", kind="uncertain"),
                      row(1.6, op="n"), row(1.2, op="n")))
    out.append(_check(tr, 3, row(1.25, op="a"), row(1.4, op="b"), row(1.36, op="e"), row(1.3, op="f"),
                      row(1.099, op="d"), row(1.5, op="n", kind="bound_violation"),
                      row(1.13, op="v", kind="uncertain"), row(1.3, op="g")))
    return out


def _tables(tr: Tracker) -> dict[str, list[dict[str, Any]]]:
    conn = tr.conn
    out = {}
    for table, order in (("issues", "num"), ("transitions", "id"), ("observations", "id"), ("checks", "id"),
                         ("triage_pending", "fingerprint"), ("tracker_seq", "name")):
        rows = [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
        for r in rows:
            r.pop("rows_sha256", None)  # the file's footer names its store: differs between the two stores
        out[table] = rows
    return out


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_batched_filing_writes_what_the_per_row_filing_writes(tmp_path, monkeypatch, request, backend):
    got = {}
    for name, filing in (("each", recording.file_each), ("batched", recording.file_batched)):
        if backend == "postgresql":
            monkeypatch.setenv("XFID_DATABASE_URL", request.getfixturevalue("pg_server").database())
        else:
            monkeypatch.delenv("XFID_DATABASE_URL", raising=False)
        monkeypatch.setattr(recording, "FILE_ROWS", filing)
        with Store(tmp_path / name) as s:
            tr = Tracker(s)
            summaries = _scenario(tr)
            got[name] = (summaries, _tables(tr))
    (s_each, t_each), (s_batch, t_batch) = got["each"], got["batched"]
    assert s_batch == s_each
    for table in t_each:
        assert pd.DataFrame(t_batch[table]).equals(pd.DataFrame(t_each[table])), table
    # the scenario reached every kind of filing
    kinds = {(r["action"], r["from_state"], r["to_state"]) for r in t_each["transitions"]}
    assert {("detected", None, "open"), ("recurred", "resolved", "reopened"), ("waiver_exceeded", "waived", "open"),
            ("still_seen", "invalid", "invalid"), ("still_seen", "duplicate", "duplicate"),
            ("auto_resolved", "open", "resolved")} <= kinds
    assert [r["action"] for r in t_each["transitions"]].count("still_seen") == 2  # said once per verdict
    second, third = s_each[1], s_each[2]
    assert second["reopened"] and second["waived"] and second["still_open"] and second["triaged"]
    assert second["unwaived"] and second["resolved"] and second["pending"] and second["new"]
    assert third["triaged"] and third["new"] and third["reopened"] and third["still_open"]
    assert any("uncertain in 2 consecutive check(s)" in (r["note"] or "") for r in t_each["transitions"])


def test_column_conversions_match_the_per_value_ones():
    """db.observation_rows (column by column, arrays for numbers) against observation_values of each row."""
    from xfid.tracker import db

    frame = pd.DataFrame({
        "kind": pd.Series(["over_tolerance", "uncertain", None, "bound_violation"], dtype="string"),
        "severity": [1.5, float("nan"), math.inf, -0.0],
        "candidate_value": pd.Series(["1.5", None, "x", 2], dtype=object),
        "reference_value": pd.Series([1, 2, 3, 4], dtype="int64"),
        "unit": pd.Categorical(["s", None, "s", "us"]),
        "rel_error": pd.Series([0.1, None, 0.3, 0.4], dtype="Float64"),
        "candidate_n": pd.Series([1, None, 3, 4], dtype="Int64"),
        "reference_n": [2.0, math.inf, float("nan"), 7.9],
        "tolerance": [True, False, True, False],
        "candidate_run": pd.Series(["r1", {"a": 1}, [1, 2], 3.5], dtype=object),
        "note": [0.5, float("nan"), 2.0, 3.0],
    })
    want = [tuple(db.observation_values(r)) for r in frame.to_dict("records")]
    got = db.observation_rows(frame)
    assert got == want
    assert [type(v) for r in got for v in r] == [type(v) for r in want for v in r]
    assert db.column_values(frame, "target") == [None] * 4  # a column the frame lacks


@pytest.mark.parametrize("dtype", ["str", "string", object])
def test_isin_matches_pandas(dtype):
    """recording._isin (pyarrow's is_in for Arrow strings) against pandas' isin, missing values included."""
    values = pd.Series(["a", None, "c", "d", "a"], dtype=dtype)
    for among in (["a", "x"], ["c", None], [], [None], ["d", "a", "c", "e"]):
        theirs = pd.Series(among, dtype=dtype)
        assert recording._isin(values, theirs).tolist() == values.isin(theirs).tolist(), among


def test_summary_to_dict_is_asdict_with_the_counts():
    from dataclasses import asdict

    s = recording.CheckSummary(check_id=3, time="2026-12-01T09:00:00Z", new=["XF-1", "XF-2"], resolving=["XF-3 1/2"],
                               stack_changed=[{"key": ["a", "b"], "was": {"x": 1}}], stale={"keys": [{"k": 1}]},
                               uncertain=2, rows=10)
    d = s.to_dict()
    assert d == {**asdict(s), "counts": s.counts()}
    assert d["new"] is not s.new and d["stack_changed"][0] is not s.stack_changed[0]  # copies, as asdict's
