"""config_mismatch: RTL parameters vs the target's block table, precision/batch that disagree."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from xfid.config import Config
from xfid.engine.keys import combine, raw_codes_at
from xfid.engine.selection import Selected

COMPARED_KEYS = ("precision", "batch")
"""Measurement conditions that must agree when both numbers' config carries them."""


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return str(a) == str(b)


def _block_of(cfg: dict[str, Any], workload: str) -> str | None:
    b = cfg.get("block")
    if b:
        return str(b)
    return workload.split("/", 1)[1] if workload.startswith("block/") else None


class MismatchChecker:
    """Finds rows whose two numbers were produced under different configurations."""

    def __init__(self, table: pa.Table, config: Config, rows: np.ndarray, plans: dict | None = None):
        """`rows`: the records the checks will look at (Selected.rep); codes are read for those
        only and `check` indexes them by entry."""
        if not table.num_rows:
            self.codes, self.raw = np.zeros(0, np.int64), list[str | None]()
        else:
            self.codes, self.raw = raw_codes_at(table.column("config"), rows, plans)
        self.config = config
        self._parsed: dict[int, dict[str, Any]] = {}
        self._relevant = np.array([self._interesting(i) for i in range(len(self.raw))] + [False], bool)

    def parsed(self, code: int) -> dict[str, Any]:
        """The config JSON of one dictionary entry ({} when null or not an object)."""
        if code < 0:
            return {}
        if code not in self._parsed:
            try:
                text = self.raw[code]
                v = json.loads(text) if text else {}
            except ValueError:
                v = {}
            self._parsed[code] = v if isinstance(v, dict) else {}
        return self._parsed[code]

    def _interesting(self, code: int) -> bool:
        text = self.raw[code] or ""
        return any(f'"{k}"' in text for k in ("params", *COMPARED_KEYS))

    def check(self, sel: Selected, ce: np.ndarray, ref: np.ndarray, missing: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """Row indices (into the pair's rows) with a config mismatch, and a note for each."""
        if not len(self.raw) or not len(ce):
            return np.zeros(0, np.int64), []
        cc = self.codes[ce]
        rc = np.where(ref >= 0, self.codes[np.maximum(ref, 0)], -1)
        rel = self._relevant
        look = np.flatnonzero(~missing & (rel[np.where(cc < 0, -1, cc)] | rel[np.where(rc < 0, -1, rc)]))
        if not len(look):
            return np.zeros(0, np.int64), []
        fid_c = sel.fidelities[int(sel.codes["fid"][ce[0]])]
        fid_r = sel.fidelities[int(sel.codes["fid"][ref[look[0]]])]
        t = sel.codes["target"][ce[look]]
        w = sel.codes["workload"][ce[look]]
        combo, _ = combine([cc[look] + 1, rc[look] + 1, t, w],
                           [len(self.raw) + 1, len(self.raw) + 1, len(sel.dims["target"]), len(sel.dims["workload"])])
        _, first, inv = np.unique(combo, return_index=True, return_inverse=True)
        texts: list[str | None] = []
        for i in first:
            texts.append(self._explain(self.parsed(int(cc[look[i]])), self.parsed(int(rc[look[i]])),
                                       fid_c, fid_r, sel.dims["target"][t[i]], sel.dims["workload"][w[i]]))
        bad = np.array([x is not None for x in texts], bool)[inv]
        idx = look[bad]
        return idx, [texts[j] or "" for j in inv[bad]]  # (every text of a bad row is a note)

    def _explain(self, c: dict[str, Any], r: dict[str, Any], fid_c: str, fid_r: str, target: str,
                 workload: str) -> str | None:
        diffs: list[str] = []
        pc, pr = c.get("params"), r.get("params")
        if isinstance(pc, dict) and isinstance(pr, dict):
            for k in sorted(set(pc) & set(pr)):
                if not _same(pc[k], pr[k]):
                    diffs.append(f"{k}: {fid_c}={pc[k]} vs {fid_r}={pr[k]}")
        tgt = self.config.targets.get(target)
        blocks = tgt.extra.get("blocks", {}) if tgt is not None else {}
        for fid, cfg in ((fid_c, c), (fid_r, r)):
            p = cfg.get("params")
            if fid.split("-", 1)[0] != "rtl" or not isinstance(p, dict):
                continue
            block = _block_of(cfg, workload)
            spec = blocks.get(block, {}) if isinstance(blocks, dict) and block else {}
            if not isinstance(spec, dict):
                continue
            for k in sorted(set(p) & set(spec)):
                if not _same(p[k], spec[k]):
                    diffs.append(f"{k}: {fid}={p[k]} vs targets.{target}.blocks.{block}={spec[k]}")
        for k in COMPARED_KEYS:
            if k in c and k in r and not _same(c[k], r[k]):
                diffs.append(f"{k}: {fid_c}={c[k]} vs {fid_r}={r[k]}")
        return "config mismatch: " + ", ".join(diffs) if diffs else None
