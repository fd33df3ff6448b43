"""Report figures as SVG data: URIs (matplotlib's Figure API, no pyplot; untrusted text stays literal).

Every figure goes through `_finish`: tick labels that would overlap are thinned, titles and axis
labels too long for the figure are cut with an ellipsis, the margins are fitted so that every text
lies inside the figure, and no text is read as mathtext. Colours come from one `ColourScale` per quantity
(`REL_ERROR_SCALE`, `ACHIEVED_SCALE`), whose `legend` the templates print, so a colour means the
same on every page.
"""

from __future__ import annotations

import base64
import functools
import io
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from xfid.config import DEFAULT_BOUND_TOLERANCE, DEFAULT_REL_TOLERANCE
from xfid.report.data import PairSection, op_class, sample_rows, shorten
from xfid.textsafe import terminal

if TYPE_CHECKING:
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.text import Text

TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
"""Scales for seconds, largest first (numbers in the HTML)."""

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
MIN_HEAT_FILL = 0.25
"""A workload × op-class grid with fewer of its cells filled is listed as a table (heatmap_cells),
not drawn: a mostly blank heatmap shows its few numbers worse than a table does."""
MAX_FIT_PASSES = 5
LAYOUT_DPI = 200
"""The dpi text is measured at: at 200 dpi Agg's hinted text is a few percent wider than the SVG's
unhinted text (at 100 dpi it is narrower), so a layout that fits here fits in the SVG."""
MAX_TICK_UNIT = 4
"""A unit this short (s, J, B, FLOP) is written on each parity tick, a longer one once, on the axis label."""


@dataclass(frozen=True)
class ColourScale:
    """One quantity's colours: fixed bins in percent, the same on every plot and in every legend.

    Fixed bins rather than a range stretched to each pair's data: a colour means the same value on
    every page, and the legend can be printed once, in words (`legend`).
    """

    quantity: str  # what is coloured, as the legend names it
    cmap: str  # a matplotlib colormap, light (low) to dark (high)
    thresholds: tuple[float, ...]  # bin edges in percent, increasing; below the first and from the last: own bins
    top_note: str = ""  # what the top bin means, when it means something (e.g. beyond the bound)

    @property
    def bins(self) -> list[str]:
        """The bins in words, lightest first: `< 5%`, `5–10%`, …, `≥ 100%`."""
        t = [f"{x:g}" for x in self.thresholds]
        return [f"< {t[0]}%", *[f"{a}–{b}%" for a, b in itertools.pairwise(t)], f"≥ {t[-1]}%"]

    @property
    def legend(self) -> str:
        """The legend sentence, for figures and templates alike."""
        top = f" ({self.top_note})" if self.top_note else ""
        return f"colour: {self.quantity} {', '.join(self.bins)}{top}, light to dark"

    def bin(self, percent: float) -> int:
        """The bin (0 = lightest) a value in percent falls in."""
        return int(np.searchsorted(self.thresholds, percent, side="right"))

    def colours(self) -> list[str]:
        """One hex colour per bin, lightest first (sampled evenly from the colormap, its palest end skipped)."""
        return list(_bin_colours(self.cmap, len(self.thresholds) + 1))

    def colour(self, percent: float) -> str:
        """The hex colour of a value in percent (a table cell can use the plot's colour)."""
        return self.colours()[self.bin(percent)]

    def dark(self, percent: float) -> bool:
        """Whether the value's colour is dark enough to need white text on it."""
        from matplotlib.colors import to_rgb

        r, g, b = to_rgb(self.colour(percent))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.45

    @property
    def top(self) -> float:
        """Where a colour bar of this scale ends (values above it take the top bin's colour)."""
        return self.thresholds[-1] * 1.5

    def cmap_norm(self):
        """(ListedColormap, BoundaryNorm) drawing exactly these bins (clipped: above `top` is the top bin)."""
        from matplotlib.colors import BoundaryNorm, ListedColormap

        edges = [0.0, *self.thresholds, self.top]
        return ListedColormap(self.colours()), BoundaryNorm(edges, len(edges) - 1, clip=True)


