"""Calibration and transfer: per-op-class/limiter efficiency factors, cross-validated error."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from xfid.config import Config
from xfid.engine.pipeline import correlate
from xfid.engine.selection import load, select
from xfid.errors import EngineError
from xfid.store import Store
from xfid.tracker.stack import window as stack_window

CAL_METRICS = ("latency", "cycles")
_SHAPE = re.compile(r"\[([^\]]*)\]")
_LAYER = re.compile(r"^(?:layers?|blk|block|h)[._]?\d+[._]")


@dataclass
class CalibrationResult:
    """Factors, cross-validation table, summary, and the calibrated predictions."""

    factors: pd.DataFrame  # op_class, limiter, factor, n
    cv: pd.DataFrame  # group_by, group, n, mape_before, mape_after
    summary: dict[str, Any]
    predictions: pa.Table  # normalized records (fidelity label e.g. roofline-cal)
    rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # per aligned row: before/after


def op_class(op: str) -> str:
    """`layer3.attn.qkv_proj` -> `attn.qkv_proj`, `gemm[m=8,n=8,k=8]` -> `gemm`."""
    base = _SHAPE.sub("", op).strip()
    base = _LAYER.sub("", base)
    return base or "(end-to-end)"


def op_size(op: str, cfg: dict[str, Any]) -> float | None:
    """FLOPs of an op: 2·m·n·k from its shape brackets, else `flops` in its config, else None."""
    m = _SHAPE.search(op)
    if m:
        dims = {}
        for part in m.group(1).split(","):
            k, _, v = part.partition("=")
            try:
                dims[k.strip().lower()] = float(v)
            except ValueError:
                continue
        if {"m", "n", "k"} <= set(dims):
            return 2.0 * dims["m"] * dims["n"] * dims["k"]
    f = cfg.get("flops")
    return float(f) if isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 else None


def size_bucket(flops: float | None) -> str:
    if flops is None or flops <= 0:
        return "unknown"
    e = math.floor(math.log10(flops))
    return f"1e{e}-1e{e + 1} FLOP"


def config_of(text: Any) -> dict[str, Any]:
    """A record's `config` JSON text as a dict ({} when empty or not an object)."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        v = json.loads(text)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _fit(df: pd.DataFrame) -> dict[tuple[str, str], tuple[float, int]]:
    """Geometric-mean factor ref/cand per (op_class, limiter), per op_class, per limiter, overall."""
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if not len(df):
        return out
    lr = -df["log_ratio"]
    for keys, name in ((["op_class", "limiter"], None), (["op_class"], "*"), (["limiter"], "limiter")):
        g = lr.groupby([df[k] for k in keys], observed=True)
        for k, v in g.agg(["mean", "size"]).iterrows():
            k = k if isinstance(k, tuple) else (k,)
            key = (k[0], k[1]) if name is None else ((k[0], "*") if name == "*" else ("*", k[0]))
            out[key] = (math.exp(v["mean"]), int(v["size"]))
    out[("*", "*")] = (math.exp(lr.mean()), len(df))
    return out


def _factor_for(fit: dict[tuple[str, str], tuple[float, int]], oc: str, lim: str) -> float:
    for key in ((oc, lim), (oc, "*"), ("*", lim), ("*", "*")):
        if key in fit:
            return fit[key][0]
    return 1.0


