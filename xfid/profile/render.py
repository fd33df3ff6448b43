"""The profile as terminal tables, markdown, one self-contained HTML file or PDF (the report's path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from xfid.profile.build import Profile
from xfid.textsafe import terminal

CLASS_HEAD = ["ref", "target", "precision", "size", "limiter", "n", "of bound", "95% CI", "IQR", "of peak",
              "what limits it", "caveats"]
TRANSFER_HEAD = ["target", "op class", "n", "error before", "error after", "95% CI", "tolerance", "run spread",
                 "verdict", "caveats"]
INTERFERENCE_HEAD = ["target", "op class", "co-runner", "n", "slowdown", "95% CI", "caveats"]
COUNTER_HEAD = ["target", "op class", "kernel", "what the counters say", "record"]
ACROSS_HEAD = ["target", "calibrated on", "op class", "n", "error before", "error after", "95% CI", "tolerance",
               "verdict", "caveats"]


def pct(v: Any) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def rng(v: Any, f: Callable[[Any], str] = pct) -> str:
    return "—" if not v else f"{f(v[0])}–{f(v[1])}"


def times(v: Any) -> str:
    return "—" if v is None else f"{v:.3g}×"


def class_refs(p: Profile) -> dict[int, str]:
    """`C1`, `C2`, ... for every class entry (by id of the dict), in document order."""
    refs: dict[int, str] = {}
    for t in p.targets:
        for c in t["classes"]:
            refs[id(c)] = f"C{len(refs) + 1}"
    return refs


def class_tables(p: Profile) -> list[tuple[str, list[list[str]]]]:
    """One table per op class, the targets side by side."""
    refs = class_refs(p)
    by: dict[str, list[list[str]]] = {}
    for t in p.targets:
        for c in t["classes"]:
            fb, fp = c["fraction_of_bound"], c["fraction_of_peak"]
            peak = f"{pct(fp['median'])} of {c['peak']['kind']}" if c.get("peak") and fp["median"] is not None else "—"
            by.setdefault(c["op_class"], []).append([
                refs[id(c)], t["target"], c["precision"], c["size_bucket"], c["limiter"], str(c["n"]),
                pct(fb["median"]), rng(fb["ci"]), rng([fb["q1"], fb["q3"]]), peak,
                c["limits"]["verdict"], "; ".join(c["caveats"]) or "—"])
    return sorted(by.items())


def transfer_rows(p: Profile) -> list[list[str]]:
    out = []
    for t in p.targets:
        for r in t["transfer"]:
            sp = r["measurement_spread"]
            out.append([t["target"], r["op_class"], str(r["n"]), pct(r["error_before"]["mean"]),
                        pct(r["error_after"]["mean"]), rng(r["error_after"]["ci"]), pct(r["tolerance"]),
                        f"{pct(sp['median'])} ({sp['keys']} keys)" if sp else "— (one run per key)",
                        r["verdict"], "; ".join(r["caveats"]) or "—"])
    return out


def across_rows(p: Profile) -> list[list[str]]:
    """The roofline calibrated on one target of the profile, applied to another."""
    return [[t["target"], r["calibrated_on"], r["op_class"], str(r["n"]), pct(r["error_before"]["mean"]),
             pct(r["error_after"]["mean"]), rng(r["error_after"]["ci"]), pct(r["tolerance"]), r["verdict"],
             "; ".join(r["caveats"]) or "—"] for t in p.targets for r in t.get("transfer_across", [])]


def interference_rows(p: Profile) -> list[list[str]]:
    return [[t["target"], r["op_class"], r["co_runner"], str(r["n"]), times(r["slowdown"]["median"]),
             rng(r["slowdown"]["ci"], times), "; ".join(r["caveats"]) or "—"]
            for t in p.targets for r in t["interference"]]


def counter_rows(p: Profile) -> list[list[str]]:
    """Kernels with Nsight Compute counters but no roofline bound (raw names no op map covers)."""
    return [[t["target"], r["op_class"], _cut(r["op"]), r["verdict"],
             f"{r['evidence'][0]['source_path']} {r['evidence'][0]['source_loc']}"]
            for t in p.targets for r in t["counters_without_bound"]]


def _cut(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def condition_lines(t: dict[str, Any]) -> list[str]:
    """The conditions of one target as plain lines (values escaped by the caller)."""
    c = t["conditions"]
    ds = c["data_sheet"]
    peaks = ", ".join(f"{k} {v / 1e12:.4g} TFLOP/s" for k, v in ds["peak_flops"].items())
    lines = [f"achieved numbers: {c['fidelity'] or 'none'}, {c['observations']} with a bound "
             f"({c['interfered']} with a co-runner) from {len(c['sources'])} file(s)",
             f"data sheet: {peaks}; mem_bw {_si(ds['mem_bw'], 'B/s')}; clock {_si(ds['clock_hz'], 'Hz')}; "
             f"TDP {ds['tdp_w'] or '—'} W" + ("; INVENTED target" if ds["invented"] else "")]
    for name in ("hardware", "software"):
        if c[name]:
            lines.append(f"{name}: " + "; ".join(f"{v['value']} ({v['n']})" for v in c[name]))
    for name, key in (("power/clocks", "power_and_clocks"), ("configuration", "configuration")):
        for e in c[key]:
            lines.append(f"{name}: {e['name']} = " + ", ".join(f"{v['value']} ({v['n']})" for v in e["values"]))
    if not c["power_and_clocks"]:
        lines.append("power/clocks: not recorded by the sources (unknown power limit and clocks)")
    for r in c["runs"]:
        lines.append(f"run {r['run']}: {r['n']} numbers" + (f", co-runner {r['co_runner']}" if r["co_runner"] else ""))
    for e in c["excluded"]:
        lines.append(f"excluded: {e['n']} numbers of {e['source_path']} (run {e['run']}): {e['why']}")
    if c["unbounded"]:
        n = sum(u["n"] for u in c["unbounded"])
        ops = sorted({u["op"] or "(end-to-end)" for u in c["unbounded"]})
        lines.append(f"not profiled: {n} numbers of {len(ops)} op(s) have no roofline bound "
                     f"(e.g. {', '.join(o[:60] for o in ops[:3])}); add [[op_map]] rules to align them")
    return lines


def _si(x: Any, unit: str) -> str:
    if not x:
        return "—"
    for f, p in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(x) >= f:
            return f"{x / f:.4g} {p}{unit}"
    return f"{x:.4g} {unit}"


def evidence_lines(p: Profile) -> list[tuple[str, list[dict[str, str]]]]:
    refs = class_refs(p)
    return [(refs[id(c)], c["evidence"]) for t in p.targets for c in t["classes"]]


def _grid(head: list[str], rows: list[list[str]]) -> list[str]:
    rows = [[terminal(x) for x in r] for r in rows]
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{x}}}" for x in w)
    return [fmt.format(*head).rstrip(), fmt.format(*("-" * x for x in w)).rstrip(),
            *(fmt.format(*r).rstrip() for r in rows)]


def to_table(p: Profile) -> str:
    """Terminal text: one table per op class with the targets side by side, then transfer,
    interference, conditions and every class's records."""
    out = [f"capability profile: {', '.join(terminal(t['target']) for t in p.targets)}",
           "fraction of bound = roofline bound time / measured time (100% = at the roofline); "
           "median, bootstrap 95% CI (seeded), IQR", ""]
    for t in p.targets:
        out += [f"caveat ({terminal(t['target'])}): {terminal(c)}" for c in t["caveats"]]
    for oc, rows in class_tables(p):
        out += [f"== {terminal(oc)} ==", *_grid(CLASS_HEAD, rows), ""]
    if not any(t["classes"] for t in p.targets):
        out += ["no achieved numbers with a roofline bound", ""]
    out += ["== transfer (roofline calibrated on the target, cross-validated) ==", *_grid(TRANSFER_HEAD, transfer_rows(p)), ""]
    if across_rows(p):
        out += ["== transfer across targets (factors fitted on one target, applied to another) ==",
                *_grid(ACROSS_HEAD, across_rows(p)), ""]
    out += ["== interference (runs with a co-runner / isolated runs of the same key) ==",
            *(_grid(INTERFERENCE_HEAD, interference_rows(p)) if interference_rows(p) else ["no runs tagged interference=NAME"]), ""]
    if counter_rows(p):
        out += ["== Nsight Compute counters of kernels without a roofline bound ==",
                *_grid(COUNTER_HEAD, counter_rows(p)), ""]
    for t in p.targets:
        out += [f"== conditions: {terminal(t['target'])} ==", *(terminal(x) for x in condition_lines(t)), ""]
    out.append("== records behind each class ==")
    for ref, ev in evidence_lines(p):
        out.append(f"{ref}: " + "; ".join(terminal(f"{e['role']} {e['source_path']} {e['source_loc']}") for e in ev))
    return "\n".join(out) + "\n"