@functools.cache
def _bin_colours(cmap_name: str, n: int) -> tuple[str, ...]:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps[cmap_name]
    return tuple(to_hex(cmap(0.08 + 0.92 * i / (n - 1))) for i in range(n))


REL_ERROR_SCALE = ColourScale("|relative error| (MAPE)", "YlOrRd", (5.0, 10.0, 20.0, 50.0, 100.0))
ACHIEVED_SCALE = ColourScale("achieved fraction of the bound", "YlGnBu", (25.0, 50.0, 75.0, 90.0, 100.0),
                             top_note="≥ 100%: at or beyond the bound")
COLOUR_SCALES = {"rel_error": REL_ERROR_SCALE, "achieved": ACHIEVED_SCALE}
"""Every colour scale of the report, by quantity: templates print `COLOUR_SCALES[q].legend`."""


def colour_scale(p: PairSection) -> ColourScale:
    """The scale a pair's heatmap (or its table) uses: the achieved fraction for a bound pair."""
    return ACHIEVED_SCALE if p.is_bound else REL_ERROR_SCALE


# --- figure set-up and the layout pass ---------------------------------------------------
def _figure(w: float, h: float, margins: tuple[float, float, float, float] = (0.17, 0.14, 0.97, 0.91)) -> Figure:
    """A figure with first-guess margins as fractions (left, bottom, right, top); `_finish` fits them
    to the texts it finally holds (like tight_layout, at a fraction of constrained layout's cost)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=LAYOUT_DPI)
    FigureCanvasAgg(fig)  # the layout pass measures text with Agg; savefig still writes SVG
    left, bottom, right, top = margins
    fig.subplots_adjust(left=left, bottom=bottom, right=right, top=top)
    return fig


def shown_tick_labels(axis: Axis) -> list[Text]:
    """The major tick labels drawn on `axis` (inside its view, visible, not empty), once the axes
    has been laid out (a draw, or Axes.get_tightbbox)."""
    locs = np.asarray(axis.get_majorticklocs(), float)
    ticks = axis.get_major_ticks(len(locs))
    lo, hi = sorted(axis.get_view_interval())
    tr = axis.get_transform()
    (tlo, thi) = sorted(tr.transform(np.array([lo, hi], float)))
    pos = tr.transform(locs) if len(locs) else locs
    eps = (thi - tlo) * 1e-6
    return [t.label1 for t, x in zip(ticks, pos, strict=True) if tlo - eps <= x <= thi + eps
            and t.label1.get_visible() and t.label1.get_text()]


def _overlap(a, b, gap: float) -> bool:
    """Two display-space boxes overlap, or come closer than `gap` pixels."""
    return a.x0 < b.x1 + gap and b.x0 < a.x1 + gap and a.y0 < b.y1 + gap and b.y0 < a.y1 + gap


def _thin(axis: Axis, renderer) -> bool:
    """Keep every other tick of `axis` when its labels overlap (`_finish` repeats until none do);
    True when it changed anything."""
    from matplotlib.ticker import FixedFormatter, FixedLocator

    labels = shown_tick_labels(axis)
    boxes = [t.get_window_extent(renderer) for t in labels]
    gap = 0.75 * axis.figure.dpi / 72  # 0.75 pt
    if not any(_overlap(a, b, gap) for i, a in enumerate(boxes) for b in boxes[i + 1:]) or len(labels) < 2:
        return False
    locs = [lab.get_position()[0 if axis.axis_name == "x" else 1] for lab in labels]
    keep = locs[::2] if len(locs) > 2 else locs[:1]
    if isinstance(axis.get_major_formatter(), FixedFormatter):  # categorical: labels go with their ticks
        texts = [lab.get_text() for lab in labels][::2] if len(locs) > 2 else [labels[0].get_text()]
        axis.set_ticks(keep, texts, **SAFE)
    else:
        axis.set_major_locator(FixedLocator(keep))
    return True


def _names(fig: Figure) -> list[Text]:
    """Titles, axis labels and colour-bar labels: the texts that are cut to fit, never thinned."""
    out = []
    for ax in fig.axes:
        out += [ax.title, ax.xaxis.label, ax.yaxis.label]
    return [t for t in out if t.get_visible() and t.get_text()]


def _cut_to_fit(text: Text, renderer, fig_box) -> bool:
    """Shorten `text` (an ellipsis in the middle) when it runs past the figure along its own direction.

    The cut keeps the text's centre, so both ends must fit: its length may be at most twice the
    distance from its centre to the nearer figure edge. True when it changed the text.
    """
    box = text.get_window_extent(renderer)
    if abs(text.get_rotation() % 180 - 90) < 1:
        lo, hi, length, a, b = box.y0, box.y1, box.height, fig_box.y0, fig_box.y1
    else:
        lo, hi, length, a, b = box.x0, box.x1, box.width, fig_box.x0, fig_box.x1
    s = text.get_text()
    if (lo >= a and hi <= b) or len(s) <= 4 or length <= 0:
        return False
    centre = (lo + hi) / 2
    room = 2 * max(0.0, min(centre - a, b - centre)) * 0.97
    text.set_text(shorten(s, max(4, int(len(s) * room / length) - 1)))
    return True


def _fit_margins(fig: Figure, boxes: list, pad_pt: float = 2.0, slack_pt: float = 11.0) -> bool:
    """Move the subplot margins so that every axes' texts (`boxes`: their tight boxes, ticks,
    labels, title, colour bar) end `pad_pt` points inside the figure, reclaiming a margin only when
    more than `slack_pt` points of it are empty; True when a margin moved."""
    from matplotlib.transforms import Bbox

    pad, slack = pad_pt * fig.dpi / 72, slack_pt * fig.dpi / 72  # in pixels
    u = Bbox.union(boxes)
    W, H = fig.bbox.width, fig.bbox.height
    room = {"left": u.x0 - pad, "right": W - pad - u.x1, "bottom": u.y0 - pad, "top": H - pad - u.y1}  # px
    move = {k: v for k, v in room.items() if v < -0.25 or v > slack}
    if not move:
        return False
    sp = fig.subplotpars
    left, right = sp.left - move.get("left", 0) / W, sp.right + move.get("right", 0) / W
    bottom, top = sp.bottom - move.get("bottom", 0) / H, sp.top + move.get("top", 0) / H
    if right - left < 0.2 or top - bottom < 0.2:  # texts larger than the figure: keep some plot
        return False
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)
    return True


def _finish(fig: Figure) -> Figure:
    """The layout pass: literal text, tick labels thinned until none overlap, long names cut to fit
    the figure, margins fitted to the texts.

    Each pass lays the figure out without drawing it (Axes.get_tightbbox places ticks, labels and
    titles), fixes what it finds, and stops when a pass changes nothing.
    """
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        t.set_parse_math(False)
        t.set_usetex(False)
    r = fig.canvas.get_renderer()
    for _ in range(MAX_FIT_PASSES):
        boxes = [ax.get_tightbbox(r) for ax in fig.axes]  # also positions every tick label, axis label, title
        changed = False
        for ax in fig.axes:
            changed |= _thin(ax.xaxis, r)
            changed |= _thin(ax.yaxis, r)
        for t in _names(fig):
            changed |= _cut_to_fit(t, r, fig.bbox)
        if not changed and not _fit_margins(fig, boxes):
            break
    return fig


def to_data_uri(fig: Figure) -> str:
    """Serialise a figure to an SVG data: URI (base64, so nothing in it can reach the HTML)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None}, dpi=200)  # dpi: rasterized scatter layers only
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --- axes ----------------------------------------------------------------------------------
def tick_label(v: float, unit: str) -> str:
    """A tick in engineering notation with the unit: `10 µs`, `1 ms`, `20 kcycles`, `1.5 G`."""
    from matplotlib.ticker import EngFormatter

    return EngFormatter(unit=unit, places=None, usetex=False, useMathText=False)(v).strip()


