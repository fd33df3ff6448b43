"""cocotb: rtl_hooks probe JSON lines (cycles per op) and cocotb results.xml (pass/fail per test).

A results.xml is size-checked before it is parsed: at most MAX_XML_BYTES, and no run of more
than MAX_XML_TOKEN bytes without a `<` (an attribute, tag or text that long makes expat slow,
and no cocotb file has one). It is then parsed from one buffer (one expat feed: linear).
A results.xml that xfid's runner did not write (no probe file beside it) does not say which
target the design is: --target, the sidecar or `[rtl] default_target` in xfid.toml says.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from xfid import units
from xfid.adapters import jsonutil
from xfid.adapters.base import Adapter, ReadContext, head_text
from xfid.errors import ConfigError, InputError, UnitError
from xfid.schema import canonical_json

PROBE_FORMAT = "xfid-rtl/1"
DEFAULT_TARGET = "t100-a0"
_COLS = ("target", "workload", "op", "metric", "stat", "value", "unit", "source_loc", "null_reason", "flags",
         "config", "software", "run", "timestamp")
_SIM_UNITS = {u: Fraction(1, 10**k) for u, k in (("fs", 15), ("ps", 12), ("ns", 9), ("us", 6), ("ms", 3), ("s", 0))}
PROBE_NAME = "xfid_rtl.jsonl"
"""The probe file xfid's runner writes beside results.xml."""
MAX_XML_BYTES = 64 << 20
"""Largest results.xml read (cocotb's own are kilobytes; a 10k-test regression a few MB)."""
MAX_XML_TOKEN = 1 << 20
"""Longest run of bytes without a `<`: bounds every tag, attribute value and text node."""
MAX_MESSAGE = 2000
"""Characters of a failure message kept in `config` (the rest is in the file)."""


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
    sim_time_note: str | None = None  # why sim_time_s is None


def read_results(path: str | Path) -> list[TestCase]:
    """The test cases of a cocotb results.xml (JUnit), parsed with defusedxml.

    Raises:
        InputError: not XML, an entity/DTD trick, or no `<testsuite>`.
    """
    import defusedxml.ElementTree as DET
    from defusedxml import DefusedXmlException

    path = Path(path)
    data = _bounded_xml(path)
    try:
        root = DET.fromstring(data)
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
        # cocotb 1.x writes the seed once per suite; 2.x per test case
        suite_props = {p.get("name"): p.get("value") for p in [*suite.findall("property"),
                                                                 *suite.findall("properties/property")]}
        for tc in suite.findall("testcase"):
            props = {**suite_props, **{p.get("name"): p.get("value") for p in tc.findall("properties/property")}}
            status = "passed"
            msg = None
            for kind, st in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                el = tc.find(kind)
                if el is not None:
                    status, msg = st, el.get("message")
                    break
            sim, note = _sim_time(tc.attrib, props)
            cases.append(TestCase(
                name=tc.get("name", ""), classname=tc.get("classname", ""), status=status,
                wall_s=_float(tc.get("time")), sim_time_s=sim, seed=props.get("random_seed"),
                message=msg if msg is None or len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE] + "...",
                line=_int(props.get("line") or tc.get("lineno")), sim_time_note=note,
            ))
    return cases


def _bounded_xml(path: Path) -> bytes:
    """The bytes of a results.xml, refused when too large or holding an oversized token."""
    import numpy as np

    try:
        size = path.stat().st_size
        if size > MAX_XML_BYTES:
            raise InputError(path, None, f"{size:,} bytes is more than a results.xml holds "
                             f"(at most {MAX_XML_BYTES >> 20} MiB read)", "pass the results.xml cocotb wrote")
        data = path.read_bytes()
    except OSError as e:
        raise InputError(path, None, f"cannot read: {e.strerror}") from None
    edges = np.concatenate(([0], np.flatnonzero(np.frombuffer(data, np.uint8) == ord("<")), [len(data)]))
    gaps = np.diff(edges)
    i = int(np.argmax(gaps)) if len(gaps) else 0
    if len(gaps) and gaps[i] > MAX_XML_TOKEN:
        line = data.count(b"\n", 0, int(edges[i])) + 1
        raise InputError(path, f"line {line}", f"{int(gaps[i]):,} bytes without markup: a tag, attribute or text "
                         f"longer than {MAX_XML_TOKEN >> 20} MiB", "cocotb writes none that long; is the file cocotb's?")
    return data


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


