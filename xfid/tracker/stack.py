"""Stack validity windows: a calibration or a tolerance rule holds on the software stack it was
fitted on; rows measured on another stack are `stack_changed`, not model error.

The stack of a record is what its adapter (or `xfid ingest --meta`) kept in its `config`: the
keys named in STACK_KEYS and every key ending in `_version` (vllm_version, driver_version,
cuda_version, ...). Two scopes are checked, per aligned row:

- a **calibration window**: `xfid calibrate` records, for each stack key its reference
  (measured) records carried, the values it was fitted on (`summary["stack"]`, and in the
  `calibration` config of every written-back prediction). A row whose candidate is such a
  prediction and whose reference carries a key with a value outside the window is stack_changed.
  Versions (values that start with a digit, or `v` and a digit) are a range: inside when between
  the lowest and the highest fitted version; other values (a model, a dtype) must be one of them.
- a **tolerance scope**: a `[[tolerance]]` rule with `stack = { vllm_version = "0.8.*" }`. A row
  that rule judges is stack_changed when a side whose config carries the key does not match its
  glob. A side that does not carry the key is taken as inside (nothing says its stack changed).

Accounted for: a stack_changed row that is over tolerance (or uncertain) with
|rel_error| <= `[tracker] stack_factor` (default 2) x its tolerance is held: its kind becomes
`stack_changed`, it is not filed, and an open issue of its key is left as it is (neither seen
again nor clean). Beyond that factor the row is filed as before, its `stack_changed` column
saying which stack it was measured on. Rows within tolerance stay ok (and marked).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from xfid.engine.schema import FINGERPRINT_FIELDS
from xfid.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config, Tolerance
    from xfid.engine import Correlation

STACK_CHANGED = "stack_changed"
"""The row column (JSON list of changes, or None) and the kind of a held row."""
STACK_KEYS = ("version", "engine", "backend", "framework", "model", "model_id", "precision", "dtype",
              "kv_cache_dtype", "driver", "cuda")
"""Config keys that name the software stack (with every key ending in `_version`)."""
STACK_FACTOR = 2.0
"""The default of `[tracker] stack_factor`."""
HOLD_KINDS = ("over_tolerance", "uncertain")
_VERSION = re.compile(r"^v?\d")


def is_stack_key(key: str) -> bool:
    k = key.lower()
    return k in STACK_KEYS or k.endswith("_version")


def config_dict(v: Any) -> dict[str, Any]:
    """A record's config (JSON text or a dict) as a dict; {} when empty or not an object."""
    if isinstance(v, dict):
        return v
    if not isinstance(v, str) or not v.strip().startswith("{"):
        return {}
    try:
        d = json.loads(v)
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    text = str(v).strip()
    return text or None


def stack_of(config: Any) -> dict[str, str]:
    """The stack keys of one record's config, values as text."""
    out = {}
    for k, v in config_dict(config).items():
        s = _scalar(v)
        if s is not None and is_stack_key(str(k)):
            out[str(k)] = s
    return out


def _version_key(v: str) -> tuple[int, ...] | None:
    return tuple(int(x) for x in re.findall(r"\d+", v)) if _VERSION.match(v) else None


def _sorted(values: Iterable[str]) -> list[str]:
    vals = sorted(set(values))
    keys = [_version_key(v) for v in vals]
    if all(k is not None for k in keys):
        return [v for _, v in sorted(zip(keys, vals, strict=True))]
    return vals


def window(configs: Iterable[Any]) -> dict[str, list[str]]:
    """The stack a calibration was fitted on: per stack key, the values its records carried
    (versions ordered as versions)."""
    seen: dict[str, set[str]] = {}
    for c in configs:
        for k, v in stack_of(c).items():
            seen.setdefault(k, set()).add(v)
    return {k: _sorted(v) for k, v in sorted(seen.items())}


