"""A comparison pair and its aligned rows: the data alignment hands to the rows and aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xfid.engine.keys import dense_unique
from xfid.engine.scopes import SCOPE_NAMES

KINDS = ("ok", "over_tolerance", "bound_violation", "config_mismatch", "missing_reference")
OK, OVER, BOUND, MISMATCH, MISSING = range(5)
CONVERSIONS = {"cycles->latency": ("cycles", "latency", "s"), "latency->cycles": ("latency", "cycles", "cycles")}


@dataclass
class Pair:
    """A comparison pair and its per-pair options from `[[compare]]`."""

    candidate: str
    reference: str
    convert: str | None = None
    bounds: str | None = None  # "bound" | "tolerance" (roofline candidates only)
    origin: str = "default"

    @property
    def label(self) -> str:
        return f"{self.candidate}->{self.reference}"


@dataclass
class PairRows:
    """The aligned rows of one pair as arrays (one element per candidate key)."""

    pair: Pair
    cand: np.ndarray  # entry index into Selected
    ref: np.ndarray  # entry index, -1 when missing
    metric: np.ndarray  # metric code after conversion
    unit: np.ndarray  # int code into the units list passed to align_pair
    cand_value: np.ndarray
    ref_value: np.ndarray
    rel: np.ndarray
    log_ratio: np.ndarray
    tol: np.ndarray
    tol_abs: np.ndarray
    within: np.ndarray  # bool (False for missing)
    kind: np.ndarray  # int8 code into KINDS
    severity: np.ndarray
    efficiency: np.ndarray
    note: Notes
    counts: dict[str, Any] = field(default_factory=dict)
    scope: np.ndarray | None = None  # scope code per row (xfid.engine.scopes.SCOPE_NAMES), the candidate's
    factor: np.ndarray | None = None  # how far off, without the kind's rank that severity adds

    def codes(self, name: str) -> np.ndarray:
        """The codes of the coded array `name` (a schema CODE source; the notes' are their ids)."""
        return self.note.ids if name == NOTE else getattr(self, name)


NOTE = "note"
"""PairRows' notes (a Notes: ids into texts), the one coded source that is not an array."""


def code_texts(metrics: Sequence[str], units: Sequence[str], notes: Sequence[str]) -> dict[str, Sequence[str]]:
    """The texts each coded PairRows array (a CODE source in xfid.engine.schema) indexes, by array:
    the selection's metrics, the aligner's unit names, the rows' note texts, and the fixed kinds
    and scopes."""
    return {"metric": metrics, "unit": units, "kind": KINDS, "scope": SCOPE_NAMES, NOTE: notes}


def side_n(n: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The selection's count `n` of the entries `idx` (0 where -1) and where the entry is missing."""
    missing = idx < 0
    return np.where(missing, 0, n[np.maximum(idx, 0)]).astype(np.int64, copy=False), missing


class Notes:
    """Per-row notes as codes into a small list of distinct texts (rows share few notes)."""

    def __init__(self, n: int):
        self.ids = np.zeros(n, np.int32)
        self.texts = [""]
        self._pos = {"": 0}

    def _code(self, text: str) -> int:
        c = self._pos.get(text)
        if c is None:
            c = self._pos[text] = len(self.texts)
            self.texts.append(text)
        return c

    def add(self, idx: np.ndarray, text: Any) -> None:
        """Append `text` (a string or a sequence aligned with idx) to the notes of rows idx."""
        if not len(idx):
            return
        if isinstance(text, str):
            tl: Sequence[str] | np.ndarray = [text]
            tc = np.zeros(len(idx), np.int64)
        else:
            tl, tc = np.unique(np.asarray(text, dtype=object), return_inverse=True)
        combo = self.ids[idx].astype(np.int64) * len(tl) + tc.reshape(-1)
        u, inv = dense_unique(combo)
        new = np.empty(len(u), np.int32)
        for j, c in enumerate(u.tolist()):
            cur, t = self.texts[c // len(tl)], tl[c % len(tl)]
            new[j] = self._code(t if cur == "" else f"{cur}; {t}")
        self.ids[idx] = new[inv.reshape(-1)]
