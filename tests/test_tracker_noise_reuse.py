"""A check takes the noise interval of a row whose inputs are unchanged from the check before it.

An interval is a function of both sides' repeats (in order), the row's error, its key's seed and
the noise settings (noise.interval_key hashes exactly those), so a row with the same hash as a row
of the last check gets that row's interval: the same numbers, without drawing the resamples again.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.test_tracker_helpers import corr, row
from xfid.tracker import noise
from xfid.tracker.noise import (
    NOISE_KEY,
    KnownIntervals,
    NoiseSettings,
    attach_rows,
    interval,
    interval_key,
)

CAND, REF = np.array([1.0, 1.1, 0.9]), np.array([1.2, 1.25, 1.18])


def test_the_key_holds_every_input_of_the_interval():
    s = NoiseSettings()
    base = interval_key(CAND, REF, 0.05, "ab12", s)
    assert base == interval_key(CAND.tolist(), REF.copy(), 0.05, "ab12", s) and len(base) == 32
    others = [
        interval_key(CAND[::-1], REF, 0.05, "ab12", s),  # the draws pick by position
        interval_key(CAND, REF[:2], 0.05, "ab12", s),
        interval_key(REF, CAND, 0.05, "ab12", s),  # the sides swapped
        interval_key(np.r_[CAND, REF], np.array([]), 0.05, "ab12", s),  # the same bytes split otherwise
        interval_key(CAND, REF, 0.05 + 1e-16, "ab12", s),
        interval_key(CAND, REF, 0.05, "ab13", s),
        interval_key(CAND, REF, 0.05, "ab12", NoiseSettings(seed=1)),
        interval_key(CAND, REF, 0.05, "ab12", NoiseSettings(resamples=2001)),
        interval_key(CAND, REF, 0.05, "ab12", NoiseSettings(level=0.9)),
    ]
    assert len({base, *others}) == len(others) + 1
    # what does not change the interval does not change the key: the verdict's tolerance and hysteresis
    assert interval_key(CAND, REF, 0.05, "ab12", NoiseSettings(hysteresis=0.5, confirm_after=5)) == base


def test_known_intervals_find_exact_keys():
    f1 = pd.DataFrame({NOISE_KEY: ["b" * 32, None, "a" * 32], "rel_error_low": [0.1, np.nan, -0.2],
                       "rel_error_high": [0.3, np.nan, np.nan]})
    f2 = pd.DataFrame({NOISE_KEY: ["c" * 32], "rel_error_low": [1.0], "rel_error_high": [2.0]})
    k = KnownIntervals.of([f1, pd.DataFrame({"x": [1]}), f2])
    assert len(k) == 3
    at = k.find(["a" * 32, "d" * 32, "c" * 32, "b" * 31, "b" * 32])
    assert list(at >= 0) == [True, False, True, False, True]
    assert (k.low[at[0]], np.isnan(k.high[at[0]]), k.low[at[4]], k.high[at[2]]) == (-0.2, True, 0.1, 2.0)
    assert list(KnownIntervals.of([]).find(["a" * 32])) == [-1]


def frame() -> pd.DataFrame:
    c = corr(*(row(1.0 + i / 50, op=f"op{i}") for i in range(6)))
    c.rows["candidate_n"], c.rows["reference_n"] = 3, 3
    return c.rows


def repeats(shift: dict[str, float]):
    def look(r):
        i = int(str(r["op"])[2:])
        return CAND * (1 + i / 50), REF * (1 + shift.get(str(r["op"]), 0.0))
    return look


@pytest.fixture
def computed(monkeypatch) -> list[int]:
    """The number of intervals each call of noise.intervals computes."""
    calls: list[int] = []
    plain = noise.intervals

    def counting(items, settings=None):
        calls.append(len(items))
        return plain(items, settings or NoiseSettings())

    monkeypatch.setattr(noise, "intervals", counting)
    return calls


def test_attach_takes_known_intervals_and_computes_only_the_others(computed):
    first, n = attach_rows(frame(), repeats({}))
    assert n == 6 and computed == [6] and first[NOISE_KEY].notna().all()
    known = KnownIntervals.of([first])
    again, n = attach_rows(frame(), repeats({}), known=known)
    assert n == 6 and computed == [6, 0]
    pd.testing.assert_frame_equal(again, first)
    moved, n = attach_rows(frame(), repeats({"op4": 0.01}), known=known)  # one key's reference repeats moved
    assert n == 6 and computed == [6, 0, 1]
    fresh, _ = attach_rows(frame(), repeats({"op4": 0.01}))  # the same rows computed from nothing
    pd.testing.assert_frame_equal(moved, fresh)
    r4 = moved.set_index("op").loc["op4"]
    lo, hi = interval(CAND * 1.08, REF * 1.01, float(r4["rel_error"]), fingerprint=r4["fingerprint"])
    assert (r4["rel_error_low"], r4["rel_error_high"]) == (lo, hi)
    other = attach_rows(frame(), repeats({}), NoiseSettings(resamples=999), known=known)[0]  # other settings
    assert computed[-1] == 6 and not other[NOISE_KEY].isin(first[NOISE_KEY]).any()


def measured_csv(path, ops: dict[str, list[float]]) -> None:
    head = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
    lines = [f"measured,h100-sxm,w/decode,{op},latency,mean,{v},us,nsys-1,2026-11-27T15:00:00Z\n"
             for op, vs in ops.items() for v in vs]
    path.write_text(head + "".join(lines))


@pytest.mark.parametrize("backend,chunk_rows", [("sqlite", None), ("sqlite", 3), ("postgresql", None)])
def test_a_check_reuses_the_last_checks_intervals(tmp_path, monkeypatch, request, computed, backend, chunk_rows):
    """One frame and in chunks (read up to three times: nothing computed twice); on the team store
    too (PostgreSQL catalog, the rows files in its records folder)."""
    import xfid.api as api

    if backend == "postgresql":
        monkeypatch.setenv("XFID_DATABASE_URL", request.getfixturevalue("pg_server").database())
        monkeypatch.setenv("XFID_RECORDS_URL", str(tmp_path / "records"))
    else:
        monkeypatch.delenv("XFID_DATABASE_URL", raising=False)

    arch = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n" + "".join(
        f"archmodel,h100-sxm,w/decode,op{i},latency,value,{10 + i},us,arch-1,2026-11-18T12:00:00Z\n" for i in range(8))
    (tmp_path / "arch.csv").write_text(arch)
    measured_csv(tmp_path / "m1.csv", {f"op{i}": [10.5 + i, 10.9 + i, 11.6 + i] for i in range(8)})
    s = api.open_store(tmp_path / "st")
    s.ingest([tmp_path / "arch.csv", tmp_path / "m1.csv"])
    cols = ["op", "rel_error", "rel_error_low", "rel_error_high", "noise", NOISE_KEY, "kind"]

    def check() -> pd.DataFrame:
        out = s.check(actor="t", chunk_rows=chunk_rows)
        return s.tracker.check_rows(out.check_id)[cols].sort_values("op").reset_index(drop=True)

    one = check()
    assert sum(computed) == 8 and one[NOISE_KEY].notna().all()
    two = check()
    assert sum(computed) == 8  # nothing changed: every interval taken from check 1
    pd.testing.assert_frame_equal(one, two)
    measured_csv(tmp_path / "m2.csv", {"op3": [12.2]})  # a fourth repeat of one key
    s.ingest([tmp_path / "m2.csv"])
    three = check()
    assert sum(computed) == 9  # that key's interval only
    r3 = three.set_index("op").loc["op3"]
    lo, hi = interval(np.array([13.0]), np.array([13.5, 13.9, 14.6, 12.2]), float(r3["rel_error"]),
                      fingerprint=s.tracker.check_rows(3).set_index("op").loc["op3", "fingerprint"])
    assert (r3["rel_error_low"], r3["rel_error_high"]) == (lo, hi) and r3["noise"] == "interval: 1 x 4 repeats, 95%, exact"
    pd.testing.assert_frame_equal(three[three.op != "op3"], two[two.op != "op3"])


def test_a_check_without_repeats_reads_no_earlier_rows(tmp_path, monkeypatch):
    """The last check's rows file is read only when a row with repeats looks up its interval."""
    import xfid.api as api
    from xfid.tracker import Tracker

    arch = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n" + "".join(
        f"archmodel,h100-sxm,w/decode,op{i},latency,value,{10 + i},us,arch-1,2026-11-18T12:00:00Z\n" for i in range(4))
    (tmp_path / "arch.csv").write_text(arch)
    measured_csv(tmp_path / "m1.csv", {f"op{i}": [10.5 + i] for i in range(4)})  # one record a key
    reads = []
    plain = Tracker.check_row_chunks

    def reading(self, check_id, columns=None, **k):
        if columns is not None and NOISE_KEY in columns:  # the intervals' lookup (the stale summary reads others)
            reads.append(check_id)
        return plain(self, check_id, columns, **k)

    monkeypatch.setattr(Tracker, "check_row_chunks", reading)
    s = api.open_store(tmp_path / "st")
    s.ingest([tmp_path / "arch.csv", tmp_path / "m1.csv"])
    s.check(actor="t")
    s.check(actor="t")
    assert reads == []
    measured_csv(tmp_path / "m2.csv", {"op1": [11.9]})  # now one key has repeats
    s.ingest([tmp_path / "m2.csv"])
    s.check(actor="t")
    assert reads == [2]