def inside(value: str, values: list[str]) -> bool:
    """Whether `value` lies in a window's values: a version between the lowest and highest one,
    else one of them."""
    if value in values:
        return True
    keys = [_version_key(v) for v in values]
    k = _version_key(value)
    if k is None or not keys or any(x is None for x in keys):
        return False
    return min(keys) <= k <= max(keys)  # type: ignore[type-var,operator]


def span(values: list[str]) -> str:
    """A window's values for a sentence: '0.8.4 to 0.8.5', '0.8.5', or 'bf16, fp16'."""
    if not values:
        return "(none)"
    if len(values) == 1:
        return values[0]
    if all(_version_key(v) is not None for v in values):
        return f"{values[0]} to {values[-1]}"
    return ", ".join(values)


def window_text(win: dict[str, list[str]] | None, reference: str = "reference") -> str:
    """The calibrate summary's line on the stack it was fitted on."""
    if not win:
        return (f"stack: not recorded (no {reference} record's config names a stack key such as vllm_version, "
                "driver_version, cuda_version, model or dtype)")
    return f"stack ({reference} records): " + ", ".join(f"{k} {span(v)}" for k, v in win.items())


# --- per row --------------------------------------------------------------------------
def calibration_changes(candidate: str, candidate_config: Any, reference_config: Any) -> list[dict[str, Any]]:
    """Where the reference's stack lies outside the calibration window of a calibrated candidate."""
    cal = config_dict(candidate_config).get("calibration")
    if not isinstance(cal, dict) or not isinstance(cal.get("stack"), dict):
        return []
    ref = stack_of(reference_config)
    out = []
    for k, vals in sorted(cal["stack"].items()):
        v = ref.get(k)
        if v is not None and isinstance(vals, list) and vals and not inside(v, [str(x) for x in vals]):
            out.append({"by": "calibration", "of": candidate, "fit_id": cal.get("fit_id"), "key": k,
                        "value": v, "window": span([str(x) for x in vals]), "side": "reference"})
    return out