def calibrate(store: Store, config: Config, candidate: str, reference: str, target: str, *,
              run: Any = None, as_of: Any = None, label: str | None = None,
              metrics: tuple[str, ...] = CAL_METRICS, rows: pd.DataFrame | None = None,
              with_predictions: bool = True) -> CalibrationResult:
    """Fit efficiency factors of `candidate` against `reference` on one target.

    Factor = geometric mean of reference/candidate per (op class, limiter) — limiter from the
    candidate record's config JSON — with fallbacks op class -> limiter -> overall. Error
    before/after is cross-validated leave-one-workload-out; with a single workload,
    leave-one-op-out (the summary says which).

    `rows`: aligned rows computed before (e.g. a check's saved rows) to fit instead of
    correlating now (`run` and `as_of` are then not used); `with_predictions=False` leaves the
    predictions empty (the factors and errors alone, as the report shows them).

    Raises:
        EngineError: nothing to fit (no aligned op-level rows for that pair and target).
    """
    config.target(target)
    label = label or f"{candidate.split('-', 1)[0]}-cal"
    if rows is None:
        r = correlate(store, config, runs=run, as_of=as_of, targets=[target], pairs=[f"{candidate}->{reference}"],
                      kendall=False, bootstrap=False).rows
    else:
        r = rows[(rows["target"] == target) & (rows["candidate"] == candidate) & (rows["reference"] == reference)]
    keep = ((r["kind"] != "missing_reference") & np.isfinite(r["log_ratio"].astype(float))
            & r["metric"].isin(metrics) & (r["op"].astype(str) != "")) if len(r) else pd.Series([], dtype=bool)
    df = r[keep].copy() if len(r) else r
    if not len(df):
        raise EngineError(f"nothing to calibrate: no op-level {'/'.join(metrics)} numbers of {candidate} "
                          f"align with {reference} on target {target!r} (correlate that target to see why)")
    cfgs = [config_of(c) for c in df["candidate_config"].astype(object)]
    ops = df["op"].astype(str).tolist()
    df["op_class"] = [op_class(o) for o in ops]
    df["limiter"] = [str(c.get("limiter") or c.get("bound") or "unknown") for c in cfgs]
    df["size"] = [size_bucket(op_size(o, c)) for o, c in zip(ops, cfgs, strict=True)]
    df["workload"] = df["workload"].astype(str)
    workloads = sorted(df["workload"].unique())
    if len(workloads) > 1:
        method, folds = "leave-one-workload-out", df["workload"].to_numpy()
    else:
        method = f"leave-one-op-out (only one workload: {workloads[0]})"
        folds = df["op"].astype(str).to_numpy()
    pred = np.empty(len(df))
    for f in np.unique(folds):
        test = folds == f
        fit = _fit(df[~test])
        pred[test] = [v * (_factor_for(fit, oc, lim) if fit else 1.0) for v, oc, lim in
                      zip(df["candidate_value"][test], df["op_class"][test], df["limiter"][test], strict=True)]
    ref = df["reference_value"].to_numpy(float)
    df["ape_before"] = np.abs(df["rel_error"].to_numpy(float))
    df["ape_after"] = np.abs(pred - ref) / ref
    df["cv_prediction"] = pred
    full = _fit(df)
    factors = pd.DataFrame([(k[0], k[1], v[0], v[1]) for k, v in sorted(full.items())],
                           columns=["op_class", "limiter", "factor", "n"])
    cv_rows = []
    for by in ("op_class", "limiter", "size"):
        for g, part in df.groupby(by, sort=True):
            cv_rows.append((by, g, len(part), part["ape_before"].mean(), part["ape_after"].mean()))
    cv = pd.DataFrame(cv_rows, columns=["group_by", "group", "n", "mape_before", "mape_after"])
    fit_id = hashlib.sha256(json.dumps(sorted((list(k), v) for k, v in full.items()), default=str).encode()).hexdigest()[:12]
    summary = {"candidate": candidate, "reference": reference, "target": target, "label": label,
               "n": len(df), "n_workloads": len(workloads), "workloads": workloads,
               "mape_before": float(df["ape_before"].mean()), "mape_after": float(df["ape_after"].mean()),
               "cv_method": method, "fit": "geometric mean of reference/candidate per (op_class, limiter); "
               "fallback op_class, then limiter, then all", "fit_id": fit_id, "metrics": list(metrics),
               "stack": stack_window(df.get("reference_config", []))}
    predictions = (_predictions(store, config, candidate, reference, target, label, full, fit_id, metrics,
                                summary["stack"])
                   if with_predictions else _no_predictions())
    return CalibrationResult(factors, cv, summary, predictions,
                             df[["workload", "op", "metric", "stat", "op_class", "limiter", "size",
                                 "candidate_value", "reference_value", "cv_prediction", "ape_before", "ape_after"]])


