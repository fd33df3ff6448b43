"""Render a DriftReport as text, Markdown (a PR comment), JSON or JUnit XML."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from typing import Any

from xfid.drift.drift import DriftReport, Finding

TITLES = {
    "bound": "Bound violations", "new": "New discrepancies", "regression": "Error regressions",
    "aggregate": "Aggregate drift (MAPE / bias)", "value": "Fidelity values changed",
    "gone": "No longer aligned", "known_bound": "Bound violations already in the baseline",
    "resolved": "Resolved", "improvement": "Improved",
}


def _verdict(rep: DriftReport) -> str:
    n = len(rep.failing)
    return f"DRIFT: {n} finding(s) fail the gate (--fail-on {','.join(rep.fail_on)})" if n else "OK: no drift"


def to_text(rep: DriftReport) -> str:
    lines = [f"xfid compare against baseline {rep.baseline_label}: {rep.checked_keys} aligned keys", _verdict(rep)]
    for cat, title in TITLES.items():
        fs = rep.of(cat)
        if not fs:
            continue
        lines.append(f"\n{title} ({len(fs)}):")
        for f in fs:
            mark = "FAIL" if rep.fails(f) else "    "
            lines.append(f"  {mark} {f.name}: {f.message}")
    return "\n".join(lines) + "\n"


def _md(s: Any) -> str:
    return html.escape(str(s), quote=False).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def to_markdown(rep: DriftReport) -> str:
    icon = "❌" if rep.failing else "✅"
    out = [f"### {icon} xfid compare: {_md(_verdict(rep))}", "",
           f"Baseline `{_md(rep.baseline_label)}`, {rep.checked_keys} aligned keys.", ""]
    for cat, title in TITLES.items():
        fs = rep.of(cat)
        if not fs:
            continue
        out += [f"<details{' open' if any(rep.fails(f) for f in fs) else ''}><summary>{title} ({len(fs)})</summary>", "",
                "| | key | change |", "|---|---|---|"]
        for f in fs[:200]:
            out.append(f"| {'**fail**' if rep.fails(f) else ''} | {_md(f.name)} | {_md(f.message)} |")
        if len(fs) > 200:
            out.append(f"| | … {len(fs) - 200} more | |")
        out += ["", "</details>", ""]
    return "\n".join(out)


def _finding(f: Finding, failing: bool) -> dict[str, Any]:
    return {"category": f.category, "fails": failing, "fingerprint": f.fingerprint, "key": f.key,
            "baseline": f.baseline, "current": f.current, "message": f.message}


def to_json(rep: DriftReport) -> str:
    doc = {"drift": bool(rep.failing), "exit_code": rep.exit_code, "fail_on": list(rep.fail_on),
           "baseline": rep.baseline_label, "checked_keys": rep.checked_keys,
           "counts": {c: len(rep.of(c)) for c in TITLES},
           "findings": [_finding(f, rep.fails(f)) for f in rep.findings]}
    return json.dumps(doc, indent=2, default=str) + "\n"


def to_junit(rep: DriftReport) -> str:
    failing = rep.failing
    suite = ET.Element("testsuite", name="xfid-compare", tests=str(max(len(failing), 1) + 1),
                       failures=str(len(failing)), errors="0", skipped="0")
    for f in failing:
        tc = ET.SubElement(suite, "testcase", classname=f"xfid.{f.category}", name=f.name)
        fail = ET.SubElement(tc, "failure", message=f.message, type=f.category)
        fail.text = json.dumps(_finding(f, True), default=str, indent=1)
    if not failing:
        ET.SubElement(suite, "testcase", classname="xfid.compare", name="no drift")
    ET.SubElement(suite, "testcase", classname="xfid.compare", name=f"{rep.checked_keys} aligned keys checked")
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


FORMATTERS = {"text": to_text, "markdown": to_markdown, "json": to_json, "junit": to_junit}
