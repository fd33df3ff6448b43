"""Report figures as SVG data: URIs (matplotlib, Agg-free Figure API; untrusted text stays literal)."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pandas as pd

from xfid.config import DEFAULT_BOUND_TOLERANCE, DEFAULT_REL_TOLERANCE
from xfid.report.data import PairSection, op_class, sample_rows, shorten
from xfid.textsafe import terminal

TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
"""Scales for seconds, largest first (axis labels here, numbers in the HTML)."""

KIND_STYLE = {  # kind: (colour, marker, legend)
    "ok": ("#4c72b0", "o", "within tolerance"),
    "over_tolerance": ("#dd8452", "s", "over tolerance"),
    "config_mismatch": ("#8172b3", "D", "config mismatch"),
    "bound_violation": ("#c44e52", "X", "bound violation"),
    "missing_reference": ("#937860", "v", "missing reference"),
}
RC = {
    "svg.fonttype": "none",  # text stays text (searchable); matplotlib XML-escapes it
    "svg.hashsalt": "xfid-report",  # deterministic ids
    "text.usetex": False,
    "axes.formatter.use_mathtext": False,
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
}
SAFE = {"parse_math": False, "usetex": False}  # for every string that may come from data
MAX_HEAT_ROWS = 16
MAX_HEAT_COLS = 12


def _figure(w: float, h: float, margins: tuple[float, float, float, float] = (0.17, 0.14, 0.97, 0.91)):
    """A figure with fixed margins in inches-independent fractions (left, bottom, right, top).

    Fixed margins instead of constrained layout: 3-5x faster, and labels are shortened anyway.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h))
    left, bottom, right, top = margins
    fig.subplots_adjust(left=left, bottom=bottom, right=right, top=top)
    return fig


def tick_label(v: float, unit: str) -> str:
    """A decade tick: `10 µs`, `1 ms`, `1e+04 cycles` (no trailing zeros)."""
    if unit == "s" and v > 0:
        for scale, name in TIME_UNITS:
            if v >= scale * 0.999:
                return f"{v / scale:.4g} {name}"
        return f"{v / 1e-9:.4g} ns"
    return f"{v:.4g} {unit}".strip()


def _log_axis(axis, fmt, lo: float, hi: float) -> None:
    """Log ticks labelled with `fmt` (plain text, no mathtext), no minor ticks: cheaper and clearer.

    Decades only when the axis spans two or more; 1-2-5 steps on narrower axes.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    subs = (1.0,) if hi / max(lo, 1e-300) >= 100 else (1.0, 2.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt(v)))


def to_data_uri(fig) -> str:
    """Serialise a figure to an SVG data: URI (base64, so nothing in it can reach the HTML)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None}, dpi=200)  # dpi: rasterized scatter layers only
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _points(p: PairSection, limit: int, seed: int) -> tuple[pd.DataFrame, int]:
    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty:
        return rows, 0
    cand, ref = rows["candidate_value"].astype(float), rows["reference_value"].astype(float)
    finite = rows[np.isfinite(cand) & np.isfinite(ref)]  # a missing reference is not a point
    pos = finite[(finite["candidate_value"] > 0) & (finite["reference_value"] > 0)]
    return sample_rows(pos, limit, seed), len(finite) - len(pos)


