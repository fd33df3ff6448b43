"""nsys: `nsys stats -f csv` kernel summaries (cuda_gpu_kern_sum, gpukernsum) and cuda_gpu_trace."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xfid.adapters import nvcsv
from xfid.adapters.base import Adapter, ReadContext, head_text
from xfid.schema import canonical_json

TIME_UNITS = {"ns", "us", "ms", "s"}
BYTE_UNITS = {"B", "KB", "MB", "GB", "KiB", "MiB", "GiB"}
# summary column (unit stripped) -> stat; older versions spell some of them out
SUM_STATS: dict[str, str] = {"Avg": "mean", "Average": "mean", "Med": "median", "Median": "median",
                             "Min": "min", "Minimum": "min", "Max": "max", "Maximum": "max",
                             "StdDev": "std"}
COUNT_COLS = ("Instances", "Num Calls", "Calls", "Count")
NAME_COLS = ("Name", "Operation", "Range")
TEXT_COLS = {"GridXYZ": "grid", "BlockXYZ": "block", "Style": "range_style"}
REPORTS = ("cuda_gpu_kern_sum", "gpukernsum", "cuda_api_sum", "cudaapisum", "osrt_sum", "osrtsum", "nvtx_sum",
           "nvtxsum", "nvtx_pushpop_sum", "cuda_gpu_mem_time_sum", "gpumemtimesum", "cuda_gpu_mem_size_sum",
           "gpumemsizesum", "cuda_kern_exec_sum", "cuda_gpu_trace", "gputrace")
EXPECTED_SUM = "Time (%),Total Time (ns),Instances|Num Calls|Count,Avg (ns),...,Name|Operation|Range"
EXPECTED_TRACE = "Start (ns),Duration (ns),CorrId,GrdX,...,Device,Ctx,GreenCtx,Strm,Name"
FIX = ("export with `nsys stats --report cuda_gpu_kern_sum` (or cuda_api_sum, nvtx_sum, cuda_gpu_mem_time_sum, "
       "cuda_gpu_trace ...), `-f csv -o PREFIX` (one report per file)")
_REPORT = re.compile(r"with \[(?:.*?/(?P<ver>\d{4}\.\d+(?:\.\d+)*)/)?(?:.*/)?(?P<report>\w+)\.py\]")


_BANNER = re.compile(r"^\*\* .*\((\w+)\):?$")


def _bases(fields: list[str]) -> list[str]:
    return [nvcsv.unit_in_header(f)[0] for f in fields]


def _is_sum(fields: list[str]) -> bool:
    b = _bases(fields)
    i = 1 if b[:1] == ["Time"] else 0  # cuda_gpu_mem_size_sum has no `Time (%)`
    return (len(b) >= 4 and b[i] in ("Total Time", "Total") and any(c in b for c in COUNT_COLS)
            and b[-1] in NAME_COLS)


def _is_trace(fields: list[str]) -> bool:
    b = _bases(fields)
    return len(b) >= 4 and b[0] == "Start" and "Duration" in b and "CorrId" in b and b[-1] == "Name"


def _is_header(fields: list[str]) -> bool:
    return _is_sum(fields) or _is_trace(fields)


def _summary_report(path: Path, bases: list[str], total_unit: str | None, meta: dict[str, str]) -> str:
    """The report a summary CSV is: from the preamble, the `PREFIX_<report>.csv` name, else the columns."""
    if meta.get("report"):
        return meta["report"]
    hit = next((r for r in REPORTS if path.stem.endswith(r)), None)
    if hit:
        return hit
    if bases[-1] == "Range":
        return "nvtx_sum"
    if bases[-1] == "Operation":
        return "cuda_gpu_mem_size_sum" if total_unit in BYTE_UNITS else "cuda_gpu_mem_time_sum"
    if "Num Calls" in bases or "Calls" in bases:
        return "cuda_api_sum"
    return "gpukernsum" if "GridXYZ" in bases else "cuda_gpu_kern_sum"


class NsysAdapter(Adapter):
    name = "nsys"
    fidelity = "measured"
    formats = ("Nsight Systems `nsys stats -f csv`: summaries (cuda_gpu_kern_sum / gpukernsum kernel times, "
               "cuda_api_sum / osrt_sum call times, nvtx_sum ranges, cuda_gpu_mem_time_sum / _size_sum) and "
               "cuda_gpu_trace (one row per launch, streamed)")
    extensions: ClassVar[tuple[str, ...]] = (".csv",)

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        for line in head_text(head).splitlines()[:40]:
            if line.startswith(("Time (%),Total ", "Time(%),Total ", "Total (", "Start (")):
                return _is_header(nvcsv.split_line(line))
        return False

    def read(self, ctx: ReadContext) -> Iterator[pa.Table]:
        target = ctx.require("target", "Nsight Systems CSVs do not name the hardware target")
        workload = ctx.require("workload", "Nsight Systems CSVs do not name the workload")
        hdr = nvcsv.find_header(ctx, _is_header, "nsys stats CSV", f"{EXPECTED_SUM!r} or {EXPECTED_TRACE!r}", FIX)
        nvcsv.check_tail(ctx)
        meta = _preamble_meta(hdr.preamble)
        fixed = {"target": target, "workload": workload}
        if _is_trace(hdr.fields):
            return _trace(ctx, hdr, fixed, meta)
        return self._summary(ctx, hdr, fixed, meta)

    def _summary(self, ctx: ReadContext, hdr: nvcsv.Header, fixed: dict[str, str],
                 meta: dict[str, str]) -> Iterator[pa.Table]:
        fields = [f.strip() for f in hdr.fields]
        parsed = [nvcsv.unit_in_header(f) for f in fields]
        bases = [b for b, _ in parsed]
        ix = {b: i for i, b in enumerate(bases)}
        total_col = "Total Time" if "Total Time" in ix else "Total"
        total_unit = parsed[ix[total_col]][1]
        if total_unit in TIME_UNITS:
            metric = "latency"
        elif total_unit in BYTE_UNITS and total_col == "Total":
            metric = "bytes"
        else:
            raise ctx.error(f"line {hdr.line}", f"{total_col!r} unit {total_unit!r} is not a time unit",
                            "expected ns, us, ms or s" + (" (or a byte unit for `Total`)" if total_col == "Total" else ""))
        count_col = next(c for c in COUNT_COLS if c in ix)
        name_col = bases[-1]
        i_name = len(bases) - 1
        stats = [(i, SUM_STATS[b], u or total_unit) for i, (b, u) in enumerate(parsed) if b in SUM_STATS]
        text_ix = {i: TEXT_COLS[b] for i, b in enumerate(bases) if b in TEXT_COLS}
        report = _summary_report(ctx.path, bases, total_unit, meta)
        software = _software(report, meta)  # tool and version go to `software`; config keeps conditions
        cols: dict[str, list[Any]] = {k: [] for k in ("op", "metric", "stat", "value", "unit", "n_samples",
                                                      "source_loc", "null_reason", "config")}

        def add(op, metric, stat, value, unit, n, loc, cfg) -> None:
            for k, v in zip(cols, (op, metric, stat, value, unit, n, loc, None if value is not None else "empty in file", cfg),
                            strict=True):
                cols[k].append(v)

        n_rows = 0
        for line, f in nvcsv.iter_rows(ctx, hdr):
            if len(f) != len(fields):
                raise nvcsv.field_count_error(ctx, line, f, len(fields))
            name = f[i_name]
            if not name.strip():
                raise ctx.error(f"line {line}", f"empty {name_col!r}", f"every row names its {name_col.lower()}")
            num = {i: _num(ctx, line, fields[i], f[i]) for i in range(len(f)) if i != i_name and i not in text_ix}
            inst = num[ix[count_col]]
            if inst is None or inst != int(inst) or inst < 0:
                raise ctx.error(f"line {line}", f"{count_col!r} must be a whole number, got {f[ix[count_col]]!r}")
            cfg = {key: ",".join(f[i].split()) for i, key in text_ix.items() if f[i].strip()}
            config = canonical_json(cfg)
            loc = f"line {line}"
            n = int(inst)
            if bases[0] == "Time":
                add(name, "nsys:time_fraction", "value", num[0], "%", None, loc, config)
            add(name, metric, "sum", num[ix[total_col]], total_unit, n, loc, config)
            for i, stat, unit in stats:
                add(name, metric, stat, num[i], unit, n, loc, config)
            n_rows += 1
        if not n_rows:
            raise ctx.error(f"line {hdr.line}", "no rows after the header (truncated?)", FIX)
        t = pa.table({**{k: pa.array(v, pa.float64() if k == "value" else pa.int64() if k == "n_samples" else pa.string())
                         for k, v in cols.items()}})
        n = t.num_rows
        for k, v in fixed.items():
            t = t.append_column(k, nvcsv.const(v, n))
        yield t.append_column("software", pa.array([software] * n, pa.string()))


# --- cuda_gpu_trace: streamed, vectorised ------------------------------------------------------
CONFIG_COLS = (("GrdX", "grid"), ("GrdY", "grid"), ("GrdZ", "grid"), ("BlkX", "block"), ("BlkY", "block"),
               ("BlkZ", "block"), ("SrcMemKd", "src_mem"), ("DstMemKd", "dst_mem"), ("GreenCtx", "green_ctx"))
_DICT = pa.dictionary(pa.int32(), pa.string())


def _trace(ctx: ReadContext, hdr: nvcsv.Header, fixed: dict[str, str], meta: dict[str, str]) -> Iterator[pa.Table]:
    names = [f.strip() for f in hdr.fields]
    by_base = {nvcsv.unit_in_header(n)[0]: n for n in names}
    unit_of = {b: nvcsv.unit_in_header(n)[1] for b, n in by_base.items()}
    if unit_of["Duration"] not in TIME_UNITS:
        raise ctx.error(f"line {hdr.line}", f"'Duration' unit {unit_of['Duration']!r} is not a time unit",
                        "expected ns, us, ms or s")
    types: dict[str, pa.DataType] = {by_base["Duration"]: pa.float64(), by_base["Name"]: _DICT}
    extra = [b for b in ("Bytes", "Throughput") if b in by_base]
    types.update({by_base[b]: pa.float64() for b in extra})
    cfg_cols = [(by_base[c], key) for c, key in CONFIG_COLS if c in by_base]
    types.update({c: _DICT for c, _ in cfg_cols})
    if "Device" in by_base:
        types[by_base["Device"]] = _DICT
    read = {by_base[b] for b in ("Duration", "Name", "Device", *extra) if b in by_base} | {c for c, _ in cfg_cols}
    ctx.skip_keys([n for n in names if n not in read], prefix="column ")  # Start, CorrId, Reg/Trd, Strm ...
    report = meta.get("report", "cuda_gpu_trace")
    base_cfg: dict[str, str] = {}  # tool and version go to `software`; config keeps launch conditions
    software = _software(report, meta)
    rows = 0
    for first, batch in nvcsv.stream_csv(ctx, hdr, types):
        t = pa.Table.from_batches([batch])
        n = t.num_rows
        locs = nvcsv.line_locs(first, n)
        dur = t.column(by_base["Duration"])
        name = t.column(by_base["Name"])
        blank = pc.and_(dur.is_null(), pc.equal(name.cast(pa.string()) if name.null_count else name, ""))
        if pc.any(blank).as_py():  # blank lines (kept only so that line numbers stay exact)
            keep = pc.invert(blank)
            t, locs = t.filter(keep), pc.filter(locs, keep)
            n = t.num_rows
            dur, name = t.column(by_base["Duration"]), t.column(by_base["Name"])
        if n == 0:
            continue
        empty_name = pc.equal(name, "")
        if pc.any(empty_name).as_py():
            i = pc.index(empty_name, True).as_py()
            raise ctx.error(locs[i].as_py(), "empty 'Name'", "every trace row names its kernel or memory operation")
        rows += n
        common = {
            **{k: nvcsv.const(v, n) for k, v in fixed.items()},
            "op": name,
            "stat": nvcsv.const("value", n),
            "source_loc": locs,
            "hardware": t.column(by_base["Device"]) if "Device" in by_base else pa.nulls(n, pa.string()),
            "config": _configs(t, cfg_cols, base_cfg),
            "software": nvcsv.const(software, n).cast(pa.string()),
        }
        yield _records(common, "latency", dur, unit_of["Duration"], n)
        for b, metric in (("Bytes", "bytes"), ("Throughput", "bandwidth")):
            if b not in by_base:
                continue
            v = t.column(by_base[b])
            has = v.is_valid()
            if pc.any(has).as_py():
                sub = {k: pc.filter(c, has) for k, c in common.items()}
                yield _records(sub, metric, pc.filter(v, has), unit_of[b], None)
    if not rows:
        raise ctx.error(f"line {hdr.line}", "no trace rows after the header (truncated?)", FIX)


def _records(common: dict[str, Any], metric: str, value: Any, unit: str | None, n: int | None) -> pa.Table:
    n = len(value) if n is None else n
    cols = dict(common)
    cols["metric"] = nvcsv.const(metric, n)
    cols["value"] = value
    cols["unit"] = nvcsv.const(unit, n)
    if value.null_count:
        cols["null_reason"] = pc.if_else(value.is_null(), pa.scalar("empty in file"), pa.scalar(None, pa.string()))
    return pa.table(cols)


def _configs(t: pa.Table, cfg_cols: list[tuple[str, str]], base: dict[str, str]) -> pa.DictionaryArray:
    """One canonical-JSON config per distinct launch shape, built only for the distinct ones."""
    n = t.num_rows
    if not cfg_cols:
        return nvcsv.const(canonical_json(base), n)
    cols = [t.column(c).combine_chunks() for c, _ in cfg_cols]
    acc = np.zeros(n, dtype=np.int64)
    card = 1
    for col in cols:
        k = len(col.dictionary) + 1
        if card * k >= 1 << 62:  # re-densify before the mixed-radix key could overflow
            enc = pc.dictionary_encode(pa.array(acc))
            acc, card = enc.indices.to_numpy().astype(np.int64), len(enc.dictionary)
        idx = col.indices.fill_null(k - 1).to_numpy(zero_copy_only=False).astype(np.int64)
        acc = acc * k + idx
        card *= k
    enc = pc.dictionary_encode(pa.array(acc))
    codes = enc.indices.to_numpy(zero_copy_only=False)
    firsts = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)
    texts = []
    for r in firsts:
        cfg: dict[str, Any] = dict(base)
        parts: dict[str, list[str]] = {}
        for (_, key), col in zip(cfg_cols, cols, strict=True):
            v = col[int(r)].as_py()
            parts.setdefault(key, []).append(v.strip() if v else "")
        for key, vals in parts.items():
            if any(vals):
                cfg[key] = ",".join(vals)
        texts.append(canonical_json(cfg))
    return pa.DictionaryArray.from_arrays(enc.indices, pa.array(texts, pa.string()))


def _num(ctx: ReadContext, line: int, column: str, text: str) -> float | None:
    t = text.strip()
    if not t:
        return None
    try:
        return nvcsv.number(t)
    except ValueError:
        raise ctx.error(f"line {line}", f"{column!r} value {text!r} is not a number") from None


def _software(report: str, meta: dict[str, str]) -> str:
    """`nsys 2024.5.1 stats cuda_gpu_trace` (the version when the preamble names it)."""
    return f"nsys {meta['version']} stats {report}" if "version" in meta else f"nsys stats {report}"


def _preamble_meta(preamble: list[str]) -> dict[str, str]:
    """Report name and nsys version from a `Processing [x.sqlite] with [.../2024.2.1/.../r.py]...` line,
    else the report name from the console banner ` ** CUDA API Summary (cuda_api_sum):`."""
    for p in preamble:
        m = _REPORT.search(p)
        if m:
            out = {"report": m.group("report")}
            if m.group("ver"):
                out["version"] = m.group("ver")
            return out
    for p in preamble:
        m = _BANNER.match(p.strip())
        if m:
            return {"report": m.group(1)}
    return {}


__all__ = ["NsysAdapter"]
