"""Benchmark the report: 1,000 open discrepancies, 20 workloads, 4 pairs; PDF, its HTML and `--html` times.

Run: `python benchmarks/report.py [--issues 1000] [--repeat 3] [--out /tmp/xfid-bench.pdf]`.
Prints medians of `--repeat` runs (the imports are paid once, before the first timed run, and
reported separately). Goal on the 2-core dev machine: PDF < 20 s, HTML < 3 s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issues", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="/tmp/xfid-bench-report.pdf")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import matplotlib  # noqa: F401

    from xfid.report.render import render_html, render_pdf, weasyprint, write_atomic
    from xfid.report.synthetic import synthetic_report
    from xfid.report.web import render_web

    weasyprint()
    t_import = time.perf_counter() - t0

    t0 = time.perf_counter()
    data = synthetic_report(n_issues=args.issues, n_workloads=args.workloads, seed=0)
    t_data = time.perf_counter() - t0
    keys = sum(len(p.rows) for p in data.pairs if p.rows is not None)
    print(f"data: {len(data.open_issues)} active issues, {len(data.pairs)} pairs, {keys} keys, "
          f"{args.workloads} workloads (built in {t_data:.2f} s); imports {t_import:.2f} s")

    html_t, pdf_t, web_t, pages, size = [], [], [], 0, 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        html = render_html(data)
        html_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pdf, pages = render_pdf(html)
        pdf_t.append(time.perf_counter() - t0)
        size = len(pdf)
        t0 = time.perf_counter()
        web = render_web(data)  # `xfid report --html`: every table, sortable (xfid.report.web)
        web_t.append(time.perf_counter() - t0)
    write_atomic(Path(args.out), pdf)
    h, p, w = statistics.median(html_t), statistics.median(pdf_t), statistics.median(web_t)
    print(f"HTML only (data -> HTML, figures included): median {h:.2f} s of {args.repeat}  "
          f"[{', '.join(f'{x:.2f}' for x in html_t)}]; {len(html) / 1e6:.2f} MB")
    print(f"PDF (data -> HTML -> PDF):           median {h + p:.2f} s  (WeasyPrint alone {p:.2f} s); "
          f"{pages} pages, {size / 1e6:.2f} MB -> {args.out}")
    print(f"HTML report (--html, every table):   median {w:.2f} s of {args.repeat}  "
          f"[{', '.join(f'{x:.2f}' for x in web_t)}]; {len(web) / 1e6:.2f} MB")
    print(f"goals: PDF < 20 s {'met' if h + p < 20 else 'MISSED'}, HTML < 3 s {'met' if max(h, w) < 3 else 'MISSED'}")


if __name__ == "__main__":
    main()
