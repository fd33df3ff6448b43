"""xfid.toml: store path, targets, tolerances, op maps, comparison pairs, drift thresholds."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from xfid.errors import ConfigError

CONFIG_NAME = "xfid.toml"
DEFAULT_REL_TOLERANCE = 0.10


@dataclass(frozen=True)
class Target:
    """A hardware target: the roofline model reads these."""

    name: str
    peak_flops: dict[str, float]
    mem_bw: float | None = None
    clock_hz: float | None = None
    interconnect_bw: float | None = None
    sram_bw: float | None = None
    tdp_w: float | None = None
    invented: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def need(self, key: str) -> Any:
        """A field the caller cannot do without; a clear error when the config lacks it."""
        v = getattr(self, key, None) if key != "extra" else None
        if v is None:
            v = self.extra.get(key)
        if v is None:
            raise ConfigError(f"target {self.name!r} has no {key!r}; add {key} = ... under [targets.{self.name}] in xfid.toml")
        return v

    def peak(self, precision: str) -> float:
        if precision not in self.peak_flops:
            raise ConfigError(
                f"target {self.name!r} has no peak_flops for precision {precision!r}; "
                f"it has {', '.join(sorted(self.peak_flops)) or 'none'} (add peak_flops.{precision} under [targets.{self.name}])"
            )
        return float(self.peak_flops[precision])


@dataclass(frozen=True)
class Tolerance:
    pair: str = "*"
    metric: str = "*"
    op: str = "*"
    stat: str = "*"
    rel: float = DEFAULT_REL_TOLERANCE
    abs: float = 0.0

    def matches(self, candidate: str, reference: str, metric: str, op: str, stat: str) -> bool:
        pair = f"{candidate}->{reference}"
        return (
            fnmatch.fnmatchcase(pair, self.pair)
            and fnmatch.fnmatchcase(metric, self.metric)
            and fnmatch.fnmatchcase(op, self.op)
            and fnmatch.fnmatchcase(stat, self.stat)
        )


@dataclass(frozen=True)
class OpMapRule:
    source: str
    match: re.Pattern[str]
    op: str

    def applies_to(self, source: str) -> bool:
        return self.source in ("*", source)


@dataclass(frozen=True)
class ComparePair:
    candidate: str
    reference: str


@dataclass
class Config:
    """The effective configuration: bundled defaults overlaid by the user's xfid.toml."""

    path: Path | None
    store: str | None
    targets: dict[str, Target]
    tolerances: list[Tolerance]
    op_maps: list[OpMapRule]
    compare: list[ComparePair]
    settings: dict[str, Any]
    raw: dict[str, Any]

    def target(self, name: str) -> Target:
        if name not in self.targets:
            raise ConfigError(f"unknown target {name!r}; configured targets: {', '.join(sorted(self.targets))} (add [targets.{name}] to xfid.toml)")
        return self.targets[name]

    def tolerance_for(self, candidate: str, reference: str, metric: str, op: str, stat: str) -> Tolerance:
        for t in self.tolerances:
            if t.matches(candidate, reference, metric, op, stat):
                return t
        return Tolerance(rel=float(self.settings.get("default_rel_tolerance", DEFAULT_REL_TOLERANCE)))

    def section(self, name: str) -> dict[str, Any]:
        v = self.raw.get(name, {})
        return v if isinstance(v, dict) else {}

    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _bundled() -> dict[str, Any]:
    text = resources.files("xfid").joinpath("data/xfid.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist (check --config)")
        return p
    env = os.environ.get("XFID_CONFIG")
    if env:
        return find_config(env)
    p = Path.cwd() / CONFIG_NAME
    return p if p.is_file() else None


