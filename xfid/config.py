"""xfid.toml: store path, targets, tolerances, op maps, comparison pairs, drift thresholds."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from xfid.errors import ConfigError
from xfid.models.spec import number as _num

CONFIG_NAME = "xfid.toml"
DEFAULT_REL_TOLERANCE = 0.10
DEFAULT_BOUND_TOLERANCE = 0.02
"""`[settings] bound_tolerance`: how far a reference may beat a roofline bound (model rounding,
clock jitter) before it is a bound_violation. The one default every reader uses."""


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
    interconnect_latency_s: float | None = None
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
    stack: tuple[tuple[str, str], ...] = ()
    """`stack = { vllm_version = "0.8.*" }`: the stack the rule holds on (config key, glob); rows
    measured on another stack are marked stack_changed (xfid.tracker.stack). () = any stack."""

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


UNKNOWN_TARGET = "unknown"
"""A target named `unknown` or `unknown-…` (e.g. `unknown-gpu`) says the source does not tell the
hardware: nothing could be configured for it, so xfid neither warns about it nor asks for a table."""


def is_unknown_target(name: str) -> bool:
    return name == UNKNOWN_TARGET or name.startswith(UNKNOWN_TARGET + "-")


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
    database: str | None = None  # [store] database: a PostgreSQL URL (None: the store's SQLite file)
    records: str | None = None  # [store] records: a directory, file:///…, s3://… or gs://… (None: <store>/records)
    text: str | None = None  # the user's xfid.toml as read (None: bundled only); recorded with each check

    def __repr__(self) -> str:
        """The dataclass repr with any password of [store] database/records masked (a notebook or
        a traceback shows it)."""
        from dataclasses import fields

        from xfid.sqlbackend import mask

        return f"Config({mask(', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in fields(self)))})"

    def target(self, name: str) -> Target:
        if name not in self.targets:
            close = self.close_targets(name)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise ConfigError(f"unknown target {name!r}; {hint}configured targets: {', '.join(sorted(self.targets))} "
                              f"(add [targets.{name}] to xfid.toml)")
        return self.targets[name]

    def close_targets(self, name: str, others: Iterable[str] = ()) -> list[str]:
        """Known target names (configured, plus `others`) that look like `name`, closest first."""
        names = sorted({*self.targets, *others} - {name})
        return difflib.get_close_matches(name, names, n=3, cutoff=0.6)

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
            raise ConfigError("config file {p} does not exist (check {config})", params=("config",), p=p)
        return p
    env = os.environ.get("XFID_CONFIG")
    if env:
        return find_config(env)
    p = Path.cwd() / CONFIG_NAME
    return p if p.is_file() else None


MAX_CONFIG_BYTES = 8 << 20
"""The largest xfid.toml read (each check records its config's text; a config is a page of TOML)."""


def load_config(explicit: str | os.PathLike[str] | None = None, *, bundled: bool = True) -> Config:
    """Load the effective config.

    The bundled config (targets for a100-sxm, mi210, h100-sxm, h200-sxm and the invented
    t100-a0) is the base; a user's xfid.toml adds/overrides targets by name, and its
    tolerance and op_map rules come before the bundled ones (first match wins).

    Raises:
        ConfigError: unreadable TOML or a malformed entry, naming the file and key.
    """
    path = find_config(explicit)
    text = None
    if path is not None:
        try:
            size = path.stat().st_size
        except OSError as e:
            raise ConfigError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes is more than an xfid.toml may hold "
                              f"({MAX_CONFIG_BYTES:,} bytes): is it the right file?") from None
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text") from None
    return config_from_text(text, path, bundled=bundled)


def config_from_text(text: str | None, path: Path | None, *, bundled: bool = True) -> Config:
    """The effective config of one xfid.toml's text (None: the bundled config alone), as
    `load_config` builds it; a store rebuilds the config its last check recorded with this.

    Raises:
        ConfigError: invalid TOML or a malformed entry, naming `path` and the key.
    """
    base = _bundled() if bundled else {}
    user: dict[str, Any] = {}
    if text is not None:
        try:
            user = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from None
    cfg = build_config(base, user, path)
    cfg.text = text
    return cfg


SECTIONS = ("store", "settings", "targets", "tolerance", "op_map", "compare", "drift", "tracker", "report", "rtl",
            "engine", "notify")

TARGET_KEYS = ("peak_flops", "mem_bw", "clock_hz", "interconnect_bw", "sram_bw", "tdp_w", "invented", "note", "blocks",
               "interconnect_latency_s", "energy", "memory")
