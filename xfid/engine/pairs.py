"""Comparison pairs (defaults, `[[compare]]`, `--pair`), run/as-of selection parsing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from xfid.config import ComparePair, Config
from xfid.engine.pairrows import CONVERSIONS, Pair
from xfid.errors import ConfigError, EngineError
from xfid.schema import fidelity_rank, is_valid_fidelity

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_PAIRS: tuple[tuple[str, str], ...] = (
    ("roofline", "archmodel"), ("archmodel", "rtl"), ("archmodel", "measured"),
    ("roofline", "measured"), ("rtl", "measured"),
    ("roofline", "rtl"),  # the RTL block bounds: simulated cycles must not beat the roofline
)
_PAIR_RE = re.compile(r"^\s*([A-Za-z0-9_.-]+?)\s*(?:->|:)\s*([A-Za-z0-9_.-]+)\s*$")
"""`cand->ref`, or `cand:ref` (nothing for a shell to take: `->` unquoted is `-` and a redirection)."""
BOUND_MODES = ("bound", "tolerance")


def parse_pair(text: str, where: str = "{pairs}", params: tuple[str, ...] = ("pairs",)) -> Pair:
    """`cand->ref` or `cand:ref` -> Pair; EngineError naming the bad text and the expected form.

    `where` names what was given: by default the `pairs` argument (`--pair` on the command line,
    see xfid.errors), or a place in xfid.toml (then `params` is empty)."""
    m = _PAIR_RE.match(text or "")
    if not m:
        hint = ""
        if str(text or "").rstrip().endswith("-"):
            hint = ("; it ends in '-': the shell probably took the '>' of an unquoted '->' as a redirection (and "
                    "wrote a file named after the reference): quote it, 'roofline->measured', or write roofline:measured")
        raise _pair_error(where, params, "expects CANDIDATE->REFERENCE (or CANDIDATE:REFERENCE) like "
                          "'roofline->measured', got {text!r}{hint}", text=text, hint=hint)
    cand, ref = m.group(1), m.group(2)
    for f in (cand, ref):
        if not is_valid_fidelity(f):
            raise _pair_error(where, params, "{text!r}: unknown fidelity {f!r}; use roofline, archmodel, rtl, "
                              "measured or a derived label like roofline-cal", text=text, f=f)
    if cand == ref:
        raise _pair_error(where, params, "{text!r}: candidate and reference must differ", text=text)
    return Pair(cand, ref, origin="--pair" if params == ("pairs",) else where)


def _pair_error(where: str, params: tuple[str, ...], rest: str, **values: Any) -> EngineError:
    if params:  # `where` names parameters: rendered by the caller's side (xfid.errors)
        return EngineError(f"{where} {rest}", params=params, **values)
    return EngineError(f"{where} {rest.format(**values)}")


def check_convert(convert: Any, where: str) -> None:
    """The one check of a pair's `convert` (a key of pairrows.CONVERSIONS); `where` names it.

    Raises:
        ConfigError: an unknown conversion, the known ones listed.
    """
    if not isinstance(convert, str) or convert not in CONVERSIONS:
        raise ConfigError(f"{where} = {convert!r} is not known; use one of {', '.join(CONVERSIONS)}")


def conversion(pair: Pair) -> tuple[str, str, str] | None:
    """A pair's conversion (source metric, target metric, unit), None without one (check_convert)."""
    if not pair.convert:
        return None
    check_convert(pair.convert, f"[[compare]] {pair.label}: convert")
    return CONVERSIONS[pair.convert]


def check_conversions(pairs: Iterable[Pair]) -> None:
    """check_convert on every pair, before anything is aligned."""
    for p in pairs:
        conversion(p)


def _from_config(config: Config) -> list[Pair]:
    raw = config.raw.get("compare", []) if isinstance(config.raw.get("compare"), list) else []
    out = []
    for i, cp in enumerate(config.compare):
        opts = raw[i] if i < len(raw) and isinstance(raw[i], dict) else {}
        where = f"{config.path or 'xfid.toml'}: compare[{i}]"
        p = parse_pair(f"{cp.candidate}->{cp.reference}", where, ())
        conv = opts.get("convert")
        if conv is not None:
            check_convert(conv, f"{where}.convert")
        bounds = opts.get("bounds")
        if bounds is not None and (not isinstance(bounds, str) or bounds not in BOUND_MODES):
            raise ConfigError(f"{where}.bounds = {bounds!r} is not known; use one of {', '.join(BOUND_MODES)}")
        out.append(Pair(p.candidate, p.reference, conv, bounds, origin=f"compare[{i}]"))
    return out


def resolve_pairs(config: Config, pairs: Iterable[Any] | None, present: Sequence[str]) -> list[Pair]:
    """The pairs to compare: explicit `pairs`, else `[[compare]]`, else the defaults.

    Defaults also compare every derived label present in the store (e.g. `roofline-cal`)
    with the references of its base fidelity.
    """
    if pairs:
        out = []
        for p in pairs:
            if isinstance(p, Pair):
                out.append(p)
            elif isinstance(p, ComparePair):
                out.append(parse_pair(f"{p.candidate}->{p.reference}"))
            elif isinstance(p, (tuple, list)) and len(p) == 2:
                out.append(parse_pair(f"{p[0]}->{p[1]}"))
            else:
                out.append(parse_pair(str(p)))
        # options of a matching [[compare]] entry still apply (convert, bounds)
        conf = {q.label: q for q in _from_config(config)}
        return [Pair(p.candidate, p.reference, p.convert or getattr(conf.get(p.label), "convert", None),
                     p.bounds or getattr(conf.get(p.label), "bounds", None), p.origin) for p in out]
    if config.compare:
        return _from_config(config)
    out = [Pair(c, r) for c, r in DEFAULT_PAIRS]
    derived = sorted(f for f in present if f not in {"roofline", "archmodel", "rtl", "measured"})
    for d in derived:
        base = d.split("-", 1)[0]
        out += [Pair(d, r, origin=f"derived from {base}") for c, r in DEFAULT_PAIRS if c == base]
    return sorted(out, key=lambda p: (fidelity_rank(p.candidate), p.candidate, fidelity_rank(p.reference)))


def parse_run(run: str | Mapping[str, str] | Sequence[str] | None) -> dict[str, str] | None:
    """`R` (every fidelity) or `FIDELITY=R` items -> {fidelity or '*': run}."""
    if run is None or run == () or run == []:
        return None
    if isinstance(run, Mapping):
        return {str(k): str(v) for k, v in run.items()}
    items = [run] if isinstance(run, str) else list(run)
    out: dict[str, str] = {}
    for it in items:
        k, sep, v = str(it).partition("=")
        if sep and is_valid_fidelity(k.strip()):
            out[k.strip()] = v.strip()
        elif sep:
            raise EngineError("{run} {it!r}: {k!r} is not a fidelity (use RUN or FIDELITY=RUN)", params=("run",),
                              it=it, k=k.strip())
        else:
            out["*"] = str(it).strip()
    return out


def parse_as_of(value: Any) -> pd.Timestamp | None:
    """A date (the whole day counts) or an ISO date-time -> a UTC pandas Timestamp."""
    if value is None:
        return None
    import pandas as pd

    text = str(value).strip()
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise EngineError("{as_of} expects a date like 2026-11-30 or an ISO date-time, got {text!r}",
                          params=("as_of",), text=text) from None
    if ts is pd.NaT:
        raise EngineError("{as_of} expects a date like 2026-11-30, got {text!r}", params=("as_of",), text=text)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        ts = ts + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1)
    return ts
