"""Inline SVG line plots for the pages (no script, no style attribute: the CSP allows neither inline).

Every label goes through markupsafe.escape; numbers are formatted here, never taken as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

W, H, PAD = 640, 220, 40
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _x_labels(first: float, last: float, sx: Any) -> list[str]:
    """The x axis' labels: the first and last check plotted (one label when they are the same)."""
    if first == last:
        return [f'<text x="{sx(first):.1f}" y="{H - PAD + 16}" font-size="10" text-anchor="middle">'
                f'check {first:.0f}</text>']
    return [f'<text x="{PAD}" y="{H - PAD + 16}" font-size="10">check {first:.0f}</text>',
            f'<text x="{W - PAD}" y="{H - PAD + 16}" font-size="10" text-anchor="end">check {last:.0f}</text>']


def lines(series: dict[str, Sequence[tuple[float, float]]], *, y_label: str, y_min: float | None = None,
          y_max: float | None = None, marks: Sequence[float] = (), title: str = "") -> Markup:
    """A plot of named (x, y) series; `marks`: x positions drawn as dashed vertical lines."""
    pts = [p for s in series.values() for p in s if math.isfinite(p[1])]
    if not pts:
        return Markup('<p class="muted">nothing to plot yet</p>')
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    first, last = x0, x1  # the checks the axis names: those plotted (one check: one label, under it)
    y0 = min(ys) if y_min is None else y_min
    y1 = max(ys) if y_max is None else y_max
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1

    def sx(x: float) -> float:
        return PAD + (x - x0) / (x1 - x0) * (W - 2 * PAD)

    def sy(y: float) -> float:
        return H - PAD + (y - y0) / (y1 - y0) * (2 * PAD - H)

    out = [f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="{escape(title or y_label)}">',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>',
           f'<text x="4" y="{PAD - 8}" font-size="11">{escape(y_label)}</text>',
           f'<text x="{PAD - 4}" y="{H - PAD + 4}" font-size="10" text-anchor="end">{y0:.3g}</text>',
           f'<text x="{PAD - 4}" y="{PAD + 4}" font-size="10" text-anchor="end">{y1:.3g}</text>',
           *(_x_labels(first, last, sx))]
    for m in marks:
        out.append(f'<line x1="{sx(m):.1f}" y1="{PAD}" x2="{sx(m):.1f}" y2="{H - PAD}" stroke="#d62728" '
                   'stroke-dasharray="4 3"/>')
    for i, (name, s) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        good = [(x, y) for x, y in s if math.isfinite(y)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in good)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for x, y in good:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}">'
                       f'<title>{escape(name)}: check {x:.0f}, {y:.4g}</title></circle>')
        out.append(f'<text x="{W - PAD + 4 - 120}" y="{PAD + 12 + 13 * i}" font-size="11" fill="{colour}">'
                   f'{escape(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
