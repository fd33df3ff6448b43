"""Report plots: every text inside its figure, no overlapping tick labels, dates on time axes, one
colour scale per quantity, sparse heatmaps as tables, literal (never mathtext) names, SVG that is
self-contained and deterministic.

The layout checks read the text bounding boxes matplotlib itself reports after a draw
(`fig.canvas.draw()`, `Text.get_window_extent(renderer)`), on the demo-like synthetic data and on
hostile data: 200-character names, 40 workloads / op classes / checks, values from 1e-15 to 1e15.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest

from xfid.report import plots
from xfid.report.data import PairSection
from xfid.report.synthetic import synthetic_report

LONG = "llama3-70b/prefill/bs1024/ctx131072/" + "x" * 120 + "/$\\frac{1}{0}$<img src=x>"
EVIL_LABEL = r"$\frac{1}{0}$ nightly <b>"


# --- the checker ----------------------------------------------------------------------------------
def _drawn_tick_labels(axis) -> list:
    """The tick labels matplotlib draws: its own list of ticks to draw (Axis._update_ticks)."""
    out = []
    for tick in axis._update_ticks():
        out += [lab for lab in (tick.label1, tick.label2) if lab.get_visible() and lab.get_text()]
    return out


def _texts(fig) -> tuple[list, list]:
    """(every drawn text, the decorations: tick labels, axis labels, titles, offset texts)."""
    from matplotlib.text import Text

    ticks, every_tick = [], set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            ticks += _drawn_tick_labels(axis)
            for t in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                every_tick |= {id(t.label1), id(t.label2)}
    drawn = {id(t) for t in ticks}
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and (id(t) not in every_tick or id(t) in drawn)]
    deco = list(ticks)
    for ax in fig.axes:
        deco += [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label, ax.xaxis.offsetText, ax.yaxis.offsetText)
                 if t.get_visible() and t.get_text().strip()]
    return texts, deco


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def layout_defects(fig) -> list[str]:
    """What a reader would see as a defect: a text past the figure's edge, two decorations
    (tick labels, axis labels, titles) on top of each other."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    out = []
    texts, deco = _texts(fig)
    for t in texts:
        b = t.get_window_extent(r)
        if b.x0 < -0.5 or b.y0 < -0.5 or b.x1 > W + 0.5 or b.y1 > H + 0.5:
            out.append(f"outside the figure ({W:.0f}x{H:.0f}): {t.get_text()!r} at {b.bounds}")
    boxes = [(t, t.get_window_extent(r)) for t in deco]
    for i, (t, a) in enumerate(boxes):
        for u, b in boxes[i + 1:]:
            if _overlaps(a, b):
                out.append(f"overlap: {t.get_text()!r} {a.bounds} and {u.get_text()!r} {b.bounds}")
    return out


def all_figures(p: PairSection) -> dict[str, Any]:
    """Every plot function's figure for one pair (None: not drawn)."""
    return {"parity": plots.parity_figure(p, 5000, 0)[0], "error_cdf": plots.error_cdf_figure(p),
            "achieved_cdf": plots.achieved_cdf_figure(p), "heatmap": plots.heatmap_figure(p)[0],
            "trend": plots.trend_figure(p)}


