"""ncu: Nsight Compute CSV, the long `--csv` layout (one row per metric) and `--page raw`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from xfid import units
from xfid.adapters import nvcsv
from xfid.adapters.base import Adapter, ReadContext, head_text
from xfid.errors import UnitError
from xfid.schema import canonical_json

ID_PREFIX = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name"]
IDENTITY = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
            "Stream", "Block Size", "Grid Size", "Device", "CC"}
LONG = ("Metric Name", "Metric Unit", "Metric Value")
RULE = "Rule Name"
# raw ncu metric -> canonical metric (everything else is kept as `ncu:<name>`)
MAPPED: dict[str, str] = {
    "gpu__time_duration.sum": "latency",
    "gpc__cycles_elapsed.max": "cycles",
    "dram__bytes.sum": "bytes",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "utilization",
}
# the details page shows some of them under human names in the Speed Of Light section
SOL_SECTIONS = {"GPU Speed Of Light Throughput", "GPU Speed Of Light", ""}
DETAILS: dict[str, str] = {
    "Duration": "gpu__time_duration.sum",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "SM [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
}
DRAM_PARTS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
DISPLAY_NAME = "device__attribute_display_name"
_RAW_NAME = re.compile(r"^[a-z0-9_]+__[\w.\-\[\]/]+$")
BATCH_ROWS = 200_000
EXPECTED = '"ID","Process ID","Process Name","Host Name","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"'
FIX = "export with `ncu --csv` (or `ncu --csv --page raw`), e.g. `ncu --csv --log-file out.csv ...`"
OUT = ("target", "workload", "op", "metric", "stat", "value", "unit", "source_loc", "null_reason",
       "hardware", "software", "config")


def _is_header(fields: list[str]) -> bool:
    return [f.strip() for f in fields[:5]] == ID_PREFIX


def tool_metric(name: str) -> str:
    """`ncu:<name>` for a raw metric name; a slug for a human details-page name."""
    if _RAW_NAME.match(name):
        return f"ncu:{name}"
    slug = re.sub(r"[^a-z0-9.]+", "_", name.lower()).strip("_.") or "unnamed"
    return f"ncu:{slug}"


class NcuAdapter(Adapter):
    name = "ncu"
    fidelity = "measured"
    formats = ("Nsight Compute CSV: `ncu --csv` (one row per metric, ==PROF== preamble, rule columns) "
               "and `ncu --csv --page raw` (one row per kernel, units on row 2)")
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        for line in head_text(head).splitlines()[:60]:
            if line.startswith(('"ID","Process ID"', "ID,Process ID")):
                return _is_header(nvcsv.split_line(line))
        return False

    def read(self, ctx: ReadContext) -> Iterator[pa.Table]:
        target = ctx.require("target", "Nsight Compute CSVs do not name the hardware target")
        workload = ctx.require("workload", "Nsight Compute CSVs do not name the workload")
        hdr = nvcsv.find_header(ctx, _is_header, "Nsight Compute CSV", EXPECTED, FIX)
        nvcsv.check_tail(ctx)
        cols = [c.strip() for c in hdr.fields]
        present = [c for c in LONG if c in cols]
        if present and len(present) < len(LONG):
            missing = next(c for c in LONG if c not in cols)
            raise ctx.error(f"line {hdr.line}", f"the header has {present[0]!r} but no {missing!r} column", FIX)
        ctx_cols = {"target": target, "workload": workload}
        if present:
            return self._long(ctx, hdr, cols, ctx_cols)
        return self._raw(ctx, hdr, cols, ctx_cols)

    # --- layouts ------------------------------------------------------------------------
    def _long(self, ctx: ReadContext, hdr: nvcsv.Header, cols: list[str], fixed: dict[str, str]) -> Iterator[pa.Table]:
        ix = {c: i for i, c in enumerate(cols)}
        i_id, i_name, i_unit, i_val = ix["ID"], ix["Metric Name"], ix["Metric Unit"], ix["Metric Value"]
        i_sec, i_rule = ix.get("Section Name"), ix.get(RULE)
        out = _Rows(fixed, "ncu --csv")
        cur: str | None = None
        kinfo: dict[str, str] = {}
        entries: list[tuple[int, str, str, str, str]] = []
        last = max(ix[c] for c in ("ID", "Kernel Name", *LONG))
        for line, f in nvcsv.iter_rows(ctx, hdr):
            f = _fit(ctx, line, f, len(cols), last)
            if f[i_id] != cur:
                if entries:
                    self._emit(ctx, out, kinfo, entries)
                    if len(out) >= BATCH_ROWS:
                        yield out.table()
                cur, kinfo, entries = f[i_id], self._kernel(ctx, line, f, ix), []
            if not f[i_name].strip():
                if i_rule is not None and f[i_rule].strip():
                    ctx.skip(f"line {line}", f"rule {f[i_rule].strip()!r} (advice, not a measurement)")
                    continue
                raise ctx.error(f"line {line}", "empty 'Metric Name'", "every metric row names its metric")
            section = f[i_sec].strip() if i_sec is not None else ""
            entries.append((line, section, f[i_name].strip(), f[i_unit].strip(), f[i_val]))
        if cur is None:
            raise ctx.error(f"line {hdr.line}", "no metric rows after the header (truncated?)", FIX)
        self._emit(ctx, out, kinfo, entries)
        yield out.table()

    def _raw(self, ctx: ReadContext, hdr: nvcsv.Header, cols: list[str], fixed: dict[str, str]) -> Iterator[pa.Table]:
        ix = {c: i for i, c in enumerate(cols)}
        metric_cols = [(i, c) for i, c in enumerate(cols) if c not in IDENTITY]
        if not metric_cols:
            raise ctx.error(f"line {hdr.line}", "no metric columns and no 'Metric Name'/'Metric Value' columns", FIX)
        odd = [c for _, c in metric_cols if "__" not in c]
        if odd:
            ctx.warn(f"columns kept as ncu:<slug> metrics though they are not ncu metric names: {', '.join(odd[:5])}")
        out = _Rows(fixed, "ncu --csv --page raw")
        unit_row: list[str] | None = None
        kernels = 0
        for line, f in nvcsv.iter_rows(ctx, hdr):
            f = _fit(ctx, line, f, len(cols), len(cols) - 1)  # one row per kernel: every column is a value
            if unit_row is None:
                if f[ix["ID"]].strip():
                    raise ctx.error(f"line {line}", f"expected the units row of `--page raw` (empty ID), got ID {f[ix['ID']]!r}",
                                    "export with `ncu --csv --page raw`, which writes the units on the second row")
                unit_row = f
                continue
            kinfo = self._kernel(ctx, line, f, ix)
            kernels += 1
            self._emit(ctx, out, kinfo, [(line, "", c, unit_row[i].strip(), f[i]) for i, c in metric_cols])
            if len(out) >= BATCH_ROWS:
                yield out.table()
        if not kernels:
            raise ctx.error(f"line {hdr.line}", "no kernel rows after the header (truncated?)", FIX)
        yield out.table()

    # --- one kernel -----------------------------------------------------------------------
    @staticmethod
    def _kernel(ctx: ReadContext, line: int, f: list[str], ix: dict[str, int]) -> dict[str, str]:
        def get(c: str) -> str:
            return f[ix[c]].strip() if c in ix else ""

        name = f[ix["Kernel Name"]]
        if not name.strip():
            raise ctx.error(f"line {line}", "empty 'Kernel Name'")
        return {"op": name, "device": get("Device"), "cc": get("CC"), "block_size": get("Block Size"),
                "grid_size": get("Grid Size")}

    def _emit(self, ctx: ReadContext, out: _Rows, kinfo: dict[str, str],
              entries: list[tuple[int, str, str, str, str]]) -> None:
        """Turn one kernel's (line, section, metric, unit, text) entries into records."""
        lines_of = {name: line for line, _, name, _, _ in entries}
        display = next((t.strip() for _, _, n, _, t in entries if n == DISPLAY_NAME), "")
        where = ", ".join(x for x in (f"device {kinfo['device']}" if kinfo["device"] else "",
                                      f"CC {kinfo['cc']}" if kinfo["cc"] else "") if x)
        hardware = (f"{display} ({where})" if where else display) if display else (where or None)
        cfg: dict[str, Any] = {k: v for k, v in kinfo.items() if k != "op" and v}
        config = canonical_json(cfg)
        parsed: dict[str, tuple[float, str]] = {}
        for line, section, name, unit, text in entries:
            if name == DISPLAY_NAME:
                continue  # provenance: it is in `hardware`
            raw = DETAILS.get(name) if section in SOL_SECTIONS else None
            if raw is not None and raw in lines_of:
                ctx.skip(f"line {line}", f"{name!r} repeats {raw} (line {lines_of[raw]})")
                continue
            key = raw or name
            metric = MAPPED.get(key) or tool_metric(name)
            vocab = key in MAPPED
            t = text.strip()
            value: float | None = None
            reason = None
            if t.lower() == "n/a":
                reason = "n/a in file"
            elif not t:
                reason = "empty in file"
            elif nvcsv.is_number(t):
                value = nvcsv.number(t)
            elif vocab or unit:
                raise ctx.error(f"line {line}", f"{name} value {text!r} is not a number",
                                "write numbers like 1,234.5, or n/a when not available")
            else:
                ctx.skip(f"line {line}", f"{name} is text ({shorten(t)!r}), not a number")
                continue
            if not vocab:
                try:
                    units.lookup(unit)
                except UnitError:
                    ctx.skip(f"line {line}", f"{name}: unit {unit!r} is not one xfid converts")
                    continue
            if value is not None and key in DRAM_PARTS:
                try:
                    parsed[key] = (units.convert(value, unit, "bytes"), str(line))
                except UnitError as e:
                    raise ctx.error(f"line {line}", f"{name}: {e}") from None
            row_cfg = canonical_json({**cfg, "memory": "dram"}) if metric == "bytes" else config
            out.add(kinfo["op"], metric, value, unit, f"line {line}", reason, hardware, row_cfg)
        if "dram__bytes.sum" not in lines_of and all(p in parsed for p in DRAM_PARTS):
            (rd, l1), (wr, l2) = parsed[DRAM_PARTS[0]], parsed[DRAM_PARTS[1]]
            out.add(kinfo["op"], "bytes", rd + wr, "B", f"line {l1}" if l1 == l2 else f"line {l1} + line {l2}", None, hardware,
                    canonical_json({**cfg, "memory": "dram", "derived": "dram__bytes_read.sum + dram__bytes_write.sum"}))


