"""In-process fuzzing of what users write by hand: sidecars, xfid.toml, compare baselines.

Run through `benchmarks/fuzz.py --kind sidecar|config|baseline`. Each input is a seed parsed
into a tree, mutated structurally (values replaced by wrong types and extremes, keys
deleted, renamed, added), written back as TOML or JSON and, one time in four, byte-mutated as
well; then read by the library functions a command uses, under a CPU alarm. Outcomes: ok,
XfidError (clean), BUG (any other exception), TIMEOUT, MEMORY. A sample of the inputs also
goes through the CLI (click's runner, in-process): any exit other than 0, 1 (compare's drift)
or 2 with `Error:` is a BUG.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import math
import random
import resource
import signal
import sys
import tempfile
import time
import tomllib
import traceback
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 10
LIMIT_MB = 4096

NASTY: list[Any] = [
    -1, 0, -0.0, 1, 10**30, -(2**63) - 1, 2**64, 1e308, -1e308, 5e-324, math.nan, math.inf, -math.inf,
    True, False, "", " ", "x" * 100_000, "nan", "-1", "0.1", "1e999", "yes", "no", "\x1b[2J\u202e", "h100-sxm5",
    "roofline->measured", "*", "(", "[", "../../etc/passwd", "ｈ１００", "\u0661\u0662", [], [1, "a", None],
    [[[]]], {}, {"a": {"b": [1, {"c": math.nan}]}}, date(9999, 12, 31), date(1, 1, 1),
    datetime(2026, 12, 1, 8, 30, tzinfo=UTC), None,
]
EXTRA_KEYS = ["bogus", "skip", "meta", "options", "files", "target", "adapter", "fidelity", "workload", "run",
              "rel", "abs", "pair", "metric", "op", "stat", "peak_flops", "mem_bw", "bounds", "convert",
              "keys", "comparisons", "xfid_snapshot", "kind", "rel_error", "candidate_value", "label"]


# --- tree mutation ------------------------------------------------------------------------

def _slots(tree: Any, out: list[tuple[Any, Any]] | None = None, depth: int = 0) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in the tree (bounded depth)."""
    out = [] if out is None else out
    if depth > 12:
        return out
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for k, v in list(items):
        out.append((tree, k))
        if isinstance(v, (dict, list)):
            _slots(v, out, depth + 1)
    return out


def _typo(key: str, rng: random.Random) -> str:
    if not key:
        return "x"
    i = rng.randrange(len(key))
    return rng.choice([key[:i] + key[i + 1:], key[:i] + key[i] + key[i:], key.upper(), key + "s", key.replace("_", "-")])