# --- hostile data ---------------------------------------------------------------------------------
def _rows(n: int, lo: float, hi: float, n_workloads: int, n_ops: int, bound: bool, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ref = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    cand = ref * np.exp(rng.normal(0, 1.2, n))
    rel = cand / ref - 1
    kinds = np.where(np.abs(rel) > 0.1, "over_tolerance", "ok")
    if bound:
        kinds = np.where(ref < cand * 0.98, "bound_violation", "ok")
    wl = [f"{LONG}-{i}" for i in range(n_workloads)]
    ops = [f"layer{i % 3}.attention_{i}_" + "q" * 150 + f"$x_{i}$" for i in range(n_ops)]
    return pd.DataFrame({
        "workload": [wl[i] for i in rng.integers(0, n_workloads, n)], "op": [ops[i] for i in rng.integers(0, n_ops, n)],
        "candidate_value": cand, "reference_value": ref, "rel_error": rel, "kind": kinds,
        "efficiency": cand / ref, "tolerance": 0.1, "unit": "cycles"})


def hostile_pairs() -> dict[str, PairSection]:
    """Pairs built to break a layout: long names everywhere, 40 of everything, extreme values."""
    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    weekly = [(t0 + timedelta(days=7 * k)).isoformat() for k in range(40)]
    trend = [(f"{EVIL_LABEL} check number {k} of the long series", 0.05 + 0.01 * (k % 7)) for k in range(40)]
    name = "archmodel-" + "very-long-fidelity-name-" * 5
    out = {
        "cycles_wide": PairSection("t100-a0", name, name + "-ref", "cycles", "value", unit="cycles", n=2000,
                                   tolerance=0.1, rows=_rows(2000, 1e-15, 1e15, 40, 40, False),
                                   trend=trend, trend_times=weekly),
        "seconds_narrow": PairSection("h100-sxm", "roofline", "measured", "latency", "value", unit="s", n=60,
                                      tolerance=0.02, rows=_rows(60, 1e-6, 3e-6, 3, 4, False, 1),
                                      trend=trend[:3], trend_times=[t0.isoformat()] * 3),
        "bound": PairSection("mi210", "roofline", "measured", "latency", "value", unit="s", n=1500,
                             compared_as="bound", achieved_median=0.8, rows=_rows(1500, 1e-9, 1e9, 40, 40, True, 2),
                             trend=trend, trend_times=weekly),
        "no_times": PairSection("h100-sxm", "archmodel", "measured", "tokens_per_joule", "value",
                                unit="tokens/J" + "/unit" * 12, n=200, tolerance=0.1,
                                rows=_rows(200, 1e3, 1e6, 16, 12, False, 3), trend=trend),
        "same_minute": PairSection("h100-sxm", "archmodel", "rtl", "cycles", "value", unit="cycles", n=50,
                                   tolerance=0.1, rows=_rows(50, 10, 60, 5, 5, False, 4),
                                   trend=[("demo", 0.1), ("demo", 0.12)],
                                   trend_times=["2026-12-02T16:14:21Z", "2026-12-02T16:14:58Z"]),
        "one_row": PairSection("h100-sxm", "archmodel", "measured", "latency", "value", unit="s", n=30,
                               tolerance=0.1, rows=_rows(30, 1e-3, 1e-2, 1, 3, False, 5)),
        "one_cell": PairSection("h100-sxm", "archmodel", "measured", "latency", "value", unit="s", n=3,
                                tolerance=0.1, rows=_rows(3, 1e-3, 1e-2, 1, 1, False, 6)),
    }
    return out


def _synthetic_pairs() -> list[PairSection]:
    return [*synthetic_report(n_issues=40, n_workloads=8, seed=3).pairs,
            *synthetic_report(n_issues=40, n_workloads=8, seed=3, hostile=True).pairs]


# --- the layout tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(hostile_pairs()))
def test_hostile_plots_have_no_text_outside_and_no_overlap(name):
    p = hostile_pairs()[name]
    figs = all_figures(p)
    assert figs["parity"] is not None and (figs["trend"] is not None or len(p.trend) < 2)
    assert figs["heatmap"] is not None or plots.heat_grid(p).sparse
    for kind, fig in figs.items():
        if fig is not None:
            assert layout_defects(fig) == [], (name, kind)


def test_synthetic_plots_have_no_text_outside_and_no_overlap():
    for p in _synthetic_pairs():
        for kind, fig in all_figures(p).items():
            if fig is not None:
                assert layout_defects(fig) == [], (p.key, kind)


def test_ordinary_titles_and_axis_labels_are_not_shortened():
    """Only hostile names are cut to fit: every fixed title and label of ordinary data shows whole."""
    for p in [*synthetic_report(n_issues=40, n_workloads=8, seed=3).pairs, hostile_pairs()["bound"]]:
        p.candidate, p.reference = "archmodel", "measured"
        for kind, fig in all_figures(p).items():
            if fig is not None:
                for ax in fig.axes:
                    for t in (ax.title, ax.xaxis.label, ax.yaxis.label):
                        assert "…" not in t.get_text(), (p.key, kind, t.get_text())


def test_checker_sees_the_defects_it_is_for():
    """The checker is not vacuous: overlapping ticks and a cut label are found on a raw figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.6, 3.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xticks(range(12), [f"{10 * k} cycles" for k in range(12)])
    ax.set_ylabel("h" * 300)
    found = layout_defects(fig)
    assert any(f.startswith("overlap: '") and " cycles' " in f for f in found)  # "10 cycles20 cycles"
    assert any(f.startswith("outside the figure") and "hhhh" in f for f in found)


def test_cycles_ticks_are_engineering_numbers_with_the_unit_in_the_label():
    p = hostile_pairs()["cycles_wide"]
    fig = plots.parity_figure(p, 5000, 0)[0]
    fig.canvas.draw()
    ax = fig.axes[0]
    ticks = [t.get_text() for t in _drawn_tick_labels(ax.xaxis)]
    assert ticks and not any("cycles" in t for t in ticks)
    assert ax.get_xlabel().endswith("[cycles]")
    assert len(ticks) >= 2
    fig = plots.parity_figure(hostile_pairs()["seconds_narrow"], 5000, 0)[0]  # a short unit: on every tick
    fig.canvas.draw()
    ticks = [t.get_text() for t in _drawn_tick_labels(fig.axes[0].xaxis)]
    assert ticks and all(t.endswith("µs") or t.endswith("ns") for t in ticks), ticks
    assert fig.axes[0].get_xlabel() == "measured (reference)"


# --- dates on the time axis ----------------------------------------------------------------------
def test_trend_axis_is_dates_from_the_check_times():
    import matplotlib.dates as mdates

    p = hostile_pairs()["cycles_wide"]
    fig = plots.trend_figure(p)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)
    lo, hi = ax.get_xlim()
    assert mdates.num2date(lo).date() <= datetime(2025, 3, 1).date()
    assert mdates.num2date(hi).date() >= datetime(2025, 11, 29).date()  # the 40th weekly check
    labels = [t.get_text() for t in _drawn_tick_labels(ax.xaxis)] + [ax.xaxis.offsetText.get_text()]
    assert "2025" in " ".join(labels) and not any("check number" in t for t in labels)
    assert ax.get_xlabel() == "check time (UTC)"


def test_trend_of_two_checks_named_alike_reads_dates_not_labels():
    """The demo run twice: two checks labelled "demo" the same day."""
    import matplotlib.dates as mdates

    fig = plots.trend_figure(hostile_pairs()["same_minute"])
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in _drawn_tick_labels(ax.xaxis)] + [ax.xaxis.offsetText.get_text()]
    assert "demo" not in labels and "2026-Dec-02" in " ".join(labels)
    assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)


def test_build_pairs_carries_each_check_time():
    data = synthetic_report(n_issues=10, n_workloads=4, seed=1)
    p = data.pairs[0]
    assert len(p.trend_times) == len(p.trend) == 6
    assert all(pd.Timestamp(t).tzinfo is not None for t in p.trend_times)
    assert p.trend_times == sorted(p.trend_times)


def test_trend_without_times_falls_back_to_labels_literally():
    p = hostile_pairs()["no_times"]
    fig = plots.trend_figure(p)
    assert layout_defects(fig) == []
    ax = fig.axes[0]
    labels = _drawn_tick_labels(ax.xaxis)
    assert labels and all(not t.get_parse_math() for t in labels)
    assert ax.get_xlabel() == "check (no time recorded)"
    svg = _svg(plots.trend(p))
    assert "$\\frac{1" in svg  # the shortened label keeps its literal dollar text


# --- colours -------------------------------------------------------------------------------------
def test_one_colour_scale_per_quantity_whatever_the_data():
    """Two pairs with very different errors colour the same value alike (the old scale stretched
    to each pair's largest value: "dark ≥ 30%" on one page, "≥ 60%" on the next)."""
    a, b = hostile_pairs()["cycles_wide"], _synthetic_pairs()[0]
    fa, fb = plots.heatmap_figure(a)[0], plots.heatmap_figure(b)[0]
    ia, ib = fa.axes[0].images[0], fb.axes[0].images[0]
    for v in (1.0, 7.0, 15.0, 35.0, 70.0, 150.0, 1e6):
        assert ia.to_rgba(v) == ib.to_rgba(v) == ia.cmap(ia.norm(v))
    assert ia.norm.boundaries.tolist() == [0.0, *plots.REL_ERROR_SCALE.thresholds, plots.REL_ERROR_SCALE.top]
    assert plots.colour_scale(a) is plots.REL_ERROR_SCALE
    assert plots.colour_scale(hostile_pairs()["bound"]) is plots.ACHIEVED_SCALE
    assert plots.COLOUR_SCALES == {"rel_error": plots.REL_ERROR_SCALE, "achieved": plots.ACHIEVED_SCALE}
    # the figures print no threshold of their own: the colour bar's ticks are the scale's
    bar = fa.axes[1]
    assert [t.get_text() for t in _drawn_tick_labels(bar.yaxis)] == ["5%", "10%", "20%", "50%", "100%"]
    assert "dark" not in fa.axes[0].get_title()


def test_colour_scale_legend_and_bins():
    s = plots.REL_ERROR_SCALE
    assert s.bins == ["< 5%", "5–10%", "10–20%", "20–50%", "50–100%", "≥ 100%"]
    assert s.legend == ("colour: |relative error| (MAPE) < 5%, 5–10%, 10–20%, 20–50%, 50–100%, ≥ 100%, "
                        "light to dark")
    assert [s.bin(v) for v in (0, 4.9, 5, 10, 49, 50, 99.9, 100, 1e9)] == [0, 0, 1, 2, 3, 4, 4, 5, 5]
    assert len(set(s.colours())) == 6 and not s.dark(1) and s.dark(500)
    assert "at or beyond the bound" in plots.ACHIEVED_SCALE.legend


def test_heatmap_cell_text_follows_the_colour():
    p = hostile_pairs()["cycles_wide"]
    fig = plots.heatmap_figure(p)[0]
    vals = plots.heat_grid(p).values.to_numpy(float).ravel() * 100
    vals = vals[np.isfinite(vals)]
    texts = fig.axes[0].texts
    assert len(texts) == len(vals) > 12
    for t, v in zip(texts, vals, strict=True):
        assert t.get_color() == ("white" if plots.REL_ERROR_SCALE.dark(v) else "black")
    assert {t.get_color() for t in texts} == {"white", "black"}


# --- sparse heatmaps -----------------------------------------------------------------------------
def _cells(cells: list[tuple[str, str, float]]) -> PairSection:
    """A pair whose rows fill the given (workload, op, relative error) cells; NaN: a key with no error."""
    rows = [{"workload": w, "op": o, "candidate_value": 1.0 + e, "reference_value": 1.0, "rel_error": e,
             "kind": "missing_reference" if np.isnan(e) else "over_tolerance", "tolerance": 0.1} for w, o, e in cells]
    return PairSection("t", "a", "b", "m", "value", n=len(rows), tolerance=0.1, rows=pd.DataFrame(rows))


def test_sparse_heatmap_is_a_table_not_a_figure():
    # the issue's case: 3 workloads × 8 op classes, one cell with a number (the rest: missing references)
    demo = _cells([("wl-a", "op0", 0.3)] + [(f"wl-{w}", f"op{o}", np.nan) for w in "abc" for o in range(1, 8)
                                           if (w == "a") or o == 1])
    g = plots.heat_grid(demo)
    assert g.values.shape == (3, 8) and g.filled == 1 and g.sparse
    assert plots.heatmap_figure(demo)[0] is None
    # a diagonal: 5 of 25 cells (< 1/4) is a table; 4 of 16 (exactly 1/4) is drawn
    diag = _cells([(f"wl-{k}", f"op{k}", 0.01 * (k + 1)) for k in range(5)])
    assert plots.heat_grid(diag).sparse
    four = _cells([(f"wl-{k}", f"op{k}", 0.01 * (k + 1)) for k in range(4)])
    assert not plots.heat_grid(four).sparse and plots.heatmap_figure(four)[0] is not None
    uri, notes = plots.heatmap(diag)
    assert uri is None and "5 of 25 cells filled: listed as a table" in notes[-1]
    cells = plots.heatmap_cells(diag)
    assert [(c["workload"], c["op_class"]) for c in cells] == [(f"wl-{k}", f"op{k}") for k in (4, 3, 2, 1, 0)]
    assert cells[0]["value"] == pytest.approx(0.05) and cells[0]["n"] == 1
    assert cells[0]["bin"] == plots.REL_ERROR_SCALE.bin(5.0) == 1
    figs = plots.pair_figures(diag, 100, 0, 0.02)
    assert figs["heatmap"] is None and figs["heat_cells"] == cells and figs["scale"] is plots.REL_ERROR_SCALE
    assert plots.pair_figures(four, 100, 0, 0.02)["heat_cells"] == []  # drawn: no table


# --- text safety, self-contained and deterministic SVG -------------------------------------------------
def _svg(uri: str) -> str:
    assert uri.startswith("data:image/svg+xml;base64,")
    return base64.b64decode(uri.split(",", 1)[1]).decode("utf-8")


def test_every_text_is_literal_never_mathtext():
    for name, p in hostile_pairs().items():
        for kind, fig in all_figures(p).items():
            if fig is None:
                continue
            from matplotlib.text import Text

            bad = [t.get_text() for t in fig.findobj(Text) if t.get_text() and t.get_parse_math()]
            assert bad == [], (name, kind)
    svg = _svg(plots.heatmap(_synthetic_pairs()[-1])[0])  # the hostile synthetic names, short enough to show whole
    assert "$\\frac{1}{0}$" in svg and "<img" not in svg and "<script" not in svg


def test_svg_is_self_contained_and_deterministic():
    p = hostile_pairs()["bound"]
    one = plots.pair_figures(p, 5000, 0, 0.02)
    two = plots.pair_figures(p, 5000, 0, 0.02)
    for key in ("parity", "cdf", "heatmap", "trend"):
        assert one[key] == two[key], key
        svg = _svg(one[key])
        refs = re.findall(r'(?:xlink:)?href="([^"]*)"', svg)
        assert all(r.startswith(("#", "data:image/png;base64,")) for r in refs), refs[:3]
        assert "<dc:date>" not in svg and "url(http" not in svg and "@import" not in svg


def test_parity_fallback_tolerance_is_the_configured_default():
    from xfid.config import DEFAULT_REL_TOLERANCE

    p = hostile_pairs()["seconds_narrow"]
    p.tolerance = None
    fig = plots.parity_figure(p, 5000, 0)[0]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert f"±{DEFAULT_REL_TOLERANCE:.0%} tolerance" in legend
    fig = plots.parity_figure(p, 5000, 0, default_tol=0.25)[0]
    assert "±25% tolerance" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


# --- the demo's own data ---------------------------------------------------------------------------
@pytest.mark.slow
def test_demo_plots_have_no_text_outside_and_no_overlap(tmp_path_factory):
    """`xfid demo`'s store, its report data as the report builds it, every plot of every pair."""
    from tests.demo_run import copy_demo
    from xfid.api import open_store
    from xfid.demo import DEMO_CONFIG
    from xfid.report.assemble import build_report_data
    from xfid.report.period import resolve_period

    st = open_store(copy_demo(tmp_path_factory, "demo-plots").store, config=DEMO_CONFIG)
    data = build_report_data(st.backend(), st.config, resolve_period(None, None, datetime.now(UTC).date().isoformat()))
    assert len(data.pairs) > 10
    drawn = 0
    for p in data.pairs:
        for kind, fig in all_figures(p).items():
            if fig is not None:
                assert layout_defects(fig) == [], (p.key, kind)
                drawn += 1
        assert p.trend_times and all(pd.Timestamp(t).year >= 2026 for t in p.trend_times)
    assert drawn >= 3 * len(data.pairs)