def _pct_tick(v: float) -> str:
    """A percent tick: `0.1%`, `10%`, `1000%`, `1e+06%` (no engineering prefix on a percent)."""
    return f"{v:g}%" if v < 1e5 else f"{v:.0e}%"


def _log_axis(axis: Axis, lo: float, hi: float, fmt=None) -> None:
    """Log ticks in engineering notation (or `fmt`), no minor ticks: cheaper and clearer.

    Decades only when the axis spans two or more; 1-2-5 steps on narrower axes. `_finish` thins
    them further where their labels would overlap.
    """
    from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullLocator

    subs = (1.0,) if hi / max(lo, 1e-300) >= 100 else (1.0, 2.0, 5.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt(v)) if fmt else
                             EngFormatter(places=None, usetex=False, useMathText=False))


def _unit(unit: str) -> str:
    """` [unit]` for an axis label (untrusted text: escaped), empty without a unit."""
    return f" [{terminal(unit)}]" if unit else ""


# --- the figures -----------------------------------------------------------------------------
def _points(p: PairSection, limit: int, seed: int) -> tuple[pd.DataFrame, int]:
    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty:
        return rows, 0
    cand, ref = rows["candidate_value"].astype(float), rows["reference_value"].astype(float)
    finite = rows[np.isfinite(cand) & np.isfinite(ref)]  # a missing reference is not a point
    pos = finite[(finite["candidate_value"] > 0) & (finite["reference_value"] > 0)]
    return sample_rows(pos, limit, seed), len(finite) - len(pos)


