"""cocotb: rtl_hooks probe JSON lines (cycles per op) and cocotb results.xml (pass/fail per test)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from xfid import units
from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, ReadContext, head_text
from xfid.errors import InputError
from xfid.schema import canonical_json

PROBE_FORMAT = "xfid-rtl/1"
DEFAULT_TARGET = "t100-a0"
_COLS = ("target", "workload", "op", "metric", "stat", "value", "unit", "source_loc", "null_reason", "flags",
         "config", "software", "run", "timestamp")
_SIM_UNITS = {"fs": 1e-15, "ps": 1e-12, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass
class TestCase:
    """One `<testcase>` of a cocotb results.xml."""

    name: str
    classname: str
    status: str  # passed / failed / error / skipped
    wall_s: float | None
    sim_time_s: float | None
    seed: str | None
    message: str | None
    line: int | None


def read_results(path: str | Path) -> list[TestCase]:
    """The test cases of a cocotb results.xml (JUnit), parsed with defusedxml.

    Raises:
        InputError: not XML, an entity/DTD trick, or no `<testsuite>`.
    """
    import defusedxml.ElementTree as DET
    from defusedxml import DefusedXmlException

    path = Path(path)
    try:
        root = DET.parse(path).getroot()
    except DefusedXmlException as e:
        raise InputError(path, None, f"refused unsafe XML ({type(e).__name__})",
                         "results.xml must not declare entities or DTDs") from None
    except DET.ParseError as e:
        line = getattr(e, "position", (None,))[0]
        raise InputError(path, f"line {line}" if line else None, f"not well-formed XML: {e}") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if root.tag not in ("testsuite", "testsuites"):
        raise InputError(path, None, f"not a JUnit results file (root element <{root.tag}>)",
                         "pass the results.xml written by cocotb")
    cases = []
    for suite in suites:
        for tc in suite.findall("testcase"):
            props = {p.get("name"): p.get("value") for p in tc.findall("properties/property")}
            status = "passed"
            msg = None
            for kind, st in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                el = tc.find(kind)
                if el is not None:
                    status, msg = st, el.get("message")
                    break
            cases.append(TestCase(
                name=tc.get("name", ""), classname=tc.get("classname", ""), status=status,
                wall_s=_float(tc.get("time")), sim_time_s=_sim_time(tc.attrib, props),
                seed=props.get("random_seed"), message=msg, line=_int(props.get("line")),
            ))
    return cases


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _sim_time(attrs: dict[str, str], props: dict[str, str | None]) -> float | None:
    if props.get("sim_time_duration") is not None:  # cocotb >= 2.1: properties
        v = _float(props["sim_time_duration"])
        return None if v is None else v * _SIM_UNITS.get(props.get("sim_time_unit") or "ns", 1e-9)
    v = _float(attrs.get("sim_time_ns"))  # cocotb 1.x / 2.0: attributes
    return None if v is None else v * 1e-9


class CocotbAdapter(Adapter):
    name = "cocotb"
    fidelity = "rtl"
    formats = "rtl_hooks probe JSON lines (cycles, bytes, stall cycles per op) and cocotb results.xml (JUnit)"
    extensions: ClassVar[tuple[str, ...]] = (".jsonl", ".xml")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        t = head_text(head).lstrip()
        if t.startswith("{"):
            return f'"format": "{PROBE_FORMAT}"' in t.split("\n", 1)[0]
        return t.startswith("<") and "<testsuite" in t and ('name="cocotb"' in t or "sim_time_ns" in t)

    def read(self, ctx: ReadContext) -> pa.Table:
        cols: dict[str, list[Any]] = {k: [] for k in _COLS}
        with open(ctx.path, "rb") as f:
            is_xml = head_text(f.read(256)).lstrip().startswith("<")
        if is_xml:
            self._xml(ctx, cols)
        else:
            self._jsonl(ctx, cols)
        return pa.table({k: pa.array(v, pa.float64() if k == "value" else pa.string()) for k, v in cols.items()})

    def _target(self, ctx: ReadContext, rec_target: Any = None) -> str:
        return ctx.target or (rec_target if isinstance(rec_target, str) and rec_target else None) \
            or str(ctx.options.get("target", DEFAULT_TARGET))

    def _results_beside(self, ctx: ReadContext) -> dict[str, TestCase] | None:
        opt = ctx.options.get("results")
        path = Path(opt) if opt else ctx.path.parent / "results.xml"
        if opt and not path.is_absolute():
            path = ctx.path.parent / path
        if not path.is_file():
            if opt:
                raise ctx.error(None, f"the results file {path} given by --option results= does not exist")
            return None
        return {c.name: c for c in read_results(path)}

    def _jsonl(self, ctx: ReadContext, cols: dict[str, list[Any]]) -> None:
        results = self._results_beside(ctx)
        if results is None:
            ctx.warn("no results.xml beside the probe file: pass/fail comes from the probe alone "
                     "(a check after the probed op cannot be seen)")
        for line, obj in jsonutil.objects(ctx):
            if obj.get("format") != PROBE_FORMAT:
                raise ctx.error(line, f"not an rtl_hooks probe record (format {obj.get('format')!r})",
                                f"expected \"format\": \"{PROBE_FORMAT}\", written by rtl_hooks.probe")
            self._record(ctx, line or "line 1", obj, results, cols)

    def _record(self, ctx: ReadContext, line: str, obj: dict[str, Any], results: dict[str, TestCase] | None,
                cols: dict[str, list[Any]]) -> None:
        for key in ("block", "op"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise ctx.error(line, f"missing or empty {key!r}", "every probe record names its block and op")
        params = obj.get("params") or {}
        if not isinstance(params, dict):
            raise ctx.error(f"{line}: $.params", f"params must be an object, got {params!r}")
        counters = obj.get("counters") or {}
        if not isinstance(counters, dict):
            raise ctx.error(f"{line}: $.counters", f"counters must be an object, got {counters!r}")
        flags = []
        test = obj.get("test")
        if obj.get("passed") is False:
            flags.append("failed_test")
        if results is not None:
            case = results.get(test) if isinstance(test, str) else None
            if case is None:
                flags.append("no_test_result")
            elif case.status in ("failed", "error") and "failed_test" not in flags:
                flags.append("failed_test")
        cfg = canonical_json({
            "block": obj["block"], "params": params, "simulator": obj.get("simulator"),
            "simulator_version": obj.get("simulator_version"), "cocotb_version": obj.get("cocotb_version"),
            "seed": obj.get("seed"), "sources": obj.get("sources") or {}, "test": test,
            "cycles_from": obj.get("cycles_from"), "toplevel": obj.get("toplevel"),
        })
        base = {
            "target": self._target(ctx, obj.get("target")),
            "workload": ctx.workload or obj.get("workload") or f"block/{obj['block']}",
            "op": obj["op"], "flags": ",".join(flags) or None, "config": cfg,
            "software": f"cocotb {obj.get('cocotb_version')} + {obj.get('simulator')} {obj.get('simulator_version')}",
            "run": ctx.run, "timestamp": obj.get("time"),
        }

        def add(metric: str, value: Any, unit: str, key: str, reason: str | None = None) -> None:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ctx.error(f"{line}: $.{key}", f"{key!r} must be a number, got {value!r}")
            for k, v in base.items():
                cols[k].append(v)
            cols["metric"].append(metric)
            cols["stat"].append("value")
            cols["value"].append(None if value is None else float(value))
            cols["unit"].append(unit)
            cols["source_loc"].append(line)
            cols["null_reason"].append(reason if value is None else None)

        cyc = obj.get("cycles")
        add("cycles", cyc, "cycles", "cycles", None if cyc is not None else
            f"no cycle count recorded ({obj.get('cycles_from') or 'probe had no counter or clock period'})")
        if obj.get("sim_time_ps") is not None:
            v = obj["sim_time_ps"]
            add("sim_time", v * 1e-12 if isinstance(v, (int, float)) and not isinstance(v, bool) else v,
                "s", "sim_time_ps")
        for name, v in counters.items():
            metric = name if units.METRICS.get(name) in ("bytes", "cycles") else f"rtl:{_slug(name)}"
            unit = units.CANONICAL[units.METRICS[name]] if metric == name else "count"
            add(metric, v, unit, f"counters.{name}")

    def _xml(self, ctx: ReadContext, cols: dict[str, list[Any]]) -> None:
        for i, case in enumerate(read_results(ctx.path), 1):
            block = case.classname.rsplit(".", 1)[-1]
            block = block[5:] if block.startswith("test_") else block
            flags = "failed_test" if case.status in ("failed", "error") else None
            if case.status == "skipped":
                ctx.skip(f"testcase {i}", f"test {case.name} was skipped")
                continue
            vals = {"target": self._target(ctx), "workload": ctx.workload or f"block/{block}",
                    "op": f"test[{case.name}]", "metric": "sim_time", "stat": "value", "value": case.sim_time_s,
                    "unit": "s", "source_loc": f"testcase {i} ({case.name})",
                    "null_reason": None if case.sim_time_s is not None else "no sim time in results.xml",
                    "flags": flags, "config": canonical_json({"test": case.name, "module": case.classname,
                                                              "status": case.status, "seed": case.seed,
                                                              "message": case.message}),
                    "software": "cocotb", "run": ctx.run, "timestamp": None}
            for k, v in vals.items():
                cols[k].append(v)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name.lower()) or "counter"


__all__ = ["CocotbAdapter", "TestCase", "read_results"]