def parity(p: PairSection, limit: int, seed: int, bound_tol: float = DEFAULT_BOUND_TOLERANCE,
           outliers: list[dict[str, Any]] | None = None) -> tuple[str, list[str]]:
    """Log-log candidate vs reference with the tolerance band, y=x, the bound line, outliers numbered.

    Args:
        outliers: filled with the (at most 5) numbered outliers, worst first, for a table under the plot.

    Returns:
        (data URI, notes about sampling / points that cannot be drawn on log axes).
    """
    outliers = [] if outliers is None else outliers
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 3.0, (0.22, 0.14, 0.97, 0.91))
        ax = fig.add_subplot()
        pts, dropped = _points(p, limit, seed)
        notes = []
        n_all = 0 if p.rows is None else int(np.isfinite(p.rows["candidate_value"].astype(float)
                                                          * p.rows["reference_value"].astype(float)).sum())
        if len(pts) < n_all - dropped:
            notes.append(f"parity plot shows a seeded sample of {len(pts):,} of {n_all - dropped:,} points")
        if dropped:
            notes.append(f"{dropped} point(s) with a zero or negative value cannot be drawn on log axes")
        if pts.empty:
            ax.text(0.5, 0.5, "no positive pairs", ha="center", va="center", transform=ax.transAxes)
            return to_data_uri(fig), notes
        x, y = pts["reference_value"].to_numpy(float), pts["candidate_value"].to_numpy(float)
        lo, hi = min(x.min(), y.min()) / 1.5, max(x.max(), y.max()) * 1.5
        line = np.geomspace(lo, hi, 50)
        tol = p.tolerance if p.tolerance is not None else 0.1
        ax.fill_between(line, line * (1 - tol), line * (1 + tol), color="#55a868", alpha=0.18, lw=0,
                        label=f"±{tol:.0%} tolerance")
        ax.plot(line, line, color="#333", lw=0.8, label="candidate = reference")
        if p.is_bound:
            ax.plot(line, line / (1 - bound_tol), color="#c44e52", lw=0.9, ls="--",
                    label=f"bound limit (ref {bound_tol:.0%} under bound)")
        kinds = pts["kind"].astype(str) if "kind" in pts else pd.Series("ok", index=pts.index)
        for kind, (colour, marker, legend) in KIND_STYLE.items():
            m = (kinds == kind).to_numpy()
            if m.any():
                ax.scatter(x[m], y[m], s=9 if kind == "ok" else 16, c=colour, marker=marker, lw=0,
                           alpha=0.7, label=f"{legend} ({m.sum():,})", rasterized=True)
        lr = np.abs(np.log(y / x))
        bad = (kinds != "ok").to_numpy()
        for rank, i in enumerate([i for i in np.argsort(-lr) if bad[i]][:5]):
            r = pts.iloc[i]  # numbered on the plot; names go in the table under it (HTML-escaped)
            ax.annotate(str(rank + 1), (x[i], y[i]), xytext=(3, 3), textcoords="offset points", fontsize=6.5,
                        fontweight="bold", color="#222")
            outliers.append({"n": rank + 1, "workload": str(r["workload"]), "op": str(r["op"]),
                             "candidate_value": float(y[i]), "reference_value": float(x[i]),
                             "rel_error": float(y[i] / x[i] - 1), "kind": str(r.get("kind", ""))})
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            _log_axis(axis, lambda v: tick_label(v, p.unit), lo, hi)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        unit = ""
        ax.set_xlabel(f"{p.reference} (reference){unit}", **SAFE)
        ax.set_ylabel(f"{p.candidate} (candidate){unit}", **SAFE)
        ax.set_title("Parity", **SAFE)
        ax.legend(fontsize=5.5, loc="upper left", frameon=False)
        return to_data_uri(fig), notes


def achieved_values(p: PairSection) -> np.ndarray:
    """A bound pair's achieved fractions of the bound per aligned row, in percent, sorted."""
    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty or "efficiency" not in rows:
        return np.array([])
    use = rows[rows["kind"] != "missing_reference"] if "kind" in rows else rows
    v = pd.to_numeric(use["efficiency"], errors="coerce").to_numpy(float) * 100
    return np.sort(v[np.isfinite(v)])