def _sim_time(attrs: dict[str, str], props: dict[str, str | None]) -> tuple[float | None, str | None]:
    """(simulated seconds, None), or (None, why not): the file's decimal text converted exactly."""
    if props.get("sim_time_duration") is not None:  # cocotb >= 2.1: properties
        text, unit = props["sim_time_duration"] or "", props.get("sim_time_unit") or "ns"
    elif attrs.get("sim_time_ns") is not None:  # cocotb 1.x / 2.0: attributes
        text, unit = attrs["sim_time_ns"], "ns"
    else:
        return None, "no sim time in results.xml"
    if unit not in _SIM_UNITS:
        return None, f"sim time in unit {unit!r}, not a unit of time"
    try:
        value = units.decimal_of(text)
    except UnitError:
        return None, f"sim time {text[:40]!r} is not a number"
    if value < 0:
        return None, f"negative sim time {text[:40]!r}"
    return float(value * _SIM_UNITS[unit]), None


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
        """A probe record's target: --target/sidecar, the record's, `--option target=`, `[rtl]
        default_target`, else the T100 the runner's example blocks model."""
        return ctx.target or (rec_target if isinstance(rec_target, str) and rec_target else None) \
            or ctx.options.get("target") or configured_target() or DEFAULT_TARGET

    def _xml_target(self, ctx: ReadContext) -> str:
        """A results.xml's target: --target/sidecar; for one xfid's runner wrote, the probe's;
        else `[rtl] default_target`; else an error (the file does not say)."""
        if ctx.target:
            return ctx.target
        if ctx.options.get("target"):
            return str(ctx.options["target"])
        probe = ctx.beside(PROBE_NAME)
        head = _probe_head(probe) if probe is not None else None
        if head is not None:
            return self._target(ctx, head.get("target"))
        opt = ctx.options.get("results")
        if opt is not None and ctx.inside(opt, "option results").resolve() == ctx.path.resolve():
            return self._target(ctx)  # xfid rtl run --out elsewhere
        configured = configured_target()
        if configured:
            return configured
        raise ctx.error(None, "no target: a cocotb results.xml does not say which hardware target the design is for",
                        'pass --target, set target = "..." in xfid-source.toml beside the file, '
                        'or set default_target = "..." under [rtl] in xfid.toml')

    @classmethod
    def inputs(cls, ctx: ReadContext) -> list[Path]:
        """Files besides `ctx.path` whose records this reads (ingest hashes them into the source's
        identity): a probe file's results.xml."""
        path = cls._results_path(ctx)
        return [path] if path is not None and path.is_file() else []

    @staticmethod
    def _results_path(ctx: ReadContext) -> Path | None:
        """The results.xml a probe file's pass/fail comes from (None for a results.xml itself)."""
        with open(ctx.path, "rb") as f:
            if head_text(f.read(256)).lstrip().startswith("<"):
                return None
        opt = ctx.options.get("results")
        if opt is not None:  # a path inside the tree being ingested, or refused
            return ctx.inside(opt, "option results")
        return ctx.beside("results.xml")

    def _results_beside(self, ctx: ReadContext) -> dict[str, TestCase] | None:
        path = self._results_path(ctx)
        if path is None or not path.is_file():
            if "results" in ctx.options:
                raise ctx.error(None, f"the results file {path} given by --option results= does not exist")
            if path is None and (ctx.path.parent / "results.xml").is_symlink():
                ctx.warn(f"{ctx.path.parent / 'results.xml'} is a symbolic link out of the folder being "
                         "ingested: not read")
            return None
        return {c.name: c for c in read_results(path)}

    def _jsonl(self, ctx: ReadContext, cols: dict[str, list[Any]]) -> None:
        results = self._results_beside(ctx)
        if results is None:
            ctx.warn("no results.xml beside the probe file: pass/fail comes from the probe alone "
                     "(a check after the probed op cannot be seen)")
        energy: dict[str, dict[str, dict[str, float]]] = {}  # target -> block -> pj_per_EVENT
        for line, obj in jsonutil.objects(ctx):
            if obj.get("format") != PROBE_FORMAT:
                raise ctx.error(line, f"not an rtl_hooks probe record (format {obj.get('format')!r})",
                                f"expected \"format\": \"{PROBE_FORMAT}\", written by rtl_hooks.probe")
            self._record(ctx, line or "line 1", obj, results, cols, energy)

    def _record(self, ctx: ReadContext, line: str, obj: dict[str, Any], results: dict[str, TestCase] | None,
                cols: dict[str, list[Any]], energy: dict[str, dict[str, dict[str, float]]] | None = None) -> None:
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
            add("sim_time", units.convert(v, "ps", "sim_time") if isinstance(v, (int, float)) and not isinstance(
                v, bool) else v, "s", "sim_time_ps")
        for name, v in counters.items():
            metric = name if units.METRICS.get(name) in ("bytes", "cycles") else f"rtl:{_slug(name)}"
            unit = units.CANONICAL[units.METRICS[name]] if metric == name else "count"
            add(metric, v, unit, f"counters.{name}")
        if energy is not None:  # RTL energy estimate: event counts x [targets.T.blocks.B.energy] pj_per_EVENT
            if base["target"] not in energy:
                energy[base["target"]] = block_energy_tables(base["target"])
            table = energy[base["target"]].get(obj["block"])
            if table:
                from xfid.models.energy import block_events_energy

                joules, prov = block_events_energy(table, {**counters, "cycles": cyc})
                base["config"] = canonical_json({**json.loads(cfg), "energy": prov})
                add("energy", joules, "J", "counters", None if joules is not None else
                    f"no count of {', '.join(prov['missing'])} in the record, which "
                    f"targets.{base['target']}.blocks.{obj['block']}.energy prices")

    def _xml(self, ctx: ReadContext, cols: dict[str, list[Any]]) -> None:
        cases = read_results(ctx.path)
        target = self._xml_target(ctx) if any(c.status != "skipped" for c in cases) else ""
        for i, case in enumerate(cases, 1):
            block = case.classname.rsplit(".", 1)[-1]
            block = block[5:] if block.startswith("test_") else block
            flags = "failed_test" if case.status in ("failed", "error") else None
            if case.status == "skipped":
                ctx.skip(f"testcase {i}", f"test {case.name} was skipped")
                continue
            vals = {"target": target, "workload": ctx.workload or f"block/{block}",
                    "op": f"test[{case.name}]", "metric": "sim_time", "stat": "value", "value": case.sim_time_s,
                    "unit": "s", "source_loc": f"testcase {i} ({case.name})",
                    "null_reason": None if case.sim_time_s is not None else case.sim_time_note,
                    "flags": flags, "config": canonical_json({"test": case.name, "module": case.classname,
                                                              "status": case.status, "seed": case.seed,
                                                              "message": case.message}),
                    "software": "cocotb", "run": ctx.run, "timestamp": None}
            for k, v in vals.items():
                cols[k].append(v)