def load_config(explicit: str | os.PathLike[str] | None = None, *, bundled: bool = True) -> Config:
    """Load the effective config.

    The bundled config (targets for a100-sxm, mi210, h100-sxm, h200-sxm and the invented
    t100-a0) is the base; a user's xfid.toml adds/overrides targets by name, and its
    tolerance and op_map rules come before the bundled ones (first match wins).

    Raises:
        ConfigError: unreadable TOML or a malformed entry, naming the file and key.
    """
    path = find_config(explicit)
    base = _bundled() if bundled else {}
    user: dict[str, Any] = {}
    if path is not None:
        try:
            user = tomllib.loads(path.read_text(encoding="utf-8-sig"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text") from None
    return build_config(base, user, path)


SECTIONS = ("store", "settings", "targets", "tolerance", "op_map", "compare", "drift", "tracker", "report")


def build_config(base: dict[str, Any], user: dict[str, Any], path: Path | None) -> Config:
    where = str(path or "bundled xfid.toml")
    unknown = [k for k in user if k not in SECTIONS]
    if unknown:
        raise ConfigError(f"{where}: unknown section {unknown[0]!r}; xfid.toml has {', '.join(SECTIONS)}")
    for k in ("tolerance", "op_map", "compare"):
        if k in user and not isinstance(user[k], list):
            raise ConfigError(f"{where}: {k} must be an array of tables: write [[{k}]], not [{k}]")
    raw = {**base, **user}
    raw["targets"] = {**base.get("targets", {}), **user.get("targets", {})}
    for key in ("tolerance", "op_map", "compare"):
        raw[key] = list(user.get(key, [])) + list(base.get(key, []) if key != "compare" or not user.get(key) else [])
    targets = {n: _target(n, t, where) for n, t in raw["targets"].items()}
    tols = [_tolerance(i, t, where) for i, t in enumerate(raw["tolerance"])]
    maps = [_op_map(i, m, where) for i, m in enumerate(raw["op_map"])]
    pairs = [_pair(i, c, where) for i, c in enumerate(raw["compare"])]
    settings = dict(base.get("settings", {}), **user.get("settings", {}))
    store = user.get("store", {}).get("path") or base.get("store", {}).get("path")
    return Config(path, store, targets, tols, maps, pairs, settings, raw)


def _num(v: Any, key: str, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number, got {v!r}")
    if v < 0:
        raise ConfigError(f"{where}: {key} must not be negative, got {v!r}")
    return float(v)


def _target(name: str, t: Any, where: str) -> Target:
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: [targets.{name}] must be a table")
    pf = t.get("peak_flops", {})
    if not isinstance(pf, dict):
        raise ConfigError(f"{where}: targets.{name}.peak_flops must be a table like {{ bf16 = 989e12 }}")
    known = {"peak_flops", "mem_bw", "clock_hz", "interconnect_bw", "sram_bw", "tdp_w", "invented", "note"}
    vals = {k: _num(t[k], f"targets.{name}.{k}", where) for k in ("mem_bw", "clock_hz", "interconnect_bw", "sram_bw", "tdp_w") if k in t}
    return Target(
        name=name,
        peak_flops={p: _num(v, f"targets.{name}.peak_flops.{p}", where) for p, v in pf.items()},
        invented=bool(t.get("invented", False)),
        note=str(t.get("note", "")),
        extra={k: v for k, v in t.items() if k not in known},
        **vals,
    )


def _tolerance(i: int, t: Any, where: str) -> Tolerance:
    key = f"tolerance[{i}]"
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: {key} must be a table")
    bad = set(t) - {"pair", "metric", "op", "stat", "rel", "abs"}
    if bad:
        raise ConfigError(f"{where}: {key} has unknown key(s) {', '.join(sorted(bad))}; allowed: pair, metric, op, stat, rel, abs")
    if "rel" not in t:
        raise ConfigError(f"{where}: {key} needs rel (a relative tolerance like 0.10)")
    return Tolerance(pair=str(t.get("pair", "*")), metric=str(t.get("metric", "*")), op=str(t.get("op", "*")),
                     stat=str(t.get("stat", "*")), rel=_num(t["rel"], f"{key}.rel", where),
                     abs=_num(t.get("abs", 0), f"{key}.abs", where))


def _op_map(i: int, m: Any, where: str) -> OpMapRule:
    key = f"op_map[{i}]"
    if not isinstance(m, dict) or "match" not in m or "op" not in m:
        raise ConfigError(f"{where}: {key} needs match (a regex) and op")
    try:
        rx = re.compile(str(m["match"]))
    except re.error as e:
        raise ConfigError(f"{where}: {key}.match is not a valid regex: {e}") from None
    return OpMapRule(source=str(m.get("source", "*")), match=rx, op=str(m["op"]))


def _pair(i: int, c: Any, where: str) -> ComparePair:
    key = f"compare[{i}]"
    if not isinstance(c, dict) or "candidate" not in c or "reference" not in c:
        raise ConfigError(f"{where}: {key} needs candidate and reference fidelities")
    return ComparePair(str(c["candidate"]), str(c["reference"]))