def _fit(ctx: ReadContext, line: int, f: list[str], n: int, last: int) -> list[str]:
    """A row as wide as the header, read by header position.

    Nsight Compute 2025.x ends a metric row right after `Metric Value` with a trailing comma (16
    fields under a 20-column header) while rule rows carry all 20. A row that ends exactly after
    a non-empty column `last`, or after column `last` and one empty trailing field, is padded;
    empty extras after a full row are dropped. Any other count is an error: a row missing a
    field in the middle would otherwise be read shifted.

    Raises:
        InputError: the row lacks a needed field or carries non-empty extra fields.
    """
    if len(f) == n:
        return f
    if len(f) > n:
        if all(not x.strip() for x in f[n:]):
            return f[:n]
        raise nvcsv.field_count_error(ctx, line, f, n)
    if (len(f) == last + 1 and f[last].strip()) or (len(f) == last + 2 and not f[-1].strip()):
        return f[: last + 1] + [""] * (n - last - 1)
    raise nvcsv.field_count_error(ctx, line, f, n)


def shorten(text: str, n: int = 40) -> str:
    return nvcsv.shorten(text, n)


class _Rows:
    """Column lists for one batch of records."""

    def __init__(self, fixed: dict[str, str], software: str):
        self.fixed = fixed
        self.software = software
        self.cols: dict[str, list[Any]] = {c: [] for c in OUT if c not in fixed and c not in ("stat", "software")}

    def __len__(self) -> int:
        return len(self.cols["op"])

    def add(self, op: str, metric: str, value: float | None, unit: str, loc: str, reason: str | None,
            hardware: str | None, config: str | None) -> None:
        c = self.cols
        c["op"].append(op)
        c["metric"].append(metric)
        c["value"].append(value)
        c["unit"].append(unit)
        c["source_loc"].append(loc)
        c["null_reason"].append(reason)
        c["hardware"].append(hardware)
        c["config"].append(config)

    def table(self) -> pa.Table:
        n = len(self)
        arrays: dict[str, Any] = {k: pa.array(v, pa.float64() if k == "value" else pa.string())
                                  for k, v in self.cols.items()}
        for k, v in self.fixed.items():
            arrays[k] = nvcsv.const(v, n)
        arrays["stat"] = nvcsv.const("value", n)
        arrays["software"] = pa.array([self.software] * n, pa.string())
        self.cols = {k: [] for k in self.cols}
        return pa.table(arrays)


__all__ = ["NcuAdapter"]