def tolerance_changes(rule: Tolerance, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Where a side of the row carries a key of the rule's `stack` scope that its glob does not match."""
    out = []
    for k, pat in rule.stack:
        for side in ("candidate", "reference"):
            v = _scalar(config_dict(row.get(f"{side}_config")).get(k))
            if v is not None and not fnmatch.fnmatchcase(v, pat):
                out.append({"by": "tolerance", "of": rule.pair, "key": k, "value": v, "window": pat, "side": side})
    return out


def describe(changes: list[dict[str, Any]]) -> str:
    """'reference vllm_version 0.11.0 outside archmodel-cal's calibration (0.8.4 to 0.8.5)'."""
    parts = []
    for c in changes:
        scope = (f"{c['of']}'s calibration" if c["by"] == "calibration" else f"the tolerance rule for {c['of']}")
        parts.append(f"{c['side']} {c['key']} {c['value']} outside {scope} ({c['window']})")
    return "; ".join(parts)


def parse(v: Any) -> list[dict[str, Any]]:
    """A row's `stack_changed` cell as its list of changes ([] when none)."""
    if not isinstance(v, str) or not v:
        return []
    try:
        d = json.loads(v)
    except ValueError:
        return []
    return [c for c in d if isinstance(c, dict)] if isinstance(d, list) else []


# --- a check --------------------------------------------------------------------------
def factor_of(config: Config) -> float:
    """`[tracker] stack_factor` (checked >= 1 by xfid.config), default STACK_FACTOR."""
    v = config.section("tracker").get("stack_factor", STACK_FACTOR)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 1:
        raise ConfigError(f"{config.path or 'bundled xfid.toml'}: [tracker] stack_factor must be a number >= 1, "
                          f"got {v!r}")
    return float(v)


def annotate(corr: Correlation, config: Config) -> int:
    """Add the `stack_changed` column to the check's rows and hold the rows the change accounts
    for (see the module docstring); returns the number of rows held. Idempotent."""
    from xfid.tracker.noise import _discrepancies

    rows = corr.rows
    if rows is None or STACK_CHANGED in rows.columns:
        return 0
    corr.rows, held = annotate_rows(rows, config)
    corr.discrepancies = _discrepancies(corr.rows, corr.discrepancies)
    return held


def annotate_rows(rows: pd.DataFrame, config: Config) -> tuple[pd.DataFrame, int]:
    """`rows` (a copy) with the `stack_changed` column and the rows the change accounts for held,
    and how many were held; `rows` itself when it has the column. Each row is judged on its own
    (a check's rows may come in chunks)."""
    if STACK_CHANGED in rows.columns:
        return rows, 0
    factor = factor_of(config)
    cells: list[str | None] = [None] * len(rows)
    scoped = any(t.stack for t in config.tolerances)
    has_cal = "candidate_config" in rows.columns and _any_holds(rows["candidate_config"], '"calibration"')
    if not len(rows) or not (scoped or has_cal):  # no row can change: the kinds stay as they are
        return _with(rows, cells, None), 0
    kinds = rows["kind"].astype(str).tolist()
    held = 0
    for i, r in enumerate(rows.to_dict("records")):
        if kinds[i] == "missing_reference":
            continue
        ch = calibration_changes(str(r.get("candidate")), r.get("candidate_config"), r.get("reference_config"))
        if scoped:
            rule = config.tolerance_for(*(str(r.get(k)) for k in ("candidate", "reference", "metric", "op", "stat")))
            ch += tolerance_changes(rule, r)
        if not ch:
            continue
        cells[i] = json.dumps(ch, sort_keys=True)
        if kinds[i] in HOLD_KINDS and _accounted(r, factor):
            kinds[i] = STACK_CHANGED
            held += 1
    return _with(rows, cells, kinds), held


def _any_holds(column: pd.Series, text: str) -> bool:
    """Whether any value of `column` (as astype(str) gives it; a missing one holds nothing) holds
    `text`; of a categorical column only its categories in use are read, not a text per row."""
    import numpy as np

    if hasattr(column, "cat"):
        codes = column.cat.codes.to_numpy()
        used = np.unique(codes)
        return any(text in str(x) for x in column.cat.categories[used[used >= 0]])  # missing: holds nothing
    return bool(column.astype(str).str.contains(text, regex=False).any())


def _accounted(row: dict[str, Any], factor: float) -> bool:
    """|rel_error| within factor x tolerance: the stack change can explain the error."""
    from xfid.tracker.db import as_float

    rel, tol = as_float(row.get("rel_error")), as_float(row.get("tolerance"))
    return rel is not None and tol is not None and abs(rel) <= factor * tol


def _with(rows: pd.DataFrame, cells: list[str | None], kinds: list[str] | None) -> pd.DataFrame:
    """A copy of `rows` with the STACK_CHANGED cells and `kinds` (None: the kinds as they are,
    as text; a categorical kind column gains the STACK_CHANGED category either way)."""
    import pandas as pd

    rows = rows.copy()
    k = rows["kind"]
    if hasattr(k, "cat"):
        cats = [str(x) for x in k.cat.categories]
        if kinds is None and cats == list(k.cat.categories):  # the same values and categories, without a text per row
            rows["kind"] = k if STACK_CHANGED in cats else k.cat.add_categories([STACK_CHANGED])
        else:
            kinds = k.astype(str).tolist() if kinds is None else kinds
            rows["kind"] = pd.Categorical(kinds, categories=list(dict.fromkeys([*cats, STACK_CHANGED])))
    else:
        rows["kind"] = pd.Series(k.astype(str).tolist() if kinds is None else kinds, index=rows.index, dtype=object)
    rows[STACK_CHANGED] = pd.Series(cells, index=rows.index, dtype=object)
    return rows


KEY_FIELDS = ("fingerprint", *FINGERPRINT_FIELDS)


def changed_rows(rows: pd.DataFrame | None) -> list[dict[str, Any]]:
    """The rows marked stack_changed: key, kind (stack_changed when held), error, tolerance and
    the changes, for the check summary (JSON) and the report."""
    return sort_changed(changed_items(rows))


def changed_items(rows: pd.DataFrame | None) -> list[dict[str, Any]]:
    """changed_rows() of `rows` in row order (chunk by chunk: their lists joined, then
    `sort_changed`, give the whole check's)."""
    from xfid.tracker.db import as_float, as_text

    if rows is None or STACK_CHANGED not in rows.columns or not len(rows):
        return []
    out = []
    for r in rows[rows[STACK_CHANGED].notna()].to_dict("records"):
        ch = parse(r[STACK_CHANGED])
        if not ch:
            continue
        out.append({**{k: as_text(r.get(k)) for k in KEY_FIELDS}, "kind": str(r.get("kind")),
                    "rel_error": as_float(r.get("rel_error")), "tolerance": as_float(r.get("tolerance")),
                    "held": str(r.get("kind")) == STACK_CHANGED, "changes": ch, "text": describe(ch)})
    return out


def sort_changed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Filed first, then held, then ok (stable: row order within each)."""
    return sorted(items, key=lambda it: it["held"] + 2 * (it["kind"] == "ok"))


def headline(rows: pd.DataFrame | list[dict[str, Any]] | None) -> str | None:
    """The report headline's sentence on stack changes, or None when no row was measured outside
    its stack: '12 keys measured on vllm_version 0.11.0; archmodel-cal was calibrated on
    vllm_version 0.8.4 to 0.8.5' (the largest group; the others counted after it).

    `rows`: a check's rows (with the stack_changed column) or `changed_rows()` of them."""
    items = rows if isinstance(rows, list) else changed_rows(rows)
    groups: dict[tuple[str, ...], set[str]] = {}
    for it in items:
        for c in it["changes"]:
            g = (c["by"], str(c["of"]), c["key"], c["value"], c["window"])
            groups.setdefault(g, set()).add(str(it.get("fingerprint")))
    if not groups:
        return None
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    by, of, key, value, win = order[0]
    n = len(groups[order[0]])
    scope = (f"{of} was calibrated on {key} {win}" if by == "calibration"
             else f"the tolerance for {of} holds on {key} {win}")
    text = f"{n} key{'s' if n != 1 else ''} measured on {key} {value}; {scope}"
    rest = set().union(*(groups[g] for g in order[1:])) - groups[order[0]] if len(order) > 1 else set()
    if rest:
        text += f" (and {len(rest)} more key{'s' if len(rest) != 1 else ''} on another stack)"
    return text


def summary_text(items: list[dict[str, Any]], limit: int = 6) -> list[str]:
    """The lines `xfid check` prints on rows measured outside their stack (none when there are none)."""
    from xfid.textsafe import terminal

    if not items:
        return []
    held = sum(1 for it in items if it["held"])
    filed = sum(1 for it in items if it["kind"] in ("over_tolerance", "uncertain", "bound_violation", "config_mismatch"))
    lines = [f"  stack changed: {len(items)} row(s) measured outside the stack of their calibration or tolerance rule; "
             f"{held} held (within [tracker] stack_factor x tolerance, not filed), {filed} beyond it"]
    head = headline(items)
    if head:
        lines.append("    " + terminal(head))
    for it in items[:limit]:
        lines.append(terminal(f"    {it['kind']}: {it['target']}/{it['workload']}/{it['op'] or '(end-to-end)'} "
                              f"{it['metric']}/{it['stat']} {it['candidate']}->{it['reference']}: {it['text']}"))
    if len(items) > limit:
        lines.append(f"    ... (+{len(items) - limit} more)")
    return lines


def issue_entries(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For `xfid issues show`: the checks where the issue's key was measured outside its stack
    (from `xfid.drift.history.key_history`), with the kind it got and the changes."""
    out = []
    for p in series:
        ch = parse(p.get(STACK_CHANGED))
        if ch:
            out.append({"check_id": p["check_id"], "kind": p.get("kind"), "rel_error": p.get("rel_error"),
                        "held": p.get("kind") == STACK_CHANGED, "changes": ch, "text": describe(ch)})
    return out