def parity_figure(p: PairSection, limit: int, seed: int, bound_tol: float = DEFAULT_BOUND_TOLERANCE,
                  outliers: list[dict[str, Any]] | None = None,
                  default_tol: float = DEFAULT_REL_TOLERANCE) -> tuple[Figure, list[str]]:
    """The parity plot as a Figure (see `parity`)."""
    outliers = [] if outliers is None else outliers
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 3.0, (0.22, 0.14, 0.97, 0.91))
        ax = fig.add_subplot()
        ax.set_title("Parity")
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
            return _finish(fig), notes
        x, y = pts["reference_value"].to_numpy(float), pts["candidate_value"].to_numpy(float)
        lo, hi = min(x.min(), y.min()) / 1.5, max(x.max(), y.max()) * 1.5
        line = np.geomspace(lo, hi, 50)
        tol = p.tolerance if p.tolerance is not None else default_tol
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
                        fontweight="bold", color="#222", annotation_clip=True)
            outliers.append({"n": rank + 1, "workload": str(r["workload"]), "op": str(r["op"]),
                             "candidate_value": float(y[i]), "reference_value": float(x[i]),
                             "rel_error": float(y[i] / x[i] - 1), "kind": str(r.get("kind", ""))})
        ax.set_xscale("log")
        ax.set_yscale("log")
        short = 0 < len(p.unit) <= MAX_TICK_UNIT  # `10 µs`, `1 nJ`, `2 GB` on the ticks; `[cycles]` on the label
        tick_unit = terminal(p.unit) if short else ""
        for axis in (ax.xaxis, ax.yaxis):
            _log_axis(axis, lo, hi, (lambda v: tick_label(v, tick_unit)) if short else None)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        unit = "" if short else _unit(p.unit)
        ax.set_xlabel(f"{terminal(p.reference)} (reference){unit}", **SAFE)
        ax.set_ylabel(f"{terminal(p.candidate)} (candidate){unit}", **SAFE)
        ax.legend(fontsize=5.5, loc="upper left", frameon=False)
        return _finish(fig), notes


def parity(p: PairSection, limit: int, seed: int, bound_tol: float = DEFAULT_BOUND_TOLERANCE,
           outliers: list[dict[str, Any]] | None = None,
           default_tol: float = DEFAULT_REL_TOLERANCE) -> tuple[str, list[str]]:
    """Log-log candidate vs reference with the tolerance band, y=x, the bound line, outliers numbered.

    Args:
        outliers: filled with the (at most 5) numbered outliers, worst first, for a table under the plot.
        default_tol: the band drawn when the pair's rows carry no tolerance: the configured
            `[settings] default_rel_tolerance` (xfid.config's default unless the caller passes it).

    Returns:
        (data URI, notes about sampling / points that cannot be drawn on log axes).
    """
    fig, notes = parity_figure(p, limit, seed, bound_tol, outliers, default_tol)
    return to_data_uri(fig), notes