def _probe_head(path: Path) -> dict[str, Any] | None:
    """The first record of a probe file beside a results.xml, when it is one (xfid's runner)."""
    try:
        with path.open("rb") as f:
            obj = json.loads(f.readline(1 << 16))
    except (OSError, ValueError, RecursionError):  # absent, or not a probe file
        return None
    return obj if isinstance(obj, dict) and obj.get("format") == PROBE_FORMAT else None


def _config_in_use() -> Any:
    """The xfid.toml in use: the running command's (--config), else XFID_CONFIG or ./xfid.toml."""
    import click

    from xfid.config import load_config

    # the command line keeps its App (xfid.app) as the root context's obj; read it by name, not
    # by class, so this adapter does not import the command layer (which imports the API)
    cctx = click.get_current_context(silent=True)
    app = cctx.find_root().obj if cctx is not None else None
    config = getattr(app, "config", None) if app is not None and type(app).__name__ == "App" else None
    return config if config is not None else load_config()


def block_energy_tables(target: str) -> dict[str, dict[str, float]]:
    """`[targets.TARGET.blocks.BLOCK.energy]` tables of the xfid.toml in use, by block."""
    t = _config_in_use().targets.get(target)
    blocks = t.extra.get("blocks", {}) if t is not None else {}
    return {b: spec["energy"] for b, spec in blocks.items()
            if isinstance(spec, dict) and isinstance(spec.get("energy"), dict)}


def configured_target() -> str | None:
    """`[rtl] default_target` of the xfid.toml in use: the running command's (--config), else
    XFID_CONFIG or ./xfid.toml."""
    cfg = _config_in_use()
    value = cfg.section("rtl").get("default_target")
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"{cfg.path or 'xfid.toml'}: [rtl] default_target must be a target name like \"t100-a0\", "
                          f"got {value!r}")
    return value or None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name.lower()) or "counter"


__all__ = ["CocotbAdapter", "TestCase", "read_results"]