def mutate_tree(tree: Any, rng: random.Random, keys: list[str]) -> Any:
    tree = copy.deepcopy(tree)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):  # mostly one change: deeper paths stay reachable
        slots = _slots(tree)
        if not slots:
            return rng.choice(NASTY) if rng.random() < 0.5 else {rng.choice(keys): rng.choice(NASTY)}
        parent, k = rng.choice(slots)
        op = rng.randrange(8)
        if op <= 2:  # a wrong type or an extreme
            parent[k] = copy.deepcopy(rng.choice(NASTY))
        elif op == 3 and isinstance(parent, dict):
            del parent[k]
        elif op == 4 and isinstance(parent, dict):
            parent[_typo(str(k), rng)] = parent.pop(k)
        elif op == 5 and isinstance(parent, dict):
            parent[rng.choice(keys)] = copy.deepcopy(rng.choice(NASTY))
        elif op == 6:  # a value in a list, or a list/table around it
            parent[k] = [parent[k]] if rng.random() < 0.5 else {rng.choice(keys): parent[k]}
        elif isinstance(parent[k], (int, float)) and not isinstance(parent[k], bool):
            parent[k] = rng.choice([-parent[k], parent[k] * 1e300, math.nan, 0, str(parent[k])])
        elif isinstance(parent[k], str):
            times = max(2, min(1000, 200_000 // max(len(parent[k]), 1)))  # inputs stay under a few MB
            parent[k] = rng.choice(["", parent[k] * rng.randint(2, times), parent[k] + "\x00", "=" + parent[k]])
    return tree


# --- writers ------------------------------------------------------------------------------

def _toml_value(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(x for x in map(_toml_value, v) if x is not None) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {x}" for k, x in ((k, _toml_value(y)) for k, y in v.items())
                                if x is not None) + " }"
    return json.dumps(str(v))


def toml_text(tree: Any) -> str:
    """TOML for a tree: top-level tables as [sections], everything deeper inline."""
    if not isinstance(tree, dict):
        return f"value = {_toml_value(tree)}\n"
    lines = [f"{json.dumps(str(k))} = {x}" for k, v in tree.items() if not isinstance(v, dict)
             if (x := _toml_value(v)) is not None]
    for k, v in tree.items():
        if isinstance(v, dict):
            lines.append(f"[{json.dumps(str(k))}]")
            lines += [f"{json.dumps(str(kk))} = {x}" for kk, vv in v.items() if (x := _toml_value(vv)) is not None]
    return "\n".join(lines) + "\n"


def json_text(tree: Any) -> str:
    return json.dumps(tree, default=str, allow_nan=True)


# --- the kinds ----------------------------------------------------------------------------

class Kind:
    """Seeds, a writer, and the library calls that read one input as a command would."""

    name = ""
    suffix = ""

    def __init__(self, work: Path):
        self.work = work
        self.seeds = self.load_seeds()
        self.keys = sorted({str(k) for t in self.seeds for p, k in _slots(t) if isinstance(p, dict)} | set(EXTRA_KEYS))

    def load_seeds(self) -> list[Any]:
        raise NotImplementedError

    def text(self, tree: Any) -> str:
        return toml_text(tree)

    def path(self) -> Path:
        return self.work / f"input{self.suffix}"

    def read(self, path: Path) -> None:
        raise NotImplementedError

    def cli_args(self, path: Path) -> list[str]:
        raise NotImplementedError


class ConfigKind(Kind):
    name, suffix = "config", ".toml"

    def load_seeds(self) -> list[Any]:
        files = [ROOT / "xfid" / "data" / "xfid.toml", ROOT / "fixtures" / "demo" / "xfid.toml"]
        seeds = [tomllib.loads(f.read_text(encoding="utf-8")) for f in files if f.is_file()]
        seeds.append({"settings": {"default_rel_tolerance": 0.1, "bound_tolerance": 0.02, "roofline_tolerance": "bound",
                                   "roofline_min_efficiency": 0.3, "bootstrap_resamples": 100},
                      "drift": {"error_abs": 0.05, "mape_abs": 0.05}, "tracker": {"resolve_after": 2},
                      "tolerance": [{"pair": "archmodel->rtl", "metric": "cycles", "rel": 0.02, "abs": 1}],
                      "compare": [{"candidate": "roofline", "reference": "measured", "bounds": "tolerance"}]})
        return seeds

    def read(self, path: Path) -> None:
        from xfid.config import load_config
        from xfid.drift.drift import Thresholds
        from xfid.engine.pairs import resolve_pairs
        from xfid.engine.pipeline import engine_settings
        from xfid.errors import XfidError
        from xfid.models.blocks import BLOCKS, block_bounds
        from xfid.models.roofline import gemm_bounds

        cfg = load_config(path)
        engine_settings(cfg)
        Thresholds.from_config(cfg.section("drift"))
        pairs = resolve_pairs(cfg, None, ["roofline", "archmodel", "rtl", "measured", "roofline-cal"])
        for p in pairs:
            cfg.tolerance_for(p.candidate, p.reference, "latency", "attn", "p50")
        for t in cfg.targets.values():
            for prec in t.peak_flops:
                with contextlib.suppress(XfidError):  # an unknown precision is the roofline's clean error
                    gemm_bounds([(64, 64, 64)], t, prec)
            for b, model in BLOCKS.items():  # the RTL block bounds read [targets.X.blocks.B]
                with contextlib.suppress(XfidError):
                    block_bounds(b, t, {}, [",".join("8" * len(model.shape))])

    def cli_args(self, path: Path) -> list[str]:
        store = self.work / "cli-store"
        if not store.exists():  # correlate needs records: the fixtures' four fidelities
            from xfid.ingest import IngestOptions, ingest
            from xfid.store import Store

            with Store(store) as s:
                ingest(s, [ROOT / "fixtures" / "records"], IngestOptions())
        return ["--config", str(path), "correlate"]


class SidecarKind(Kind):
    name, suffix = "sidecar", ".toml"

    def __init__(self, work: Path):
        super().__init__(work)
        self.dir = work / "sidecar"
        self.dir.mkdir(exist_ok=True)
        self.data = self.dir / "records.csv"
        self.data.write_text("fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
                             "measured,,w1,attn,latency,value,1.5,us,,2026-11-01T00:00:00Z\n", encoding="utf-8")
        self.n = 0
        self.store: Any = None

    def load_seeds(self) -> list[Any]:
        seeds = [tomllib.loads(f.read_text(encoding="utf-8"))
                 for f in sorted((ROOT / "fixtures").rglob("xfid-source.toml"))]
        seeds.append({"adapter": "xfid-records", "target": "h100-sxm", "run": "r1", "meta": {"batch": 8},
                      "options": {"x": "1"}, "skip": False,
                      "files": {"records.csv": {"workload": "w2", "meta": {"seq": 2}}}})
        return seeds

    def path(self) -> Path:
        return self.dir / "xfid-source.toml"

    def read(self, path: Path) -> None:
        from xfid.ingest import IngestOptions, ingest
        from xfid.store import Store

        if self.store is None or self.n % 200 == 0:  # a fresh store now and then: commits stay small
            if self.store is not None:
                self.store.close()
            self.store = Store(Path(tempfile.mkdtemp(dir=self.work)) / "s")
        self.n += 1
        ingest(self.store, [self.dir], IngestOptions())

    def cli_args(self, path: Path) -> list[str]:
        return ["ingest", str(self.dir)]


class BaselineKind(Kind):
    name, suffix = "baseline", ".json"

    def load_seeds(self) -> list[Any]:
        big = json.loads((ROOT / "fixtures" / "demo" / "baseline.json").read_text(encoding="utf-8"))
        small = copy.deepcopy(big)
        small["keys"] = dict(list(big["keys"].items())[:8])
        small["comparisons"] = big.get("comparisons", [])[:4]
        self.current = small
        return [small, small, big]

    def text(self, tree: Any) -> str:
        return json_text(tree)

    def read(self, path: Path) -> None:
        from xfid.api import compare
        from xfid.config import load_config
        from xfid.drift.drift_format import FORMATTERS

        rep = compare(path, self.current, config=load_config(None))
        for f in FORMATTERS.values():
            f(rep)

    def cli_args(self, path: Path) -> list[str]:
        cur = self.work / "current.json"
        if not cur.exists():
            cur.write_text(json_text(self.current), encoding="utf-8")
        return ["compare", "--baseline", str(path), "--current", str(cur)]


KINDS: dict[str, type[Kind]] = {"config": ConfigKind, "sidecar": SidecarKind, "baseline": BaselineKind}


# --- running ------------------------------------------------------------------------------

def _alarm(*_: Any) -> None:
    raise TimeoutError


def one(kind: Kind, data: bytes) -> tuple[str, str]:
    from xfid.errors import XfidError

    p = kind.path()
    p.write_bytes(data)
    signal.alarm(LIMIT_S)
    try:
        kind.read(p)
        return "ok", ""
    except XfidError as e:
        return "xfid_error", str(e)[:200]
    except TimeoutError:
        return "TIMEOUT", "past the alarm"
    except MemoryError:
        return "MEMORY", ""
    except Exception as e:  # the point: anything else is a traceback a user would see
        return "BUG", f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc()[-1500:]
    finally:
        signal.alarm(0)


def through_cli(kind: Kind, data: bytes) -> tuple[str, str]:
    from click.testing import CliRunner

    from xfid.cli import cli

    p = kind.path()
    p.write_bytes(data)
    store = kind.work / "cli-store"
    r = CliRunner().invoke(cli, ["--store", str(store), *kind.cli_args(p)], catch_exceptions=True)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return "BUG", f"{type(r.exception).__name__}: {r.exception}"[:300]
    if r.exit_code == 2 and "Error:" not in r.output:
        return "BUG", f"exit 2 without Error: {r.output[-200:]}"
    if r.exit_code not in (0, 1, 2):
        return "BUG", f"exit {r.exit_code}: {r.output[-200:]}"
    return ("xfid_error" if r.exit_code == 2 else "ok"), ""


def make_input(kind: Kind, rng: random.Random, mutate_bytes: Callable[[bytes, random.Random], bytes]) -> bytes:
    data = kind.text(mutate_tree(rng.choice(kind.seeds), rng, kind.keys)).encode("utf-8", "surrogatepass")
    return mutate_bytes(data, rng) if rng.random() < 0.25 else data


def run_kind(name: str, inputs: int, cli_sample: int, rng: random.Random, work: Path,
             mutate_bytes: Callable[[bytes, random.Random], bytes]) -> collections.Counter:
    d = work / name
    d.mkdir()
    kind = KINDS[name](d)
    counts: collections.Counter = collections.Counter()
    seen: set[str] = set()
    t0 = time.perf_counter()
    cli_every = max(1, inputs // max(cli_sample, 1)) if cli_sample else 0
    for i in range(inputs):
        data = make_input(kind, rng, mutate_bytes)
        outcome, msg = one(kind, data)
        counts[outcome] += 1
        if cli_every and i % cli_every == 0 and counts["cli"] < cli_sample:
            c_out, c_msg = through_cli(kind, data)
            counts["cli"] += 1
            if c_out == "BUG":
                counts["cli_BUG"] += 1
                outcome, msg = "BUG", "via the CLI: " + c_msg
        if outcome in ("BUG", "TIMEOUT", "MEMORY") and msg.split("\n")[0] not in seen:
            seen.add(msg.split("\n")[0])
            keep = work.parent / f"fuzz-{name}-{len(seen)}{kind.suffix}"
            keep.write_bytes(data)
            print(f"  {name}: {outcome}: {msg}\n  (input kept at {keep})", file=sys.stderr)
    counts["inputs"] = inputs
    counts["seconds"] = round(time.perf_counter() - t0, 1)
    return counts


def run_kinds(names: list[str], inputs: int, cli_sample: int, seed: int,
              mutate_bytes: Callable[[bytes, random.Random], bytes]) -> int:
    """Fuzz each kind; print a table; return the number of BUG/TIMEOUT/MEMORY outcomes."""
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MB * 2**20, LIMIT_MB * 2**20))
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    rng = random.Random(seed)
    bad = 0
    print(f"{'kind':<10} {'inputs':>7} {'ok':>6} {'XfidError':>10} {'BUG':>5} {'TIMEOUT':>8} {'MEMORY':>7} "
          f"{'via CLI':>8} {'CLI BUG':>8} {'seconds':>8}")
    keep = Path(tempfile.mkdtemp(prefix="xfid-fuzz-"))
    work = keep / "w"
    work.mkdir()
    for n in names:
        c = run_kind(n, inputs, cli_sample, rng, work, mutate_bytes)
        bad += c["BUG"] + c["TIMEOUT"] + c["MEMORY"]
        print(f"{n:<10} {c['inputs']:>7} {c['ok']:>6} {c['xfid_error']:>10} {c['BUG']:>5} {c['TIMEOUT']:>8} "
              f"{c['MEMORY']:>7} {c['cli']:>8} {c['cli_BUG']:>8} {c['seconds']:>8}", flush=True)
    print(f"kept inputs (if any) under {keep}")
    return bad
