"""The local engine's arrays in normal pages where the kernel would stall on huge pages
(xfid.engine.pipeline.small_pages): the setting is read right, restored, and changes nothing in
the result (the same correlation as with numpy's huge-page advice left on)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.test_engine_helpers import config, make_store, rec
from xfid.engine import pipeline


@pytest.mark.parametrize(("text", "stalls"), [
    ("always defer defer+madvise [madvise] never\n", True),
    ("always defer [defer+madvise] madvise never\n", True),
    ("[always] defer defer+madvise madvise never\n", False),
    ("always [defer] defer+madvise madvise never\n", False),
    ("always defer defer+madvise madvise [never]\n", False),
    ("", False),
])
def test_the_defrag_setting_is_read_from_its_brackets(tmp_path, text, stalls):
    f = tmp_path / "defrag"
    f.write_text(text)
    assert pipeline.stalls_on_huge_pages(f) is stalls


def test_no_defrag_setting_means_no_stall(tmp_path):
    assert pipeline.stalls_on_huge_pages(tmp_path / "missing") is False


def _small(kind: str) -> bool:
    """Whether small pages are in force now: numpy's huge-page advice off ("numpy"), or
    transparent huge pages off for the process ("process": Arrow's allocator, mimalloc, advises
    huge pages for its arenas too, so numpy's switch alone left most of the kernel time:
    docs/scale.md, fourth pass)."""
    if kind == "numpy":
        setter = pipeline._hugepage_setter()
        was = setter(True)
        setter(was)
        return not was
    switch = pipeline._thp_switch()
    was = switch(True)
    switch(was)
    return was


@pytest.mark.parametrize("stalls", [True, False])
@pytest.mark.parametrize("kind", ["numpy", "process"])
def test_small_pages_turns_huge_pages_off_only_where_they_stall_and_restores_them(monkeypatch, kind, stalls):
    if (pipeline._hugepage_setter() if kind == "numpy" else pipeline._thp_switch()) is None:
        pytest.skip(f"no {kind} huge-page switch here (an old numpy, or not Linux)")
    monkeypatch.setattr(pipeline, "stalls_on_huge_pages", lambda: stalls)
    before = _small(kind)
    with pipeline.small_pages():
        assert _small(kind) is (True if stalls else before)
    assert _small(kind) is before
    with pytest.raises(RuntimeError), pipeline.small_pages():
        raise RuntimeError("an engine error")
    assert _small(kind) is before


def test_the_correlation_is_the_same_either_way(tmp_path, monkeypatch):
    store = make_store(tmp_path, {
        "m.csv": [rec("measured", op, v) for op, v in (("gemm", 1.0e-3), ("mlp", 2.0e-3), ("attn", 3.0e-3))]
        + [rec("measured", "gemm", 1.1e-3, workload="w2")],
        "a.csv": [rec("archmodel", op, v) for op, v in (("gemm", 1.2e-3), ("mlp", 1.5e-3), ("attn", 3.1e-3))],
        "r.csv": [rec("roofline", op, v) for op, v in (("gemm", 0.5e-3), ("mlp", 2.5e-3), ("attn", 1.0e-3))],
    })
    got = {}
    for stalls in (True, False):
        monkeypatch.setattr(pipeline, "stalls_on_huge_pages", lambda s=stalls: s)
        got[stalls] = pipeline.correlate(store, config())
    assert len(got[True].rows) and len(got[True].discrepancies)
    for part in ("rows", "comparisons", "discrepancies", "coverage"):
        pd.testing.assert_frame_equal(getattr(got[True], part), getattr(got[False], part))


def test_a_process_with_huge_pages_off_already_keeps_them_off(monkeypatch):
    switch = pipeline._thp_switch()
    if switch is None:
        pytest.skip("no prctl THP switch here (not Linux)")
    monkeypatch.setattr(pipeline, "stalls_on_huge_pages", lambda: True)
    was = switch(True)
    try:
        with pipeline.small_pages():
            assert _small("process") is True
        assert _small("process") is True
    finally:
        switch(was)