TARGET_NUMBERS = ("mem_bw", "clock_hz", "interconnect_bw", "sram_bw", "tdp_w")
"""Rates, clocks and powers: each must be a finite number > 0 (a zero peak divides by zero)."""
TOLERANCE_KEYS = ("pair", "metric", "op", "stat", "rel", "abs", "stack")
OP_MAP_KEYS = ("source", "match", "op")
COMPARE_KEYS = ("candidate", "reference", "convert", "bounds")
DRIFT_KEYS = ("error_abs", "error_rel", "value_rel", "mape_abs", "bias_rel")
"""The fields of `xfid.drift.drift.Thresholds` (a test keeps the two in step)."""


def _nonneg(v: Any, key: str, where: str) -> float:
    return _num(v, key, where)


def _positive(v: Any, key: str, where: str) -> float:
    return _num(v, key, where, positive=True)


def _at_least_one(v: Any, key: str, where: str) -> float:
    """A factor on a tolerance: a number >= 1 (below 1 a row within its tolerance would be filed)."""
    x = _num(v, key, where)
    if x < 1:
        raise ConfigError(f"{where}: {key} must be a number >= 1 (a multiple of the tolerance), got {v!r}")
    return x


def _integer(low: int, high: int = 2**63 - 1) -> Any:
    def check(v: Any, key: str, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"{where}: {key} must be an integer >= {low}, got {v!r}")
        if v > high:  # a count past what the machine can do: refused here, not as a MemoryError later
            raise ConfigError(f"{where}: {key} must be an integer <= {high:,}, got {v:,}")
        return v
    return check


BOOTSTRAP_BYTES = 24
"""Bytes the exact bootstrap holds per resample per row (index, count and weight matrices)."""


def _check_bootstrap(settings: dict[str, Any], where: str) -> None:
    """bootstrap_resamples x bootstrap_exact_max_n must fit the memory this machine has free."""
    from xfid.engine.stats import BOOTSTRAP_EXACT_MAX_N, BOOTSTRAP_RESAMPLES
    from xfid.sysmem import HEADROOM, available_memory

    r = settings.get("bootstrap_resamples", BOOTSTRAP_RESAMPLES)
    n = settings.get("bootstrap_exact_max_n", BOOTSTRAP_EXACT_MAX_N)
    need = BOOTSTRAP_BYTES * r * n
    avail = available_memory()
    if avail is not None and need > HEADROOM * avail:
        raise ConfigError(f"{where}: [settings] bootstrap_resamples = {r:,} with bootstrap_exact_max_n = {n:,} needs "
                          f"{need / 1e9:,.1f} GB for the bootstrap, more than {HEADROOM:.0%} of the "
                          f"{avail / 1e9:.1f} GB free on this machine (lower either; the default is "
                          f"{BOOTSTRAP_RESAMPLES:,} resamples, exact up to n = {BOOTSTRAP_EXACT_MAX_N})")