def achieved_cdf(p: PairSection) -> str:
    """A bound pair's cumulative distribution of the achieved fraction of the bound, the bound
    (100%) marked: a point right of it is a reference beyond the bound."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 3.0)
        ax = fig.add_subplot()
        v = achieved_values(p)
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", color="#4c72b0")
            ax.axvline(100, color="#c44e52", ls="--", lw=0.9, label="the bound (100%)")
            if p.achieved_median is not None:
                ax.axvline(p.achieved_median * 100, color="#55a868", ls=":", lw=0.9,
                           label=f"median {p.achieved_median:.1%}")
            ax.set_xlim(0, max(105.0, float(v.max()) * 1.05))
            ax.legend(fontsize=6, loc="upper left", frameon=False)
        else:
            ax.text(0.5, 0.5, "no achieved fractions to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("achieved fraction of the bound [%]")
        ax.set_ylabel("fraction of keys ≤ x")
        ax.set_title("Achieved fraction of the bound (CDF)")
        ax.grid(alpha=0.3, lw=0.4)
        return to_data_uri(fig)


def error_cdf(p: PairSection) -> str:
    """Cumulative distribution of absolute percentage error, with the tolerance marked (a bound
    pair: of the achieved fraction of the bound, see achieved_cdf)."""
    import matplotlib

    if p.is_bound:
        return achieved_cdf(p)

    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 3.0)
        ax = fig.add_subplot()
        rows = p.rows if p.rows is not None else pd.DataFrame()
        ape = np.sort(np.abs(rows["rel_error"].dropna().to_numpy(float))) * 100 if not rows.empty else np.array([])
        ape = ape[np.isfinite(ape)]
        if ape.size:
            floor = max(ape[ape > 0].min() if (ape > 0).any() else 0.01, 0.01)
            ax.step(np.maximum(ape, floor), np.arange(1, ape.size + 1) / ape.size, where="post", color="#4c72b0")
            ax.set_xscale("log")
            _log_axis(ax.xaxis, lambda v: f"{v:g}%", floor, max(ape.max(), floor * 10))
            if p.tolerance is not None:
                ax.axvline(p.tolerance * 100, color="#55a868", ls="--", lw=0.9, label=f"tolerance {p.tolerance:.0%}")
                ax.legend(fontsize=6, loc="lower right", frameon=False)
        else:
            ax.text(0.5, 0.5, "no errors to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("|relative error| [%]")
        ax.set_ylabel("fraction of keys ≤ x")
        ax.set_title("Error distribution (CDF)")
        ax.grid(alpha=0.3, lw=0.4)
        return to_data_uri(fig)


def heatmap(p: PairSection) -> tuple[str | None, list[str]]:
    """MAPE by workload × op class (the busiest 20 workloads and 12 op classes)."""
    import matplotlib

    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty:
        return None, []
    bound = p.is_bound and "efficiency" in rows
    value = pd.to_numeric(rows["efficiency"], errors="coerce") if bound else rows["rel_error"].abs()
    df = pd.DataFrame({"workload": rows["workload"].astype(str), "cls": rows["op"].astype(str).map(op_class),
                       "ape": value})
    wl = df["workload"].value_counts().index[:MAX_HEAT_ROWS]
    cl = df["cls"].value_counts().index[:MAX_HEAT_COLS]
    notes = []
    if df["workload"].nunique() > len(wl) or df["cls"].nunique() > len(cl):
        notes.append(f"heatmap shows the {len(wl)} workloads and {len(cl)} op classes with most keys")
    grid = df[df["workload"].isin(wl) & df["cls"].isin(cl)].pivot_table(
        index="workload", columns="cls", values="ape", aggfunc="median" if bound else "mean").reindex(
        index=sorted(wl), columns=sorted(cl))
    with matplotlib.rc_context(RC):
        h = 1.2 + 0.16 * len(grid.index)
        fig = _figure(7.2, h, (2.3 / 7.2, 0.8 / h, 0.98, 1 - 0.3 / h))
        ax = fig.add_subplot()
        vals = grid.to_numpy(float) * 100
        tol = (p.tolerance or DEFAULT_REL_TOLERANCE) * 100
        vmax = max(100.0, np.nanmax(vals) if np.isfinite(vals).any() else 100.0) if bound else \
            max(tol * 3, np.nanmax(vals) if np.isfinite(vals).any() else tol)
        im = ax.imshow(np.ma.masked_invalid(vals), aspect="auto", cmap="YlGnBu" if bound else "YlOrRd", vmin=0,
                       vmax=vmax)
        for (i, j), v in np.ndenumerate(vals):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.0f}" if v >= 10 else f"{v:.1f}", ha="center", va="center", fontsize=5.5,
                        color="white" if v > vmax * 0.6 else "black")
        ax.set_xticks(range(len(grid.columns)), [shorten(terminal(c), 22) for c in grid.columns], rotation=30, ha="right",
                      fontsize=6, **SAFE)
        ax.set_yticks(range(len(grid.index)), [shorten(terminal(w), 40) for w in grid.index], fontsize=6, **SAFE)
        del im  # every cell carries its number: no colour bar (it costs a second axes)
        ax.set_title("median achieved fraction of the bound by workload × op class [%] (blank: no keys; "
                     "above 100%: beyond the bound)" if bound else
                     f"MAPE by workload × op class [%] (blank: no keys; dark: ≥ {vmax:.0f}%)")
        return to_data_uri(fig), notes


def trend(p: PairSection) -> str | None:
    """MAPE (a bound: the median achieved fraction) across checks (oldest to newest); None with
    fewer than two checks."""
    import matplotlib

    if len(p.trend) < 2:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 2.1, (0.15, 0.28, 0.97, 0.88))
        ax = fig.add_subplot()
        labels = [t[0] for t in p.trend]
        ax.plot(range(len(labels)), [t[1] * 100 for t in p.trend], marker="o", ms=3, color="#4c72b0")
        if p.is_bound:
            ax.axhline(100, color="#c44e52", ls="--", lw=0.8)
        elif p.tolerance is not None:
            ax.axhline(p.tolerance * 100, color="#55a868", ls="--", lw=0.8)
        step = max(1, len(labels) // 6)
        ax.set_xticks(range(0, len(labels), step), [terminal(x) for x in labels[::step]], rotation=25, ha="right", fontsize=5.5, **SAFE)
        what = "achieved fraction of the bound (median)" if p.is_bound else "MAPE"
        ax.set_ylabel(f"{'achieved' if p.is_bound else 'MAPE'} [%]")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{what} across checks")
        ax.grid(alpha=0.3, lw=0.4)
        return to_data_uri(fig)


def pair_figures(p: PairSection, limit: int, seed: int, bound_tol: float) -> dict[str, Any]:
    """All figures of one pair section, with the notes they produced."""
    outliers: list[dict[str, Any]] = []
    par, notes = parity(p, limit, seed, bound_tol, outliers)
    heat, hnotes = heatmap(p)
    return {"parity": par, "cdf": error_cdf(p), "heatmap": heat, "trend": trend(p), "outliers": outliers,
            "notes": notes + hnotes}
