"""Seeded synthetic ReportData for tests, the benchmark and layout checks (labelled as such)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from xfid.engine.fingerprints import fingerprint
from xfid.report.data import PairSection, ReportData
from xfid.report.period import Period, iso_week
from xfid.report.views import build_pairs, competitive_view

HOSTILE = ('<img src="file:///etc/passwd">', "</style><script>alert(1)</script>", r"$\frac{1}{0}$", "{{ 7*7 }}")
PAIRS = (("roofline", "archmodel"), ("archmodel", "rtl"), ("archmodel", "measured"), ("roofline", "measured"))
OPS = ("layer{i}.attn.qkv_proj", "layer{i}.attn.o_proj", "layer{i}.mlp.up_proj", "layer{i}.mlp.down_proj",
       "layer{i}.attn.sdpa", "lm_head",
       "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)")


def _workloads(n: int, hostile: bool) -> list[str]:
    models = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "qwen2-7b", "gpt-j-6b")
    out = [f"{models[i % 5]}/{'decode' if i % 2 else 'prefill'}/bs{2 ** (i % 6)}/ctx{1024 * (1 + i // 10)}/bf16"
           for i in range(n)]
    if hostile:
        out[: len(HOSTILE)] = HOSTILE
    return out


def synthetic_rows(n_keys: int, workloads: list[str], seed: int, hostile: bool = False) -> pd.DataFrame:
    """Correlation.rows-shaped frame: 4 pairs on target t100-a0, latency in seconds."""
    rng = np.random.default_rng(seed)
    recs = []
    for k in range(n_keys):
        cand, ref = PAIRS[k % len(PAIRS)]
        w = workloads[(k // len(PAIRS)) % len(workloads)]
        op = OPS[(k // (len(PAIRS) * len(workloads))) % len(OPS)].format(i=k % 32)
        if hostile and k % 17 == 0:
            op = HOSTILE[k % len(HOSTILE)]
        ref_v = float(rng.lognormal(-9, 1.5))
        err = float(rng.normal(0.04 if cand == "archmodel" else -0.2, 0.12))
        if k % 41 == 0:
            err = float(rng.choice([0.9, -0.6, 2.5]))
        cand_v = ref_v * max(0.05, 1 + err)
        rel = cand_v / ref_v - 1
        tol = 0.10 if cand != "roofline" else 0.5
        kind = "ok" if abs(rel) <= tol else "over_tolerance"
        if cand == "roofline" and ref_v < cand_v * 0.98:
            kind = "bound_violation"
        recs.append({"fingerprint": fingerprint("t100-a0", w, op, "latency", "mean", cand, ref), "target": "t100-a0",
                     "workload": w, "op": op, "metric": "latency", "stat": "mean", "candidate": cand,
                     "reference": ref, "candidate_value": cand_v, "reference_value": ref_v, "unit": "s",
                     "rel_error": rel, "log_ratio": float(np.log(cand_v / ref_v)), "tolerance": tol,
                     "tolerance_abs": 0.0, "within": kind == "ok", "kind": kind,
                     "severity": round(abs(rel) / tol * (3 if kind == "bound_violation" else 1), 2)})
    return pd.DataFrame(recs)


def _comparisons(rows: pd.DataFrame, shift: float) -> list[dict[str, Any]]:
    out = []
    for (t, c, r, m, s), g in rows.groupby(["target", "candidate", "reference", "metric", "stat"]):
        ape = g["rel_error"].abs() * (1 + shift)
        mape = float(ape.mean())
        out.append({"target": t, "workload": None, "candidate": c, "reference": r, "metric": m, "stat": s,
                    "n": len(g), "mape": mape, "median_ape": float(ape.median()),
                    "bias": float(np.exp(g["log_ratio"].mean())), "log_rmse": float(np.sqrt((g["log_ratio"] ** 2).mean())),
                    "pearson_log": 0.9, "spearman": 0.88, "kendall": 0.74, "within_tolerance": float(g["within"].mean()),
                    "mape_ci": [mape * 0.9, mape * 1.1], "bias_ci": None})
    return out


def _records(workloads: list[str]) -> pd.DataFrame:
    ts = pd.Timestamp("2026-11-25", tz="UTC")
    recs = []
    vals = {"t100-a0": (2400.0, 8.0, 0.045, 0.011), "h100-sxm": (1900.0, 2.9, 0.060, 0.014),
            "h200-sxm": (2300.0, 3.4, 0.052, 0.012)}
    for w in workloads[:6]:
        for tgt, (tps, tpj, ttft, itl) in vals.items():
            fid = "archmodel" if tgt == "t100-a0" else "measured"
            for metric, v, stat in (("throughput_tokens", tps, "value"), ("tokens_per_joule", tpj, "value"),
                                    ("ttft", ttft, "median"), ("itl", itl, "median")):
                recs.append({"fidelity": fid, "target": tgt, "workload": w, "op": "", "metric": metric, "stat": stat,
                             "value": v, "unit": "", "timestamp": ts})
    return pd.DataFrame(recs)


def synthetic_report(n_issues: int = 60, n_workloads: int = 8, seed: int = 0, hostile: bool = False,
                     period: Period | None = None, n_checks: int = 6) -> ReportData:
    """A full ReportData from seeded synthetic numbers (about `n_issues` open discrepancies)."""
    period = period or iso_week("2026-W48")
    rng = np.random.default_rng(seed)
    workloads = _workloads(n_workloads, hostile)
    n_keys = max(40, 2 * n_issues)
    rows = synthetic_rows(n_keys, workloads, seed, hostile)
    while (rows["kind"] != "ok").sum() < n_issues:  # grow until there are enough discrepancies
        n_keys *= 2
        rows = synthetic_rows(n_keys, workloads, seed, hostile)
    bad = rows[rows["kind"] != "ok"].head(n_issues)
    first = period.since - timedelta(days=30)
    issues = []
    for i, r in enumerate(bad.itertuples(index=False)):
        seen = first + timedelta(days=int(rng.integers(0, 36)))
        state = "acknowledged" if i % 7 == 3 else ("reopened" if i % 11 == 5 else "open")
        issues.append({"id": f"XF-{i + 1}", "fingerprint": r.fingerprint, "state": state, "kind": r.kind,
                       "severity": r.severity, "target": r.target, "workload": r.workload, "op": r.op,
                       "metric": r.metric, "stat": r.stat, "candidate": r.candidate, "reference": r.reference,
                       "candidate_value": r.candidate_value, "reference_value": r.reference_value,
                       "rel_error": r.rel_error, "tolerance": r.tolerance, "unit": r.unit,
                       "owner": "" if i % 3 else "arch-team", "first_seen": seen.isoformat(),
                       "last_seen": period.until.isoformat()})
    resolved = [dict(i, id=f"XF-{len(issues) + k + 1}", state="resolved") for k, i in enumerate(issues[:4])]
    checks = []
    for c in range(n_checks):
        t = period.until - timedelta(days=7 * (n_checks - 1 - c), hours=12)
        checks.append({"id": c + 1, "time": t.isoformat(), "label": t.strftime("%Y-%m-%d"), "actor": "ci",
                       "counts": {"new": 3 + c, "reopened": c % 2, "resolved": 2, "still_open": len(issues),
                                  "waived": 1, "total_open": len(issues) - (n_checks - 1 - c)},
                       "comparisons": _comparisons(rows, 0.05 * (n_checks - 1 - c))})
    pairs: list[PairSection] = build_pairs(checks, rows, [])
    data = ReportData(period=period, generated_at=datetime(2026, 12, 1, 8, 30, tzinfo=UTC), store="(synthetic)",
                      config_hash="synthetic", checks=[checks[-1]], pairs=pairs, open_issues=issues,
                      resolved_issues=resolved, seed=seed)
    data.counts = {"active": len(issues), "new": 8, "reopened": 1, "resolved": len(resolved), "waived": 1}
    data.prev_counts = {"active": len(issues) - 1, "new": 7, "reopened": 0, "resolved": 2, "waived": 1}
    data.ours = ["t100-a0"]
    data.competitives = [competitive_view(_records(workloads), "t100-a0", invented=True,
                                          note="example target invented for xfid's demo; not a real chip")]
    data.calibration = [{"candidate": "archmodel", "reference": "measured", "target": "h100-sxm",
                         "factors": [{"op_class": "attn.sdpa", "limiter": "memory", "factor": 0.71, "n": 12},
                                     {"op_class": "mlp.up_proj", "limiter": "compute", "factor": 0.83, "n": 20}],
                         "cv": [{"group_by": "workload", "group": workloads[1], "n": 14, "mape_before": 0.31,
                                 "mape_after": 0.12}],
                         "summary": {"mape_before": 0.31, "mape_after": 0.12, "stops_transferring": "attn.sdpa"}}]
    data.coverage = {"unmatched": [{"source": "ncu", "raw_op": OPS[-1], "op": "", "matched": False, "records": 42}],
                     "unmatched_total": 1,
                     "fidelities": [{"target": "t100-a0", "workload": w, "have": ["roofline", "archmodel"],
                                     "missing": ["rtl", "measured"]} for w in workloads[:4]]}
    data.sources = [{"source_id": hashlib.sha256(f"s{k}".encode()).hexdigest()[:16], "path": f"fixtures/run{k}.json",
                     "adapter": "vllm-bench", "content_hash": hashlib.sha256(f"c{k}".encode()).hexdigest(), "rows": 100 + k, "ingested_at": "2026-11-25T10:00:00Z",
                     "hardware": ["h100-sxm"], "software": ["vllm 0.6.3"], "config": ['{"power_cap_w":700}']}
                    for k in range(3)]
    data.caveats = ["synthetic data: every number in this report is generated (seeded) for layout and tests"]
    return data