def to_markdown(p: Profile) -> str:
    """The same content as markdown tables (untrusted text escaped for markdown and HTML)."""
    from xfid.engine.output import md_escape

    def table(head: list[str], rows: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                *("| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows), ""]

    out = [f"# Capability profile: {', '.join(md_escape(t['target']) for t in p.targets)}", "",
           "Fraction of bound = roofline bound time / measured time (100% = at the roofline): median, "
           "seeded bootstrap 95% CI and IQR.", ""]
    for t in p.targets:
        out += [f"- **caveat ({md_escape(t['target'])})**: {md_escape(c)}" for c in t["caveats"]]
    for oc, rows in class_tables(p):
        out += [f"## {md_escape(oc)}", "", *table(CLASS_HEAD, rows)]
    out += ["## Transfer", "", *table(TRANSFER_HEAD, transfer_rows(p))]
    if across_rows(p):
        out += ["## Transfer across targets", "", *table(ACROSS_HEAD, across_rows(p))]
    out += ["## Interference", "", *(table(INTERFERENCE_HEAD, interference_rows(p)) if interference_rows(p)
                                     else ["No runs tagged `interference=NAME`.", ""])]
    if counter_rows(p):
        out += ["## Nsight Compute counters of kernels without a roofline bound", "", *table(COUNTER_HEAD, counter_rows(p))]
    for t in p.targets:
        out += [f"## Conditions: {md_escape(t['target'])}", "", *(f"- {md_escape(x)}" for x in condition_lines(t)), ""]
    out += ["## Records behind each class", ""]
    for ref, ev in evidence_lines(p):
        out.append(f"- {ref}: " + "; ".join(md_escape(f"{e['role']} {e['source_path']} {e['source_loc']}") for e in ev))
    return "\n".join(out) + "\n"


def html_context(p: Profile, short: bool = False) -> dict[str, Any]:
    """What the capability template reads: the tables and lines, not yet escaped (Jinja2 does it).

    `short` (the weekly report's section): the tables only (no IQR column), no conditions and
    records lists.
    """
    classes, head, widths = class_tables(p), CLASS_HEAD, [4, 8, 7, 9, 8, 3, 6, 10, 10, 10, 15, 10]
    if short:  # without the IQR column: room for the verdicts, rows a few lines high
        drop = {CLASS_HEAD.index("IQR")}
        classes = [(oc, [[x for i, x in enumerate(r) if i not in drop] for r in rows]) for oc, rows in classes]
        head = [h for i, h in enumerate(CLASS_HEAD) if i not in drop]
        widths = [4, 8, 8, 9, 7, 3, 6, 11, 10, 22, 12]
    return {"short": short, "classes": classes, "class_head": head, "class_widths": widths,
            "numeric": [head.index("n") + 1, head.index("of bound") + 1], "transfer": transfer_rows(p),
            "transfer_head": TRANSFER_HEAD, "interference": interference_rows(p),
            "interference_head": INTERFERENCE_HEAD, "counters": counter_rows(p), "counter_head": COUNTER_HEAD,
            "across": across_rows(p), "across_head": ACROSS_HEAD,
            "targets": [{"target": t["target"], "caveats": t["caveats"], "conditions": condition_lines(t)}
                        for t in p.targets],
            "evidence": evidence_lines(p)}


def to_html(p: Profile, generated: str) -> str:
    """One self-contained HTML page (the report's stylesheet; autoescaped; no external resource)."""
    import markupsafe

    from xfid.report.render import _css, _env

    return _env().get_template("profile.html.j2").render(cap=html_context(p), generated=generated,
                                                          css=markupsafe.Markup(_css()))


def write_document(p: Profile, path: str | Path) -> tuple[Path, int | None]:
    """Write `.html` or `.pdf` (by the report's renderer: data: URIs only); returns (path, pages).

    Raises:
        ReportError: another extension, or a file that cannot be written.
    """
    from datetime import UTC, datetime

    from xfid.errors import ReportError
    from xfid.report.render import render_pdf, write_atomic

    out = Path(path)
    kind = out.suffix.lower()
    if kind not in (".html", ".pdf"):
        raise ReportError("{output} {out}: a profile document is .html or .pdf (a table, JSON or Markdown is "
                          "written by `to_table`, `to_json`, `to_markdown`)", params=("output",), out=str(out))
    text = to_html(p, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    if kind == ".html":
        write_atomic(out, text.encode("utf-8"))
        return out, None
    pdf, pages = render_pdf(text)
    write_atomic(out, pdf)
    return out, pages