def achieved_values(p: PairSection) -> np.ndarray:
    """A bound pair's achieved fractions of the bound per aligned row, in percent, sorted."""
    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty or "efficiency" not in rows:
        return np.array([])
    use = rows[rows["kind"] != "missing_reference"] if "kind" in rows else rows
    v = pd.to_numeric(use["efficiency"], errors="coerce").to_numpy(float) * 100
    return np.sort(v[np.isfinite(v)])


def achieved_cdf_figure(p: PairSection) -> Figure:
    """The achieved-fraction CDF as a Figure (see `achieved_cdf`)."""
    import matplotlib
    from matplotlib.ticker import EngFormatter

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
            ax.set_xlim(min(0.0, float(v.min()) * 1.05), max(105.0, float(v.max()) * 1.05))
            ax.xaxis.set_major_formatter(EngFormatter(places=None, usetex=False, useMathText=False))
            ax.legend(fontsize=6, loc="upper left", frameon=False)
        else:
            ax.text(0.5, 0.5, "no achieved fractions to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("achieved fraction of the bound [%]")
        ax.set_ylabel("fraction of keys ≤ x")
        ax.set_title("Achieved fraction of the bound (CDF)")
        ax.grid(alpha=0.3, lw=0.4)
        return _finish(fig)


def achieved_cdf(p: PairSection) -> str:
    """A bound pair's cumulative distribution of the achieved fraction of the bound, the bound
    (100%) marked: a point right of it is a reference beyond the bound."""
    return to_data_uri(achieved_cdf_figure(p))


def error_cdf_figure(p: PairSection) -> Figure:
    """The error CDF as a Figure (a bound pair: the achieved-fraction CDF), see `error_cdf`."""
    import matplotlib

    if p.is_bound:
        return achieved_cdf_figure(p)

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
            _log_axis(ax.xaxis, floor, max(ape.max(), floor * 10), _pct_tick)
            if p.tolerance is not None:
                ax.axvline(p.tolerance * 100, color="#55a868", ls="--", lw=0.9, label=f"tolerance {p.tolerance:.0%}")
                ax.legend(fontsize=6, loc="lower right", frameon=False)
        else:
            ax.text(0.5, 0.5, "no errors to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("|relative error|")
        ax.set_ylabel("fraction of keys ≤ x")
        ax.set_title("Error distribution (CDF)")
        ax.grid(alpha=0.3, lw=0.4)
        return _finish(fig)


def error_cdf(p: PairSection) -> str:
    """Cumulative distribution of absolute percentage error, with the tolerance marked (a bound
    pair: of the achieved fraction of the bound, see achieved_cdf)."""
    return to_data_uri(error_cdf_figure(p))


@dataclass
class HeatGrid:
    """The workload × op-class grid a heatmap draws: values (fractions, NaN: no keys) and key counts."""

    values: pd.DataFrame
    counts: pd.DataFrame
    notes: list[str]

    @property
    def filled(self) -> int:
        return int(self.values.notna().to_numpy().sum())

    @property
    def sparse(self) -> bool:
        """Fewer than MIN_HEAT_FILL of the cells hold a value: a table says it better."""
        return self.filled < MIN_HEAT_FILL * self.values.size


def heat_grid(p: PairSection) -> HeatGrid | None:
    """MAPE (a bound: median achieved fraction) by workload × op class for the busiest
    MAX_HEAT_ROWS workloads and MAX_HEAT_COLS op classes; None without rows."""
    rows = p.rows if p.rows is not None else pd.DataFrame()
    if rows.empty:
        return None
    bound = p.is_bound and "efficiency" in rows
    value = pd.to_numeric(rows["efficiency"], errors="coerce") if bound else rows["rel_error"].abs()
    df = pd.DataFrame({"workload": rows["workload"].astype(str), "cls": rows["op"].astype(str).map(op_class),
                       "ape": value})
    wl = df["workload"].value_counts().index[:MAX_HEAT_ROWS]
    cl = df["cls"].value_counts().index[:MAX_HEAT_COLS]
    notes = []
    if df["workload"].nunique() > len(wl) or df["cls"].nunique() > len(cl):
        notes.append(f"heatmap shows the {len(wl)} workloads and {len(cl)} op classes with most keys")
    use = df[df["workload"].isin(wl) & df["cls"].isin(cl)]
    shape = {"index": sorted(wl), "columns": sorted(cl)}
    values = use.pivot_table(index="workload", columns="cls", values="ape",
                             aggfunc="median" if bound else "mean").reindex(**shape)
    counts = use.pivot_table(index="workload", columns="cls", values="ape", aggfunc="count").reindex(**shape)
    return HeatGrid(values, counts, notes)


def heatmap_cells(p: PairSection) -> list[dict[str, Any]]:
    """The heatmap's filled cells as table rows, worst first: workload, op_class, value (a
    fraction: MAPE, or a bound's median achieved fraction), n (keys), bin (of colour_scale(p))."""
    g = heat_grid(p)
    if g is None:
        return []
    scale = colour_scale(p)
    out = []
    for (w, c), v in g.values.stack(future_stack=True).dropna().items():
        out.append({"workload": str(w), "op_class": str(c), "value": float(v), "n": int(g.counts.loc[w, c]),
                    "bin": scale.bin(float(v) * 100)})
    return sorted(out, key=lambda r: (-r["value"], r["workload"], r["op_class"]))


def heatmap_figure(p: PairSection) -> tuple[Figure | None, list[str]]:
    """The heatmap as a Figure, or None (no rows, or a sparse grid: see `heatmap`)."""
    import matplotlib

    g = heat_grid(p)
    if g is None:
        return None, []
    if g.sparse:
        return None, [*g.notes, f"the workload × op class grid has {g.filled} of {g.values.size} cells filled: "
                                "listed as a table instead of a heatmap"]
    scale = colour_scale(p)
    with matplotlib.rc_context(RC):
        # first-guess margins in inches (a 6 pt character is about 0.042 in): rows named on the left,
        # op classes under the cells, the title on top; _finish fits them
        left, bottom, top = 0.2 + 0.042 * _longest(g.values.index, 40), 0.3 + 0.045 * _longest(g.values.columns, 22), 0.3
        h = bottom + top + max(0.16 * len(g.values.index), 0.8)  # 0.8 in: the colour bar's five labels fit
        fig = _figure(7.2, h, (left / 7.2, bottom / h, 1.0, 1 - top / h))
        ax = fig.add_subplot()
        vals = g.values.to_numpy(float) * 100
        cmap, norm = scale.cmap_norm()
        im = ax.imshow(np.ma.masked_invalid(vals), aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
        for (i, j), v in np.ndenumerate(vals):
            if np.isfinite(v):
                ax.text(j, i, _cell(v), ha="center", va="center", fontsize=5.5,
                        color="white" if scale.dark(v) else "black", in_layout=False)  # inside its cell
        ax.set_xticks(range(len(g.values.columns)), [shorten(terminal(c), 22) for c in g.values.columns],
                      rotation=90, fontsize=6, **SAFE)
        ax.set_yticks(range(len(g.values.index)), [shorten(terminal(w), 40) for w in g.values.index], fontsize=6,
                      **SAFE)
        bar = fig.colorbar(im, ax=ax, shrink=0.9, aspect=12, pad=0.01, extend="neither")
        bar.set_ticks([*scale.thresholds], labels=[f"{t:g}%" for t in scale.thresholds], fontsize=6)
        ax.set_title("median achieved fraction of the bound by workload × op class [%] (blank: no keys)"
                     if p.is_bound else "MAPE by workload × op class [%] (blank: no keys)")
        return _finish(fig), g.notes


def heatmap(p: PairSection) -> tuple[str | None, list[str]]:
    """MAPE (a bound: median achieved fraction) by workload × op class, coloured by colour_scale(p).

    Returns (None, notes) without rows, or when fewer than MIN_HEAT_FILL of the cells hold a value:
    the report lists heatmap_cells(p) instead.
    """
    fig, notes = heatmap_figure(p)
    return (to_data_uri(fig) if fig is not None else None), notes


def _cell(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}"


def _longest(names: Any, cap: int) -> int:
    return min(cap, max((len(str(n)) for n in names), default=0))


def _trend_times(p: PairSection) -> list[Any] | None:
    """The trend's check times as naive UTC datetimes, or None when any is missing or unreadable."""
    if len(p.trend_times) != len(p.trend):
        return None
    ts = pd.to_datetime(pd.Series(p.trend_times, dtype=object), utc=True, errors="coerce", format="ISO8601")
    if ts.isna().any():
        return None
    return [t.tz_localize(None).to_pydatetime() for t in ts]


def trend_figure(p: PairSection) -> Figure | None:
    """The trend as a Figure, None with fewer than two checks (see `trend`)."""
    import matplotlib

    if len(p.trend) < 2:
        return None
    with matplotlib.rc_context(RC):
        fig = _figure(3.6, 2.1, (0.15, 0.2, 0.96, 0.88))
        ax = fig.add_subplot()
        ys = [t[1] * 100 for t in p.trend]
        times = _trend_times(p)
        if times is not None:
            import matplotlib.dates as mdates

            ax.plot(times, ys, marker="o", ms=3, color="#4c72b0")
            loc = mdates.AutoDateLocator(minticks=2, maxticks=5)
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, usetex=False))
            if min(times) == max(times):
                from datetime import timedelta

                ax.set_xlim(min(times) - timedelta(hours=12), max(times) + timedelta(hours=12))
            ax.set_xlabel("check time (UTC)", loc="left")  # the date offset text sits on the right
        else:  # checks without a readable time: their labels, in order
            labels = [shorten(terminal(t[0]), 16) for t in p.trend]
            ax.plot(range(len(labels)), ys, marker="o", ms=3, color="#4c72b0")
            ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=5.5, **SAFE)
            ax.set_xlabel("check (no time recorded)")
        if p.is_bound:
            ax.axhline(100, color="#c44e52", ls="--", lw=0.8)
        elif p.tolerance is not None:
            ax.axhline(p.tolerance * 100, color="#55a868", ls="--", lw=0.8)
        what = "achieved fraction (median)" if p.is_bound else "MAPE"  # a short title: nothing to cut
        ax.set_ylabel(f"{'achieved' if p.is_bound else 'MAPE'} [%]")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{what} across checks")
        ax.grid(alpha=0.3, lw=0.4)
        return _finish(fig)


def trend(p: PairSection) -> str | None:
    """MAPE (a bound: the median achieved fraction) across checks, oldest to newest, against the
    checks' dates; None with fewer than two checks."""
    fig = trend_figure(p)
    return to_data_uri(fig) if fig is not None else None


def pair_figures(p: PairSection, limit: int, seed: int, bound_tol: float,
                 default_tol: float = DEFAULT_REL_TOLERANCE) -> dict[str, Any]:
    """All figures of one pair section, with the notes they produced.

    `heat_cells` (heatmap_cells) is filled when the heatmap is not drawn (a sparse grid), and
    `scale` is the pair's ColourScale for either.
    """
    outliers: list[dict[str, Any]] = []
    par, notes = parity(p, limit, seed, bound_tol, outliers, default_tol)
    heat, hnotes = heatmap(p)
    return {"parity": par, "cdf": error_cdf(p), "heatmap": heat, "trend": trend(p), "outliers": outliers,
            "heat_cells": heatmap_cells(p) if heat is None else [], "scale": colour_scale(p),
            "notes": notes + hnotes}