def _names(v: Any, key: str, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{where}: {key} must be a list of names like [\"median\", \"mean\"], got {v!r}")
    return v


def _target_list(v: Any, key: str, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{where}: {key} must be a list of target names like [\"t100-a0\"], got {v!r}")
    return v


def _choice(*allowed: str) -> Any:
    def check(v: Any, key: str, where: str) -> str:
        if v not in allowed:
            raise ConfigError(f"{where}: {key} = {v!r} is not known; use {' or '.join(map(repr, allowed))}")
        return v
    return check


def _text(v: Any, key: str, where: str) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{where}: {key} must be a string, got {v!r}")
    return v


def _database_url(v: Any, key: str, where: str) -> str:
    from xfid.sqlbackend import is_postgres, mask

    if not isinstance(v, str) or not is_postgres(v):
        raise ConfigError(f"{where}: {key} must be a PostgreSQL URL, postgresql://USER@HOST[:PORT]/DBNAME, got "
                          f"{mask(v)!r} (leave the password out: libpq reads PGPASSWORD or ~/.pgpass)")
    return v


def _records_url(v: Any, key: str, where: str) -> str:
    from xfid.sqlbackend import mask

    scheme = v.split("://", 1)[0].lower() if isinstance(v, str) and "://" in v else ""
    if not isinstance(v, str) or not v.strip() or scheme not in ("", "file", "s3", "gs", "gcs"):
        raise ConfigError(f"{where}: {key} must be a directory, file:///PATH, s3://BUCKET/PREFIX or "
                          f"gs://BUCKET/PREFIX, got {mask(v)!r}")
    return v


ENGINES = ("local", "spark")
SPARK_KEYS = ("master", "conf")


def _spark(v: Any, key: str, where: str) -> dict[str, Any]:
    """`[engine.spark]`: master = "local[2]" | "spark://HOST:7077" | "yarn" | ..., conf = { "spark.x" = ... }."""
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: {key} must be a table: write [engine.spark] with master = ... under it")
    for k in v:
        if k not in SPARK_KEYS:
            raise _unknown(k, SPARK_KEYS, "[engine.spark]", where)
    if "master" in v and (not isinstance(v["master"], str) or not v["master"].strip()):
        raise ConfigError(f"{where}: [engine.spark] master must be a Spark master URL like \"local[2]\", "
                          f"\"spark://host:7077\" or \"yarn\", got {v['master']!r}")
    conf = v.get("conf", {})
    if not isinstance(conf, dict):
        raise ConfigError(f"{where}: [engine.spark] conf must be a table like {{ \"spark.executor.memory\" = \"8g\" }}, "
                          f"got {conf!r}")
    for k, x in conf.items():
        if not str(k).startswith("spark.") or isinstance(x, (dict, list)):
            raise ConfigError(f"{where}: [engine.spark] conf: {k!r} = {x!r} must be a spark.* key with a string, "
                              "number or boolean value")
    return v


SCHEMA: dict[str, dict[str, Any]] = {
    "store": {"path": _text, "database": _database_url, "records": _records_url},
    "settings": {
        "default_rel_tolerance": _nonneg, "bound_tolerance": _nonneg,
        "roofline_tolerance": _choice("bound", "tolerance"), "roofline_min_efficiency": _nonneg,
        "bound_fidelities": _names, "value_matches": _names,
        "bootstrap_resamples": _integer(1, 1_000_000), "bootstrap_seed": _integer(0, 2**64 - 1),
        "bootstrap_exact_max_n": _integer(0, 100_000),
    },
    "drift": dict.fromkeys(DRIFT_KEYS, _nonneg),
    "tracker": {"resolve_after": _integer(1, 1_000_000), "confirm_after": _integer(1, 1_000_000),
                "hysteresis": _nonneg, "noise_level": _nonneg, "noise_resamples": _integer(1, 1_000_000),
                "noise_seed": _integer(0, 2**64 - 1), "triage_days": _integer(0, 3650),
                "stack_factor": _at_least_one, "stale_after": _integer(1, 10_000), "stale_window": _integer(1, 10_000),
                "summary_min_issues": _integer(2, 1_000_000), "summary_min_share": _nonneg},
    "report": {"ours": _target_list},  # the report's own target(s), checked against [targets] below
    "rtl": {"default_target": _text},  # the target of a cocotb results.xml that does not say
    "engine": {"name": _choice(*ENGINES), "spark": _spark},  # which engine correlates; Spark's master and conf
}
"""Every key of the plain sections, with the check its value must pass."""


def _unknown(key: str, allowed: Any, what: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(f"{where}: {what} has unknown key {key!r}; {hint}allowed: {', '.join(allowed) or 'none'}")


def _check_sections(user: dict[str, Any], where: str) -> None:
    for name, checks in SCHEMA.items():
        if name not in user:
            continue
        sec = user[name]
        if not isinstance(sec, dict):
            raise ConfigError(f"{where}: {name} must be a table: write [{name}] with key = value lines under it")
        for k, v in sec.items():
            if k not in checks:
                raise _unknown(k, checks, f"[{name}]", where)
            checks[k](v, f"[{name}] {k}", where)


def build_config(base: dict[str, Any], user: dict[str, Any], path: Path | None) -> Config:
    where = str(path or "bundled xfid.toml")
    unknown = [k for k in user if k not in SECTIONS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"{where}: unknown section {unknown[0]!r}; {hint}xfid.toml has {', '.join(SECTIONS)}")
    for k in ("tolerance", "op_map", "compare"):
        if k in user and not isinstance(user[k], list):
            raise ConfigError(f"{where}: {k} must be an array of tables: write [[{k}]], not [{k}]")
    if "targets" in user and not isinstance(user["targets"], dict):
        raise ConfigError(f"{where}: targets must be tables: write [targets.NAME]")
    _check_sections(user, where)
    if "notify" in user:  # [[notify.webhook]]: checked here, used after a check (xfid.notify)
        from xfid.notify import webhooks

        webhooks(user["notify"], where)
    if isinstance(user.get("settings"), dict):
        _check_bootstrap(user["settings"], where)
    raw = {**base, **user}
    raw["targets"] = {**base.get("targets", {}), **user.get("targets", {})}
    for key in ("tolerance", "op_map", "compare"):
        raw[key] = list(user.get(key, [])) + list(base.get(key, []) if key != "compare" or not user.get(key) else [])
    targets = {n: _target(n, t, where) for n, t in raw["targets"].items()}
    tols = [_tolerance(i, t, where) for i, t in enumerate(raw["tolerance"])]
    maps = [_op_map(i, m, where) for i, m in enumerate(raw["op_map"])]
    pairs = [_pair(i, c, where) for i, c in enumerate(raw["compare"])]
    settings = dict(base.get("settings", {}), **user.get("settings", {}))
    _check_ours(raw.get("report", {}), targets, where)
    _check_bound_rules(user.get("tolerance", []), settings, user.get("compare", []), where)
    store = user.get("store", {}).get("path") or base.get("store", {}).get("path")
    where_from = {**base.get("store", {}), **user.get("store", {})}
    return Config(path, store, targets, tols, maps, pairs, settings, raw,
                  database=where_from.get("database"), records=where_from.get("records"))


def _check_ours(report: Any, targets: dict[str, Target], where: str) -> None:
    """`[report] ours` names configured targets: a typo would silently empty the competitive view."""
    for name in report.get("ours", []) if isinstance(report, dict) else []:
        if name not in targets:
            close = difflib.get_close_matches(name, sorted(targets), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"{where}: [report] ours names {name!r}, which is not a configured target; {hint}"
                              f"configured: {', '.join(sorted(targets))} (add [targets.{name}] or fix the name)")


def report_ours(config: Config) -> list[str]:
    """The report's own target(s) (`[report] ours`), in the order written: what its competitive
    view sets against the measured competitors (the bundled xfid.toml names the invented t100-a0;
    an empty list: no such view)."""
    return list(config.section("report").get("ours", []))


def _check_bound_rules(rules: list[Any], settings: dict[str, Any], compare: list[Any], where: str) -> None:
    """A [[tolerance]] aimed at a bound pair (roofline->X) would be ignored in bound mode: refuse it."""
    if settings.get("roofline_tolerance", "bound") != "bound":
        return
    bound = settings.get("bound_fidelities", ["roofline"])
    by_tolerance = [f"{c.get('candidate')}->{c.get('reference')}" for c in compare
                    if isinstance(c, dict) and c.get("bounds") == "tolerance"]
    for i, t in enumerate(rules):
        pat = t.get("pair", "*") if isinstance(t, dict) else "*"
        cand = pat.split("->", 1)[0] if "->" in pat else pat
        aimed = [b for b in bound if fnmatch.fnmatchcase(b, cand)]
        if not aimed or any(fnmatch.fnmatchcase(f, cand) for f in ("archmodel", "rtl", "measured")):
            continue  # not a rule for a bound candidate only (e.g. `*->measured`): bound pairs keep their bound
        if any(fnmatch.fnmatchcase(p, pat) for p in by_tolerance):
            continue
        raise ConfigError(
            f"{where}: tolerance[{i}] pair = {pat!r} names a bound pair: {aimed[0]} numbers are upper bounds "
            f"and, with [settings] roofline_tolerance = \"bound\" (the default), are only checked for "
            f"bound violations (within bound_tolerance), so rel/abs would be ignored. To hold {aimed[0]} to "
            f"this tolerance as well, set roofline_tolerance = \"tolerance\" under [settings] (or "
            f"bounds = \"tolerance\" on a [[compare]] entry for this pair); otherwise remove the rule")


def _target(name: str, t: Any, where: str) -> Target:
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: [targets.{name}] must be a table")
    for k in t:
        if k not in TARGET_KEYS:
            raise _unknown(k, TARGET_KEYS, f"[targets.{name}]", where)
    pf = t.get("peak_flops", {})
    if not isinstance(pf, dict):
        raise ConfigError(f"{where}: targets.{name}.peak_flops must be a table like {{ bf16 = 989e12 }}")
    if not isinstance(t.get("invented", False), bool):
        raise ConfigError(f"{where}: targets.{name}.invented must be true or false, got {t['invented']!r}")
    if "note" in t:
        _text(t["note"], f"targets.{name}.note", where)
    blocks = t.get("blocks", {})
    if not isinstance(blocks, dict) or not all(isinstance(b, dict) for b in blocks.values()):
        raise ConfigError(f"{where}: targets.{name}.blocks must be a table of [targets.{name}.blocks.NAME] tables")
    vals = {k: _positive(t[k], f"targets.{name}.{k}", where) for k in TARGET_NUMBERS if k in t}
    if "interconnect_latency_s" in t:
        vals["interconnect_latency_s"] = _nonneg(t["interconnect_latency_s"], f"targets.{name}.interconnect_latency_s", where)
    from xfid.models.spec import block_energy, energy_table, memory_table

    for block, spec in blocks.items():
        if "energy" in spec:
            block_energy(f"targets.{name}.blocks.{block}.energy", spec["energy"], where)
    extra: dict[str, Any] = {"blocks": t["blocks"]} if "blocks" in t else {}
    if "memory" in t:
        extra["memory"] = memory_table(name, t["memory"], t.get("mem_bw"), where)
    if "energy" in t:
        extra["energy"] = energy_table(name, t["energy"], t, extra.get("memory"), where)
    return Target(
        name=name,
        peak_flops={p: _positive(v, f"targets.{name}.peak_flops.{p}", where) for p, v in pf.items()},
        invented=bool(t.get("invented", False)),
        note=str(t.get("note", "")),
        extra=extra,
        **vals,
    )


def _tolerance(i: int, t: Any, where: str) -> Tolerance:
    key = f"tolerance[{i}]"
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: {key} must be a table")
    bad = set(t) - set(TOLERANCE_KEYS)
    if bad:
        raise ConfigError(f"{where}: {key} has unknown key(s) {', '.join(sorted(bad))}; allowed: {', '.join(TOLERANCE_KEYS)}")
    if "rel" not in t:
        raise ConfigError(f"{where}: {key} needs rel (a relative tolerance like 0.10)")
    pats = {k: _text(t.get(k, "*"), f"{key}.{k}", where) for k in ("pair", "metric", "op", "stat")}
    return Tolerance(**pats, rel=_num(t["rel"], f"{key}.rel", where), abs=_num(t.get("abs", 0), f"{key}.abs", where),
                     stack=_stack_scope(t["stack"], f"{key}.stack", where) if "stack" in t else ())


def _stack_scope(v: Any, key: str, where: str) -> tuple[tuple[str, str], ...]:
    """`stack = { vllm_version = "0.8.*", dtype = "bf16" }`: config keys of the records and the
    glob each must match (xfid.tracker.stack)."""
    example = '{ vllm_version = "0.8.*" }'
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: {key} must be a table of record config keys and glob patterns like "
                          f"{example}, got {v!r}")
    if not v:
        raise ConfigError(f"{where}: {key} is empty; name at least one config key, e.g. {example}")
    out = []
    for k, pat in v.items():
        if not str(k).strip():
            raise ConfigError(f"{where}: {key} has an empty key; name a record config key, e.g. {example}")
        if not isinstance(pat, str) or not pat.strip():
            raise ConfigError(f"{where}: {key}.{k} must be a non-empty glob pattern string like \"0.8.*\", got {pat!r}")
        out.append((str(k), pat))
    return tuple(sorted(out))


def _op_map(i: int, m: Any, where: str) -> OpMapRule:
    key = f"op_map[{i}]"
    if not isinstance(m, dict) or "match" not in m or "op" not in m:
        raise ConfigError(f"{where}: {key} needs match (a regex) and op")
    for k in m:
        if k not in OP_MAP_KEYS:
            raise _unknown(k, OP_MAP_KEYS, key, where)
    for k in m:
        _text(m[k], f"{key}.{k}", where)
    try:
        rx = re.compile(m["match"])
    except re.error as e:
        raise ConfigError(f"{where}: {key}.match is not a valid regex: {e}") from None
    return OpMapRule(source=m.get("source", "*"), match=rx, op=m["op"])


def _pair(i: int, c: Any, where: str) -> ComparePair:
    key = f"compare[{i}]"
    if not isinstance(c, dict) or "candidate" not in c or "reference" not in c:
        raise ConfigError(f"{where}: {key} needs candidate and reference fidelities")
    for k in c:
        if k not in COMPARE_KEYS:
            raise _unknown(k, COMPARE_KEYS, key, where)
    return ComparePair(_text(c["candidate"], f"{key}.candidate", where), _text(c["reference"], f"{key}.reference", where))
