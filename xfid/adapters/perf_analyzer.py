"""perf-analyzer: Triton Inference Server `perf_analyzer -f out.csv` (and the older `perf_client -f`) CSV files."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from pathlib import Path
from typing import Any, ClassVar

from xfid.adapters.base import Adapter, Columns, ReadContext, head_text, read_text
from xfid.schema import canonical_json

US = "us"
"""perf_analyzer writes every latency column in microseconds, with no unit in the header."""
# column -> (metric, stat, unit)
COLUMNS: dict[str, tuple[str, str, str]] = {
    "Inferences/Second": ("throughput_samples", "mean", "samples/s"),
    "Client Send": ("perf_analyzer:client_send", "mean", US),
    "Network+Server Send/Recv": ("perf_analyzer:network_server_send_recv", "mean", US),
    "Server Queue": ("perf_analyzer:server_queue", "mean", US),
    "Server Compute": ("perf_analyzer:server_compute", "mean", US),  # perf_client: one compute column
    "Server Compute Input": ("perf_analyzer:server_compute_input", "mean", US),
    "Server Compute Infer": ("perf_analyzer:server_compute_infer", "mean", US),
    "Server Compute Output": ("perf_analyzer:server_compute_output", "mean", US),
    "Client Recv": ("perf_analyzer:client_recv", "mean", US),
    "Avg latency": ("e2e_latency", "mean", US),
    "request/response": ("perf_analyzer:request_response", "mean", US),
    "response wait": ("perf_analyzer:response_wait", "mean", US),
}
_PCT = re.compile(r"^p(?P<n>\d+(?:\.\d+)?) latency$")
LOAD = {"Concurrency": "concurrency", "Request Rate": "request_rate"}
"""The first column: the load the row was measured under (a setting, kept in config; the row's run key)."""
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


class PerfAnalyzerAdapter(Adapter):
    name = "perf-analyzer"
    fidelity = "measured"
    formats = ("Triton perf_analyzer / perf_client -f CSV (one row per concurrency or request rate; "
               "latency columns in microseconds)")
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        s = head_text(head).lstrip()
        first = s.splitlines()[0] if s else ""
        return any(first.startswith(f"{k},Inferences/Second,") for k in LOAD)

    def read(self, ctx: ReadContext) -> dict[str, list[Any]]:
        text = read_text(ctx)
        target = ctx.require("target", "perf_analyzer CSVs do not name the hardware")
        workload = ctx.require("workload", "perf_analyzer CSVs do not name the model or its inputs")
        rows = list(csv.reader(io.StringIO(text)))
        header = [c.strip() for c in rows[0]] if rows else []
        if not header or header[0] not in LOAD or "Inferences/Second" not in header:
            raise ctx.error("line 1", f"expected a perf_analyzer header 'Concurrency,Inferences/Second,...', got "
                            f"{','.join(header)[:60]!r}", "pass the file written by `perf_analyzer -f FILE`")
        load_key = LOAD[header[0]]
        cols: dict[int, tuple[str, str, str]] = {}
        for i, name in enumerate(header[1:], 1):
            m = _PCT.match(name)
            if name in COLUMNS:
                cols[i] = COLUMNS[name]
            elif m:
                cols[i] = ("e2e_latency", f"p{m['n']}", US)
            else:
                ctx.skip(f"line 1, column {name!r}", "not read by xfid")
        base_run = ctx.run or f"{ctx.path.stem}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
        out = Columns()
        seen: dict[str, int] = {}
        for lineno, row in enumerate(rows[1:], 2):
            if not any(c.strip() for c in row):
                continue
            loc = f"line {lineno}"
            if len(row) != len(header):
                raise ctx.error(loc, f"expected {len(header)} fields like the header, got {len(row)}",
                                "the file may be truncated")
            load = row[0].strip()
            if not _NUMBER.match(load):
                raise ctx.error(f"{loc}, {header[0]}", f"{header[0]} must be a number, got {load!r}")
            level = _short(float(load))
            if level in seen:
                raise ctx.error(loc, f"{header[0]} {level} is measured twice (also on line {seen[level]})",
                                "pass one perf_analyzer run per file")
            seen[level] = lineno
            config = {load_key: float(load) if "." in load else int(load), "row": lineno - 1, **ctx.meta}
            base = {"target": target, "workload": workload, "config": canonical_json(config),
                    "run": f"{base_run}-{'c' if load_key == 'concurrency' else 'r'}{level}",
                    "software": "perf_client" if "Server Compute" in header else "perf_analyzer"}
            for i, (metric, stat, unit) in cols.items():
                cell = row[i].strip()
                if not _NUMBER.match(cell):
                    raise ctx.error(f"{loc}, {header[i]}", f"{header[i]} must be a number, got {cell!r}",
                                    "the file may be truncated or edited")
                out.add(metric, stat, float(cell), unit, f"{loc}, {header[i]}", **base)
        if not len(out):
            raise ctx.error(None, "no rows under the header", "the perf_analyzer run may have failed")
        return out.cols


def _short(v: float) -> str:
    return str(int(v)) if v.is_integer() else f"{v:g}"


__all__ = ["PerfAnalyzerAdapter"]
