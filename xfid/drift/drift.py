"""Fidelity drift between a baseline snapshot and the current one: what `xfid compare` gates on."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from xfid.errors import XfidError

CATEGORIES = ("new", "regression", "bound", "drift")
"""What `--fail-on` can name (plus `any`): new discrepancies, per-key error regressions,
bound violations the baseline did not already have, and drift (aggregate MAPE/bias moves, or
a fidelity's own values changing). A bound violation already in the baseline is reported as
`known_bound` every time and never passes silently, but it does not fail the gate again."""


@dataclass(frozen=True)
class Thresholds:
    """From `[drift]` in xfid.toml. Errors are fractions: 0.05 = 5 percentage points."""

    error_abs: float = 0.05  # a key's |rel_error| moving by more than this
    error_rel: float = 0.0  # ... and by more than this fraction of its baseline |rel_error|
    value_rel: float = 0.05  # a fidelity's own value changing by more than 5%
    mape_abs: float = 0.05  # a pair's MAPE (a bound's median achieved fraction) moving by more than 5 pp
    bias_rel: float = 0.05  # a pair's bias (geometric-mean ratio) moving by more than 5%

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> Thresholds:
        known = {f for f in cls.__dataclass_fields__}
        bad = set(section) - known
        if bad:
            raise XfidError(f"[drift] has unknown key(s) {', '.join(sorted(bad))}; allowed: {', '.join(sorted(known))}")
        vals = {}
        for k, v in section.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:  # NaN too
                raise XfidError(f"[drift] {k} must be a finite non-negative number, got {v!r}")
            vals[k] = float(v)
        return cls(**vals)


@dataclass
class Finding:
    category: str  # new | resolved | regression | improvement | bound | known_bound | aggregate | value | gone
    fingerprint: str | None
    key: dict[str, Any]
    baseline: Any
    current: Any
    message: str

    @property
    def name(self) -> str:
        k = self.key
        parts = [k.get("target"), k.get("workload"), k.get("op") or "(e2e)", k.get("metric"), k.get("stat")]
        pair = f"{k.get('candidate')}->{k.get('reference')}" if k.get("candidate") else k.get("fidelity")
        return " ".join(str(p) for p in [*parts, pair] if p)


@dataclass
class DriftReport:
    findings: list[Finding] = field(default_factory=list)
    fail_on: tuple[str, ...] = CATEGORIES
    baseline_label: str = ""
    checked_keys: int = 0

    def of(self, *cats: str) -> list[Finding]:
        return [f for f in self.findings if f.category in cats]

    def fails(self, finding: Finding) -> bool:
        """Whether this finding fails the gate (its category is one `fail_on` names)."""
        cats = {"new": ("new",), "regression": ("regression",), "bound": ("bound",), "drift": ("aggregate", "value")}
        return any(finding.category in cats[k] for k in self.fail_on)

    @property
    def failing(self) -> list[Finding]:
        return [f for f in self.findings if self.fails(f)]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0


def parse_fail_on(text: str) -> tuple[str, ...]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise XfidError("{fail_on} needs at least one of new, regression, bound, drift, any", params=("fail_on",))
    bad = [t for t in items if t not in (*CATEGORIES, "any")]
    if bad:
        raise XfidError("{fail_on}: unknown category {bad!r}; use new, regression, bound, drift or any",
                        params=("fail_on",), bad=bad[0])
    return CATEGORIES if "any" in items else tuple(dict.fromkeys(items))


def _bad(kind: str | None) -> bool:
    return kind not in (None, "ok", "missing_reference")


def _fid_values(snap: dict[str, Any]) -> dict[tuple, tuple[float, dict[str, Any]]]:
    """Each fidelity's own value per key, from both sides of every aligned pair."""
    out: dict[tuple, tuple[float, dict[str, Any]]] = {}
    for k in snap["keys"].values():
        base = (k.get("target"), k.get("workload"), k.get("op"), k.get("metric"), k.get("stat"))
        for side in ("candidate", "reference"):
            v = k.get(f"{side}_value")
            if v is not None:
                out[(*base, k[side])] = (float(v), {"target": base[0], "workload": base[1], "op": base[2],
                                                    "metric": base[3], "stat": base[4], "fidelity": k[side],
                                                    "unit": k.get("unit")})
    return out


def compare_snapshots(base: dict[str, Any], cur: dict[str, Any], th: Thresholds = Thresholds(),
                      fail_on: tuple[str, ...] = CATEGORIES) -> DriftReport:
    """Everything that changed between two snapshots, classified (see CATEGORIES)."""
    rep = DriftReport(fail_on=fail_on, baseline_label=base.get("label") or base.get("created", ""),
                      checked_keys=len(cur["keys"]))
    bk, ck = base["keys"], cur["keys"]
    for fp, c in ck.items():
        b = bk.get(fp)
        if c.get("kind") == "bound_violation":
            known = b is not None and b.get("kind") == "bound_violation"
            rep.findings.append(Finding("known_bound" if known else "bound", fp, c, b and b.get("rel_error"), c.get("rel_error"),
                                        f"bound violation: {c.get('reference')} value {c.get('reference_value'):.6g} is beyond the roofline bound {c.get('candidate_value'):.6g}"
                                        if c.get("reference_value") is not None and c.get("candidate_value") is not None else "bound violation"))
        if _bad(c.get("kind")) and (b is None or not _bad(b.get("kind"))):
            rep.findings.append(Finding("new", fp, c, b and b.get("kind"), c.get("kind"),
                                        f"new {c.get('kind')}: error {_pct(c.get('rel_error'))} vs tolerance {_pct(c.get('tolerance'))}"))
        if b is None:
            continue
        if not _bad(c.get("kind")) and _bad(b.get("kind")):
            rep.findings.append(Finding("resolved", fp, c, b.get("kind"), c.get("kind"),
                                        f"resolved: error {_pct(b.get('rel_error'))} -> {_pct(c.get('rel_error'))}"))
        be, ce = b.get("rel_error"), c.get("rel_error")
        if be is not None and ce is not None:
            delta = abs(ce) - abs(be)
            if abs(delta) > th.error_abs and abs(delta) > th.error_rel * abs(be):
                cat = "regression" if delta > 0 else "improvement"
                rep.findings.append(Finding(cat, fp, c, be, ce, f"error {_pct(be)} -> {_pct(ce)} ({delta * 100:+.1f} pp)"))
    for fp, b in bk.items():
        if fp not in ck and _bad(b.get("kind")):
            rep.findings.append(Finding("gone", fp, b, b.get("kind"), None,
                                        "no longer aligned (a fidelity lost this key): not counted as fixed"))
    bv, cv = _fid_values(base), _fid_values(cur)
    for key, (v, meta) in cv.items():
        if key in bv:
            old = bv[key][0]
            if old != 0 and abs(v - old) / abs(old) > th.value_rel:
                rep.findings.append(Finding("value", None, meta, old, v,
                                            f"{meta['fidelity']} value changed {old:.6g} -> {v:.6g} {meta.get('unit') or ''} ({(v - old) / abs(old) * 100:+.1f}%)"))
    bagg = {_agg_key(a): a for a in base["comparisons"]}
    for a in cur["comparisons"]:
        b = bagg.get(_agg_key(a))
        if b is None:
            continue
        if a.get("mape") is not None and b.get("mape") is not None and abs(a["mape"] - b["mape"]) > th.mape_abs:
            rep.findings.append(Finding("aggregate", None, a, b["mape"], a["mape"],
                                        f"MAPE {_pct(b['mape'])} -> {_pct(a['mape'])}"))
        am, bm = a.get("achieved_median"), b.get("achieved_median")
        if am is not None and bm is not None and abs(am - bm) > th.mape_abs:
            rep.findings.append(Finding("aggregate", None, a, bm, am,
                                        f"achieved fraction of the bound (median) {bm * 100:.1f}% -> {am * 100:.1f}%"))
        if a.get("bias") and b.get("bias") and abs(math.log(a["bias"] / b["bias"])) > math.log1p(th.bias_rel):
            rep.findings.append(Finding("aggregate", None, a, b["bias"], a["bias"],
                                        f"bias {b['bias']:.3f}x -> {a['bias']:.3f}x"))
    order = {"bound": 0, "new": 1, "regression": 2, "aggregate": 3, "value": 4, "gone": 5, "known_bound": 6,
             "resolved": 7, "improvement": 8}
    rep.findings.sort(key=lambda f: (order.get(f.category, 9), f.name))
    return rep


def _agg_key(a: dict[str, Any]) -> tuple:
    return (a.get("target"), a.get("candidate"), a.get("reference"), a.get("metric"), a.get("stat"))


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}%"