def _no_predictions() -> pa.Table:
    from xfid.schema import normalize

    return normalize(pd.DataFrame(columns=["fidelity", "target", "workload", "op", "metric", "value"]))


def _predictions(store: Store, config: Config, candidate: str, reference: str, target: str, label: str,
                 fit: dict[tuple[str, str], tuple[float, int]], fit_id: str, metrics: tuple[str, ...],
                 stack: dict[str, list[str]] | None = None) -> pa.Table:
    """Calibrated values for every op-level candidate number of the target (not only aligned ones);
    each keeps the stack window of the fit (`calibration.stack`: xfid.tracker.stack)."""
    from xfid.schema import normalize

    picked = select(load(store, targets=[target]), config)
    sel, t = picked.entries, picked.records
    if candidate not in sel.fidelities:
        return _no_predictions()
    e = np.flatnonzero(sel.codes["fid"] == sel.fidelities.index(candidate))
    mn, on, wn, sn = (sel.dims[k] for k in ("metric", "op", "workload", "stat"))
    unit = t.column("unit").cast(pa.string()).take(pa.array(sel.rep[e])).to_pylist()
    cfg = t.column("config").cast(pa.string()).take(pa.array(sel.rep[e])).to_pylist()
    ts = t.column("timestamp").take(pa.array(sel.rep[e])).to_pylist()
    rows = []
    for i, ent in enumerate(e):
        metric, op = mn[sel.codes["metric"][ent]], on[sel.codes["op"][ent]]
        if metric not in metrics or op == "":
            continue
        c = config_of(cfg[i])
        oc, lim = op_class(op), str(c.get("limiter") or c.get("bound") or "unknown")
        f = _factor_for(fit, oc, lim)
        c["calibration"] = {"from": candidate, "reference": reference, "factor": f, "op_class": oc,
                            "limiter": lim, "fit_id": fit_id, "stack": stack or {}}
        rows.append({"fidelity": label, "target": target, "workload": wn[sel.codes["workload"][ent]],
                     "op": op, "metric": metric, "stat": sn[sel.codes["stat"][ent]],
                     "value": float(sel.value[ent]) * f, "unit": unit[i], "run": f"cal-{fit_id}",
                     "timestamp": max(x for x in ts if x is not None) if any(ts) else None,
                     "config": json.dumps(c, sort_keys=True, separators=(",", ":"))})
    df = pd.DataFrame(rows, columns=["fidelity", "target", "workload", "op", "metric", "stat", "value",
                                     "unit", "run", "timestamp", "config"])
    df = df.sort_values(["workload", "op", "metric", "stat"], kind="stable").reset_index(drop=True)
    return normalize(pa.Table.from_pandas(df, preserve_index=False), source_path="<calibration>")


def write_back(store: Store, result: CalibrationResult) -> Any:
    """Ingest the predictions as an xfid-records Parquet file kept in the store (idempotent)."""
    import pyarrow.parquet as pq

    from xfid.ingest import IngestOptions, ingest
    from xfid.outfile import open_output

    if not result.predictions.num_rows:
        raise EngineError("no calibrated predictions to write back")
    s = result.summary
    d = store.root / "calibration"
    d.mkdir(exist_ok=True)
    path = d / f"{s['label']}-{s['target']}-{s['fit_id']}.parquet"
    keep = ["fidelity", "target", "workload", "op", "metric", "stat", "value", "unit", "run", "timestamp", "config"]
    table = result.predictions.select(keep)
    if not path.exists():
        with open_output(path, store_file=True) as f:  # the store's own file, kept beside its records
            pq.write_table(table, f, compression="zstd")
    return ingest(store, [path], IngestOptions(adapter="xfid-records"))
