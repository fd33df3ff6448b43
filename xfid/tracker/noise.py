"""Noise-aware verdicts: a seeded bootstrap interval for a key's relative error from its repeats.

A key has repeats when the run the engine chose holds several records of it on one side or
both (duplicates in one run: `candidate_n` / `reference_n` > 1). The engine's value of a side
is the median of those records; the interval resamples each side's records with replacement,
takes each resample's median, and reads the relative error of every resample as
`(1 + e) * (m_c* / m_c) / (m_r* / m_r) - 1`, where `e` is the engine's error and `m` the medians
(ratios, so unit conversions by the engine cancel). The interval is the central `level` fraction
of those errors (percentile bootstrap). With up to EXACT_MAX repeats on every side that has them,
that fraction is read from the exact bootstrap distribution (every possible resample, weighed
by how many draws give it); with more, from `resamples` draws of a generator seeded by `seed` and
the key's fingerprint. Either way the same data give the same interval whatever else the check
holds. With two or three repeats a 95% interval is their range.

Verdicts (`kind`): `over_tolerance` only when the interval lies beyond the tolerance
(low > tol or high < -tol); `uncertain` when it straddles +-tol; `ok` when it lies within.
Keys without repeats keep the engine's point verdict (`noise` says "point: no repeats").

A row's interval is a function of its two sides' repeats (in order), its error, its key's seed
and the settings only: `interval_key` hashes those, a check writes the hash beside the interval
(`noise_key`), and the next check takes the interval of a row with the same hash from the
check before it (`KnownIntervals`) instead of drawing its resamples again.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xfid.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config
    from xfid.engine import Correlation
    from xfid.store import Store

UNCERTAIN = "uncertain"
NOISE_KEY = "noise_key"
"""Row column: `interval_key` of what the row's interval was computed from (None without one)."""
NOISE_COLUMNS = ("rel_error_low", "rel_error_high", "noise", NOISE_KEY)
"""Row columns added by `attach`: the interval (None without repeats), how the verdict was made,
and the hash of the interval's inputs."""
POINT = "point: no repeats"
RESOLVE_AFTER = 2
"""The default of `[tracker] resolve_after`: clean checks in a row that resolve an issue."""

Repeats = Callable[[dict[str, Any]], "tuple[np.ndarray, np.ndarray] | str | None"]
"""A row -> (candidate values, reference values) of its repeats, a reason text, or None (no repeats).
It is given the row's REPEATS_INPUT fields."""
REPEATS_INPUT = ("target", "workload", "op", "metric", "stat", "candidate", "reference", "candidate_run",
                 "reference_run", "candidate_n", "reference_n", "note", "rel_error", "tolerance")
"""The row fields `attach_rows` reads of a row with repeats and gives its Repeats lookup (the key,
both sides' fidelity, run and count, the notes, the error and tolerance; with the fingerprint's
fields, xfid.engine.schema.FINGERPRINT_FIELDS, which they include)."""


@dataclass(frozen=True)
class NoiseSettings:
    """`[tracker]` keys of the noise-aware rules, with their defaults."""

    level: float = 0.95  # noise_level: central fraction of the bootstrap distribution
    resamples: int = 2000  # noise_resamples: draws, where a side has more than EXACT_MAX repeats
    seed: int = 0  # noise_seed: of those draws
    confirm_after: int = 2  # uncertain-or-worse checks in a row before an uncertain key is filed
    hysteresis: float = 0.2  # a clean check needs |error| (whole interval) <= tol * (1 - hysteresis)

    @classmethod
    def from_config(cls, section: dict[str, Any], where: str = "xfid.toml") -> NoiseSettings:
        """Raises ConfigError for a value out of range (the checks of xfid.config admit its type)."""
        s = cls(**{k: section[n] for k, n in _KEYS.items() if n in section})
        if not 0 < s.level < 1:
            raise ConfigError(f"{where}: [tracker] noise_level must be between 0 and 1 (e.g. 0.95), got {s.level!r}")
        if not 0 <= s.hysteresis < 1:
            raise ConfigError(f"{where}: [tracker] hysteresis must be a fraction of the tolerance in [0, 1) "
                              f"(e.g. 0.2), got {s.hysteresis!r}")
        return s


_KEYS = {"level": "noise_level", "resamples": "noise_resamples", "seed": "noise_seed",
         "confirm_after": "confirm_after", "hysteresis": "hysteresis"}


def _key_seed(fingerprint: Any) -> int:
    text = str(fingerprint or "")
    try:
        return int(text[:15], 16)
    except ValueError:
        return sum(ord(c) * 31 ** i for i, c in enumerate(text[:24])) % (1 << 60)


POWERS = (1.0, -1.0)
"""Each side's power in a key's error: the candidate's median multiplies it, the reference's divides."""


EXACT_MAX = 5
"""Up to this many repeats on every side that has repeats, a key's interval is read from the exact
bootstrap distribution (each side's n ** n equally likely resamples, at most 3,125) instead of
from seeded draws: the limit the draws' percentiles settle on, without their sampling noise and
without drawing. Beyond, a side's resamples are too many to weigh one by one."""


def interval(cand: np.ndarray, ref: np.ndarray, rel: float, *, fingerprint: Any = "",
             settings: NoiseSettings = NoiseSettings()) -> tuple[float, float]:
    """The bootstrap interval (low, high) of a relative error `rel` from each side's repeats.

    A side with one value contributes no spread. Up to EXACT_MAX repeats on every side with
    repeats: the exact distribution (`exact_interval`); more on a side: `settings.resamples`
    draws of a generator seeded by `settings.seed` and the key's fingerprint. Deterministic for
    the same inputs.
    """
    sides = _sides(cand, ref)
    if all(len(v) <= EXACT_MAX for v, _ in sides):
        return exact_interval(sides, rel, settings.level)
    rng = np.random.default_rng([settings.seed, _key_seed(fingerprint)])
    factor = np.full(settings.resamples, 1.0 + rel)
    for values, power in sides:
        med = float(np.median(values))
        draws = values[rng.integers(0, len(values), (settings.resamples, len(values)))]
        factor *= (np.median(draws, axis=1) / med) ** power
    low, high = np.quantile(factor - 1.0, [(1 - settings.level) / 2, (1 + settings.level) / 2])
    return float(low), float(high)


def _sides(cand: Any, ref: Any) -> list[tuple[np.ndarray, float]]:
    """A key's sides with repeats: each side's finite values and its power (POWERS), the sides
    with fewer than two finite values left out (they contribute no spread)."""
    sides = [(v[np.isfinite(v)], power) for v, power in zip((np.asarray(cand, float), np.asarray(ref, float)),
                                                             POWERS, strict=True)]
    return [(v, power) for v, power in sides if len(v) >= 2]


def exact_interval(sides: list[tuple[np.ndarray, float]], rel: float, level: float) -> tuple[float, float]:
    """The central `level` of the exact bootstrap distribution of the error, plainly: every
    possible resample of each side (`sides`: its finite repeats and power, 1.0 candidate, -1.0
    reference) with np.median of the values it draws; the error of every combination of the
    sides' medians, weighed by how many resamples give them; each quantile q the lowest error
    whose cumulated weight reaches q of the whole (the inverted distribution, where ever more
    draws' percentiles settle). NaN where an error is NaN (a zero median), as the draws give."""
    errors, weights = np.array([1.0 + rel]), np.ones(1, np.int64)
    for values, power in sides:
        n = len(values)
        draws = np.array(list(itertools.product(range(n), repeat=n)))  # every resample, equally likely
        steps, counts = np.unique((np.median(values[draws], axis=1) / np.median(values)) ** power,
                                  return_counts=True)
        errors = (errors[:, None] * steps[None, :]).ravel()
        weights = (weights[:, None] * counts[None, :]).ravel()
    errors = errors - 1.0
    if np.isnan(errors).any():
        return float("nan"), float("nan")
    order = np.argsort(errors, kind="stable")
    cum = np.cumsum(weights[order])
    low, high = (float(errors[order][np.searchsorted(cum, q * cum[-1])]) for q in ((1 - level) / 2, (1 + level) / 2))
    return low, high


INTERVAL_VERSION = b"xfid-interval/2"
"""Part of every `interval_key`: changed whenever `interval()` would give other numbers for the
same inputs, so that no interval of an older xfid is taken for a newer one's."""


def interval_key(cand: np.ndarray, ref: np.ndarray, rel: float, fingerprint: Any,
                 settings: NoiseSettings) -> str:
    """A hash (32 hex digits) of everything `interval(cand, ref, rel, fingerprint=..., settings=...)`
    depends on: both sides' values as float64 bytes in their order (the draws pick by position),
    the error's bytes, the key's seed and the settings. Equal keys, equal intervals."""
    import hashlib
    import struct

    a, b = np.ascontiguousarray(cand, "<f8"), np.ascontiguousarray(ref, "<f8")
    head = struct.pack("<qQqdqqd", settings.seed, _key_seed(fingerprint), settings.resamples, settings.level,
                       len(a), len(b), rel)
    return hashlib.sha256(INTERVAL_VERSION + head + a.tobytes() + b.tobytes()).hexdigest()[:32]


class KnownIntervals:
    """Intervals already computed, by `interval_key`: the last check's, and those this check
    computes as it goes (`add`: a check reads some of its rows more than once; xfid.tracker.chunks).
    Held as sorted arrays, found by a binary search."""

    def __init__(self, rows: Callable[[], Iterable[pd.DataFrame]] | None = None) -> None:
        """`rows`: where the known intervals are, read when the table is first needed (a check
        without repeats never reads them): see `add_rows`."""
        self._keys = np.empty(0, "S32")  # bytes, sorted, unique
        self._low = np.empty(0)
        self._high = np.empty(0)
        self._added: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # merged when next read
        self._rows = rows

    @classmethod
    def of(cls, frames: Iterable[pd.DataFrame]) -> KnownIntervals:
        """From rows at once (see `add_rows`)."""
        known = cls()
        known.add_rows(frames)
        return known

    def add_rows(self, frames: Iterable[pd.DataFrame]) -> None:
        """Know the intervals of rows (frames with NOISE_KEY, rel_error_low, rel_error_high; rows
        without a key left out)."""
        import pandas as pd

        for f in frames:
            if NOISE_KEY not in f.columns or not len(f):
                continue
            has = f[NOISE_KEY].notna().to_numpy()
            if has.any():
                self.add(f[NOISE_KEY].to_numpy(object)[has],
                          pd.to_numeric(f["rel_error_low"], errors="coerce").to_numpy(np.float64)[has],
                          pd.to_numeric(f["rel_error_high"], errors="coerce").to_numpy(np.float64)[has])

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def keys(self) -> np.ndarray:
        self._merge()
        return self._keys

    @property
    def low(self) -> np.ndarray:
        self._merge()
        return self._low

    @property
    def high(self) -> np.ndarray:
        self._merge()
        return self._high

    def add(self, keys: Any, low: Any, high: Any) -> None:
        """Know these intervals too (a key already known keeps its interval: equal keys, equal
        intervals). Merged into the sorted table when it is next read (a check that reads its rows
        once never pays for the sort)."""
        if len(keys):
            self._added.append((np.asarray(keys, "S32"), np.asarray(low, np.float64), np.asarray(high, np.float64)))

    def _merge(self) -> None:
        if self._rows is not None:
            rows, self._rows = self._rows, None
            self.add_rows(rows())
        if not self._added:
            return
        keys, low, high = (np.concatenate(parts) for parts in
                           zip((self._keys, self._low, self._high), *self._added, strict=True))
        self._added = []
        self._keys, first = np.unique(keys, return_index=True)
        self._low, self._high = low[first], high[first]

    def find(self, keys: Any) -> np.ndarray:
        """Each key's position in this table (`keys`, `low`, `high`), -1 where it is not known."""
        want = np.array(keys, "S32")
        table = self.keys
        if not len(table):
            return np.full(len(want), -1)
        at = np.searchsorted(table, want).clip(0, len(table) - 1)
        return np.where(table[at] == want, at, -1)


INTERVAL_BATCH = 64
"""Most keys whose draws `intervals` holds at once (256 keys x 2,000 resamples x their repeats)."""
PICKS_MAX = 1 << 22
"""Most picks (resamples x repeats, over a batch's keys) of one side a batch draws at once, 32 MB:
keys with many repeats (a kernel timed a thousand times in one run) go a few at a time."""
TABLE_MAX = 4096
"""Up to this many possible draws of one resample (n ** n for n repeats: n <= 5), a draw's median
is read from a table of every possible draw; beyond, from the sorted ranks of its picks."""


def _median_classes(values: np.ndarray, picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For keys' repeats `values` (keys, n; finite) and their resamples' picks (keys, R, n:
    positions drawn with replacement): each resample's class (keys, R) and each class's median
    (keys, classes), so that the median of resample r of key k is `medians[k, classes[k, r]]`,
    the same number np.median gives for `values[k, picks[k, r]]`.

    A resample's median depends only on the ranks of the values it drew (the order is
    monotone): for odd n the middle rank (n classes), for even n the two middle ones (n * n
    classes, the pair's values summed and halved as np.median does)."""
    n = values.shape[1]
    order = np.argsort(values, axis=1, kind="stable")
    ranked = np.take_along_axis(values, order, axis=1)  # each key's values, sorted
    rank = np.argsort(order, axis=1)  # position -> rank
    medians = _class_medians(ranked)
    if n ** n <= TABLE_MAX:  # a resample's draw is a base-n number; its class, from the table of every draw
        table, row = _draw_classes(n)
        place = n ** np.arange(n - 1, -1, -1)  # each pick's place value
        number = picks @ place  # (keys, R)
        number += (row[rank @ place] * n ** n)[:, None]  # into the table's row of each key's order
        return table.ravel()[number], medians
    small = rank.astype(np.int16 if n <= 1 << 15 else np.int64)  # the gathered ranks: a quarter of the memory
    return _classes_of(np.take_along_axis(small[:, None, :], picks, axis=2), n).astype(np.int64), medians


def _class_medians(ranked: np.ndarray) -> np.ndarray:
    """Each median class's value (keys, classes) from each key's sorted repeats `ranked` (keys, n):
    for odd n the value of the middle rank (class = rank), for even n the two middle ones' values
    summed and halved as np.median does (class a * n + b, as `_classes_of` numbers them)."""
    keys, n = ranked.shape
    return ranked if n % 2 else ((ranked[:, :, None] + ranked[:, None, :]) / 2).reshape(keys, n * n)


def _classes_of(ranks: np.ndarray, n: int) -> np.ndarray:
    """(..., n) ranks of the values a resample drew -> the class of its median: the middle rank
    (odd n), the two middle ones as one number (even n)."""
    mid = n // 2
    s = np.partition(ranks, [mid] if n % 2 else [mid - 1, mid], axis=-1)
    return s[..., mid] if n % 2 else s[..., mid - 1].astype(np.int64) * n + s[..., mid]


@functools.cache
def _draw_classes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """For n repeats (n ** n <= TABLE_MAX): the class of every possible draw (a base-n number of
    the n positions drawn) under every order of the repeats, (n!, n ** n), and each order's row
    in it by its ranks read as a base-n number, (n ** n,) (-1: not an order). Each key's ranks
    (position -> rank) are one of the n! orders, so every key of n repeats shares the table."""
    orders = np.array(list(itertools.permutations(range(n))), np.int64)  # position -> rank
    place = n ** np.arange(n - 1, -1, -1)
    digits = np.arange(n ** n)[:, None] // place % n  # (n ** n, n): the positions of each draw
    table = _classes_of(orders[:, digits], n).astype(np.int64)
    row = np.full(n ** n, -1, np.int64)
    row[orders @ place] = np.arange(len(orders))
    table.flags.writeable = row.flags.writeable = False  # shared by every later call
    return table, row


def _lerp_quantile(values: np.ndarray, counts: np.ndarray, q: float, total: int) -> np.ndarray:
    """np.quantile(draws, q, axis=1) (its default linear method) of draws given as distinct
    `values` (keys, classes) with their `counts` (keys, classes; each row sums to `total`): the two
    order statistics numpy interpolates between, read from the cumulated counts, interpolated by
    np.quantile itself on those two numbers (the same weight, so the same rounding). NaN where a
    drawn value is NaN, as numpy gives."""
    virtual = (total - 1) * np.float64(q)
    below = min(int(np.floor(virtual)), total - 1)
    above = min(below + 1, total - 1)
    order = np.argsort(values, axis=1, kind="stable")  # NaN last, as numpy's partition puts them
    ranked = np.take_along_axis(values, order, axis=1)
    cum = np.cumsum(np.take_along_axis(counts, order, axis=1), axis=1)
    pair = np.stack([np.take_along_axis(ranked, np.argmax(cum > k, axis=1)[:, None], axis=1)[:, 0]
                     for k in (below, above)], axis=1)
    out = np.quantile(pair, virtual - np.floor(virtual), axis=1)
    out[(np.isnan(values) & (counts > 0)).any(axis=1)] = np.nan
    return out


THREADS = 2
"""Threads that compute batches of intervals at once: a generator's draws, the sorts and the
arithmetic over a batch's resamples run without the GIL."""


def intervals(items: list[tuple[np.ndarray, np.ndarray, float, Any]],
              settings: NoiseSettings = NoiseSettings()) -> list[tuple[float, float]]:
    """`interval(cand, ref, rel, fingerprint=fp)` of each item (cand, ref, rel, fp), the same
    numbers (tests/test_tracker_noise.py pins them), keys of the same repeat counts together
    (`_shapes`), on THREADS threads: up to EXACT_MAX repeats a side, EXACT_BATCH keys at once
    from their exact distributions (`_exact_batch`); with more, each key still draws from its
    own seeded generator, in the same order, INTERVAL_BATCH keys at once (`_batch_intervals`;
    fewer where their picks would pass PICKS_MAX: only a batch's draws are held by a thread)."""
    from concurrent.futures import ThreadPoolExecutor

    out = np.zeros((len(items), 2))
    batches = []
    for shape, (idx, mats) in _shapes(items).items():
        size = EXACT_BATCH if _exact(shape) else \
            max(1, min(INTERVAL_BATCH, PICKS_MAX // (settings.resamples * max([n for n, _ in shape] or [1]))))
        batches += [(shape, idx[a:a + size], [m[a:a + size] for m in mats]) for a in range(0, len(idx), size)]

    def run(task: tuple[tuple, np.ndarray, list[np.ndarray]]) -> None:
        shape, idx, mats = task
        rel = [items[j][2] for j in idx.tolist()]
        # a zero median makes the ratios infinite or undefined and the interval NaN, as interval()
        # gives, without numpy's warnings (its error state is per thread: set here, in the thread)
        with np.errstate(divide="ignore", invalid="ignore"):
            if _exact(shape):
                low, high = _exact_batch(shape, mats, rel, settings.level)
            else:
                low, high = _batch_intervals(shape, mats, rel, [items[j][3] for j in idx.tolist()], settings)
        out[idx, 0], out[idx, 1] = low, high

    if THREADS > 1 and len(batches) > 1:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(run, batches))
    else:
        for task in batches:
            run(task)
    return list(zip(out[:, 0].tolist(), out[:, 1].tolist(), strict=True))


def _shapes(items: list[tuple[np.ndarray, np.ndarray, float, Any]]) -> dict[tuple, tuple[np.ndarray, list[np.ndarray]]]:
    """The items by shape ((repeats, power) of each side with repeats, after its non-finite
    values are dropped): their positions and, per side with repeats, a (keys, repeats) matrix.
    Items of the same lengths are stacked at once; those with a non-finite value, one by one."""
    found: dict[tuple, tuple[list[np.ndarray], list[list[np.ndarray]]]] = {}

    def add(shape: tuple, idx: np.ndarray, mats: list[np.ndarray]) -> None:
        at, sides = found.setdefault(shape, ([], [[] for _ in shape]))
        at.append(idx)
        for side, m in zip(sides, mats, strict=True):
            side.append(m)

    by_len: dict[tuple[int, int], list[int]] = {}
    for j, (cand, ref, _, _) in enumerate(items):
        by_len.setdefault((len(cand), len(ref)), []).append(j)
    for lens, js in by_len.items():
        idx = np.array(js, np.int64)
        mats = [np.array([items[j][k] for j in js], float).reshape(len(js), n) for k, n in enumerate(lens)]
        finite = np.isfinite(mats[0]).all(axis=1) & np.isfinite(mats[1]).all(axis=1)
        keep = [k for k, n in enumerate(lens) if n >= 2]
        add(tuple((lens[k], POWERS[k]) for k in keep), idx[finite], [mats[k][finite] for k in keep])
        for i in np.flatnonzero(~finite).tolist():
            sides = _sides(mats[0][i], mats[1][i])
            add(tuple((len(v), power) for v, power in sides), idx[i:i + 1], [v[None, :] for v, _ in sides])
    return {shape: (np.concatenate(at), [np.concatenate(side) for side in sides]) for shape, (at, sides) in found.items()}


EXACT_BATCH = 1 << 14
"""Most keys whose exact distributions `intervals` holds at once (at most 100 errors a key)."""


def _exact(shape: tuple) -> bool:
    """Whether keys of this shape ((repeats, power) of each side with repeats) take the exact path."""
    return all(n <= EXACT_MAX for n, _ in shape)


def _exact_batch(shape: tuple, sides: list[np.ndarray], rel: list[float],
                 level: float) -> tuple[np.ndarray, np.ndarray]:
    """`exact_interval` of many keys of one `shape` at once (`sides`: per side with repeats, the
    keys' repeats, (keys, n)), without enumerating resamples: a resample's median is one of a few
    numbers per side, its class (`_median_classes`: the middle rank, or the two middle ones), and
    how many of the n ** n resamples fall in each class is the same for every key of n repeats
    (`_draw_classes`). Each key's errors, one per combination of its sides' classes, are computed
    with exact_interval's operations; the quantiles are read from their cumulated weights."""
    keys = len(rel)
    errors = (1.0 + np.array(rel, float))[:, None]
    weights = np.ones(1, np.int64)
    for values, (n, power) in zip(sides, shape, strict=True):
        medians = _class_medians(np.sort(values, axis=1))
        counts = np.bincount(_draw_classes(n)[0][0], minlength=medians.shape[1])  # resamples per class
        present = np.flatnonzero(counts)  # (even n: a class of two middle ranks in the wrong order has none)
        steps = (medians[:, present] / np.median(values, axis=1)[:, None]) ** power
        errors = (errors[:, :, None] * steps[:, None, :]).reshape(keys, -1)
        weights = (weights[:, None] * counts[present][None, :]).ravel()
    errors = errors - 1.0
    order = np.argsort(errors, axis=1, kind="stable")
    ranked_errors = np.take_along_axis(errors, order, axis=1)
    cum = np.cumsum(weights[order], axis=1)
    rows = np.arange(keys)
    low, high = (ranked_errors[rows, (cum < q * cum[:, -1:]).sum(axis=1)] for q in ((1 - level) / 2, (1 + level) / 2))
    nan = np.isnan(errors).any(axis=1)
    low[nan] = high[nan] = np.nan
    return low, high


def _batch_intervals(shape: tuple, sides: list[np.ndarray], rel: list[float], fps: list[Any],
                     settings: NoiseSettings) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of keys of one `shape` ((repeats, power) of each side with repeats; `sides`:
    per side with repeats, the keys' repeats, (keys, n)), without a median or a quantile over
    every resample: a resample's median is one of a few numbers per side (`_median_classes`), so
    the draws' errors are one of a few per key, each computed once with interval()'s operations;
    the quantiles are read from their counts (`_lerp_quantile`). Where those numbers outnumber
    the draws (many repeats), each draw's error is computed and np.quantile takes them, as
    interval() does."""
    total = settings.resamples
    quantiles = ((1 - settings.level) / 2, (1 + settings.level) / 2)
    rngs = [np.random.default_rng([settings.seed, _key_seed(fp)]) for fp in fps]
    keys = len(rngs)
    drawn = []  # per side: each resample's class, and each class's factor
    for values, (n, power) in zip(sides, shape, strict=True):  # the candidate's draws before the reference's
        picks = np.concatenate([rng.integers(0, n, (total, n)) for rng in rngs]).reshape(keys, total, n)
        classes, medians = _median_classes(values, picks)
        drawn.append((classes, (medians / np.median(values, axis=1)[:, None]) ** power))
    start = (1.0 + np.array(rel, float))[:, None]
    if int(np.prod([step.shape[1] for _, step in drawn])) > total:  # more error values than draws: each draw's
        factor = np.repeat(start, total, axis=1)
        for classes, step in drawn:
            factor *= np.take_along_axis(step, classes, axis=1)
        low, high = np.quantile(factor - 1.0, quantiles, axis=1)
        return low, high
    factor, joint = start, np.zeros((keys, total), np.int64)  # every class combination's factor, each draw's
    for classes, step in drawn:
        factor = (factor[:, :, None] * step[:, None, :]).reshape(keys, -1)
        joint = joint * step.shape[1] + classes
    errors = factor - 1.0
    width = errors.shape[1]
    counts = np.bincount((joint + (np.arange(keys) * width)[:, None]).ravel(),
                         minlength=keys * width).reshape(keys, width)
    low, high = (_lerp_quantile(errors, counts, q, total) for q in quantiles)
    return low, high


def verdict(kind: str, rel: float | None, tol: float | None, low: float | None, high: float | None) -> str:
    """The noise-aware kind of a row whose engine kind is `kind` (only ok / over_tolerance change)."""
    if kind not in ("ok", "over_tolerance") or low is None or high is None or tol is None or rel is None:
        return kind
    if kind == "ok" and abs(rel) > tol:
        return kind  # within by its absolute tolerance: the relative interval does not judge it
    if low > tol or high < -tol:
        return "over_tolerance"
    if -tol <= low and high <= tol:
        return "ok"
    return UNCERTAIN


def verdicts(kind: np.ndarray, rel: np.ndarray, tol: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """`verdict` of each row at once (numbers as float arrays, NaN where verdict is given a NaN;
    none missing), an object array of kinds."""
    kind = np.asarray(kind, dtype=object)
    with np.errstate(invalid="ignore"):
        stays = ~np.isin(kind, ["ok", "over_tolerance"]) | ((kind == "ok") & (np.abs(rel) > tol))
        over = (low > tol) | (high < -tol)
        inside = (-tol <= low) & (high <= tol)
    judged = np.where(over, "over_tolerance", np.where(inside, "ok", UNCERTAIN)).astype(object)
    return np.where(stays, kind, judged)


CLEAN_INPUT = ("kind", "tolerance", "rel_error", "rel_error_low", "rel_error_high")
"""The row fields `clean` reads (a check reads only these of its ok rows)."""


def clean(row: dict[str, Any], hysteresis: float) -> bool:
    """Whether a row counts towards resolving its issue: ok and its error (its whole interval when
    it has one) within `tol * (1 - hysteresis)`."""
    from xfid.tracker.db import as_float

    if str(row.get("kind")) != "ok":
        return False
    tol, rel = as_float(row.get("tolerance")), as_float(row.get("rel_error"))
    if tol is None or rel is None or abs(rel) > tol:
        return True  # ok by an absolute tolerance or without a relative error: the engine's verdict
    low, high = as_float(row.get("rel_error_low")), as_float(row.get("rel_error_high"))
    worst = max(abs(low), abs(high)) if low is not None and high is not None else abs(rel)
    return worst <= tol * (1 - hysteresis)


def _numbers(rows: pd.DataFrame, c: str) -> np.ndarray:
    """Column `c` as float64, as as_float reads each value: NaN where it is missing or not a
    number (or the column is absent), infinities kept."""
    import pandas as pd

    if c not in rows.columns:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[c].astype(object), errors="coerce").to_numpy(np.float64, na_value=np.nan)


def clean_rows(rows: pd.DataFrame, hysteresis: float) -> np.ndarray:
    """`clean(row, hysteresis)` of every row of a frame at once (its CLEAN_INPUT columns; a
    missing column reads as None): a missing or non-numeric number as as_float reads it (None),
    infinities kept."""
    kind = rows[CLEAN_INPUT[0]].astype(str).to_numpy() if CLEAN_INPUT[0] in rows.columns else np.full(len(rows), "")
    tol, rel, low, high = (_numbers(rows, c) for c in CLEAN_INPUT[1:])  # tolerance, rel_error, the interval
    with np.errstate(invalid="ignore"):
        engine = np.isnan(tol) | np.isnan(rel) | (np.abs(rel) > tol)  # the engine's verdict stands
        worst = np.where(np.isnan(low) | np.isnan(high), np.abs(rel), np.maximum(np.abs(low), np.abs(high)))
        return (kind == "ok") & (engine | (worst <= tol * (1 - hysteresis)))


def attach(corr: Correlation, repeats: Repeats, settings: NoiseSettings = NoiseSettings(),
           known: KnownIntervals | None = None) -> int:
    """Add NOISE_COLUMNS to `corr.rows` and set the noise-aware kind; rebuild the discrepancies.

    Returns the number of rows that got an interval.
    """
    rows = corr.rows
    if rows is None or not len(rows):
        return 0
    corr.rows, done = attach_rows(rows, repeats, settings, known)
    corr.discrepancies = _discrepancies(corr.rows, corr.discrepancies)
    return done


def attach_rows(rows: pd.DataFrame, repeats: Repeats, settings: NoiseSettings = NoiseSettings(),
                known: KnownIntervals | None = None) -> tuple[pd.DataFrame, int]:
    """`rows` (a copy) with NOISE_COLUMNS and the noise-aware kind, and the number of rows that
    got an interval. Each row is judged on its own (a check's rows may come in chunks). An
    interval whose `interval_key` is in `known` is taken from there (the same numbers: the key
    holds everything the interval is computed from); the others are computed (`intervals`)."""
    import pandas as pd

    from xfid.engine.fingerprints import fingerprint
    from xfid.engine.schema import FINGERPRINT_FIELDS

    kinds = rows["kind"].astype(object).to_numpy(copy=True)
    low = np.full(len(rows), np.nan)
    high = np.full(len(rows), np.nan)
    how = np.full(len(rows), POINT, dtype=object)
    fps = rows["fingerprint"].astype(object).to_numpy(copy=True)
    has_n = [c for c in ("candidate_n", "reference_n") if c in rows.columns]
    many = np.zeros(len(rows), bool)
    for col in has_n:
        many |= pd.to_numeric(rows[col], errors="coerce").fillna(0).to_numpy() > 1
    judged = np.flatnonzero(many & np.isin(kinds, ["ok", "over_tolerance"]))
    rel_all, tol_all = (_numbers(rows, c)[judged] for c in ("rel_error", "tolerance"))
    usable = ~(np.isnan(rel_all) | np.isnan(tol_all))  # a missing or non-numeric one, as as_float reads it
    judged, rel_all, tol_all = judged[usable], rel_all[usable], tol_all[usable]
    read = [c for c in dict.fromkeys((*REPEATS_INPUT, *FINGERPRINT_FIELDS)) if c in rows.columns]
    cols = {c: rows[c].iloc[judged].tolist() for c in read}  # what to_dict("records") gives, of these fields
    if hasattr(repeats, "many"):
        answers = repeats.many(cols)  # type: ignore[attr-defined]
    else:
        answers = [repeats(dict(zip(read, values, strict=True))) for values in zip(*cols.values(), strict=True)]
    todo: list[tuple[int, np.ndarray, np.ndarray, float, float]] = []
    for j, (i, got) in enumerate(zip(judged.tolist(), answers, strict=True)):
        if got is None:
            continue
        if isinstance(got, str):
            how[i] = f"point: {got}"
            continue
        if fps[i] is None:
            fps[i] = fingerprint(*(str(cols[k][j]) for k in FINGERPRINT_FIELDS))
        todo.append((i, got[0], got[1], float(rel_all[j]), float(tol_all[j])))
    keys = np.array([interval_key(cand, ref, rel, fps[pos], settings) for pos, cand, ref, rel, _ in todo], "S32")
    at = known.find(keys) if known is not None and todo and len(known) else np.full(len(todo), -1)
    ends = np.full((len(todo), 2), np.nan)  # each row's (low, high): the known ones, then the computed
    hit, miss = np.flatnonzero(at >= 0), np.flatnonzero(at < 0)
    if len(hit):
        assert known is not None
        ends[hit, 0], ends[hit, 1] = known.low[at[hit]], known.high[at[hit]]
    found = intervals([(todo[j][1], todo[j][2], todo[j][3], fps[todo[j][0]]) for j in miss], settings)
    ends[miss] = np.array(found, np.float64).reshape(len(miss), 2)
    if known is not None:  # known to this check's later reads of the same rows
        known.add(keys[miss], ends[miss, 0], ends[miss, 1])
    if todo:
        pos = np.array([t[0] for t in todo], np.int64)
        low[pos], high[pos] = ends[:, 0], ends[:, 1]
        @functools.cache
        def told(n_cand: int, n_ref: int, exact: bool) -> str:
            method = "exact" if exact else f"{settings.resamples:,} draws"
            return f"interval: {n_cand} x {n_ref} repeats, {settings.level:.0%}, {method}"

        how[pos] = [told(len(cand), len(ref), _within_exact(cand) and _within_exact(ref))
                    for _, cand, ref, _, _ in todo]
        kinds[pos] = verdicts(kinds[pos], np.array([t[3] for t in todo]), np.array([t[4] for t in todo]),
                              ends[:, 0], ends[:, 1])
    out = rows.copy()
    out["fingerprint"] = fps
    out["kind"] = pd.Categorical(kinds, categories=list(dict.fromkeys([*_kind_names(rows), UNCERTAIN])))
    out["rel_error_low"], out["rel_error_high"], out["noise"] = low, high, how
    out[NOISE_KEY] = _key_column(len(rows), [pos for pos, *_ in todo], keys)
    return out, len(todo)


def _within_exact(values: np.ndarray) -> bool:
    """Whether a side's repeats leave its key on the exact path (at most EXACT_MAX finite values,
    or fewer than two: no spread)."""
    return len(values) <= EXACT_MAX or int(np.isfinite(np.asarray(values, float)).sum()) <= EXACT_MAX


def _key_column(n: int, positions: list[int], keys: np.ndarray) -> Any:
    """The NOISE_KEY column: `keys` (bytes) at `positions`, null elsewhere, held by Arrow (text
    without a Python object per row)."""
    import pandas as pd
    import pyarrow as pa

    data = np.zeros(n, "S32")
    data[positions] = keys
    null = np.ones(n, bool)
    null[positions] = False
    return pd.arrays.ArrowExtensionArray(pa.array(data, pa.binary(), mask=null).cast(pa.large_string()))


def _kind_names(rows: pd.DataFrame) -> list[str]:
    k = rows["kind"]
    return [str(x) for x in k.cat.categories] if hasattr(k, "cat") else sorted({str(x) for x in k})


def _discrepancies(rows: pd.DataFrame, before: pd.DataFrame | None) -> pd.DataFrame:
    """The discrepancies again: rows other than ok, plus missing references if they were listed."""
    keep_missing = before is not None and len(before) and (before["kind"].astype(str) == "missing_reference").any()
    k = rows["kind"].astype(str)
    mask = (k != "ok") & ((k != "missing_reference") | bool(keep_missing))
    out = rows[mask].copy()
    sev = out["severity"].astype(float).fillna(-1.0) if "severity" in out else None
    if sev is not None:
        out = out.assign(_s=sev).sort_values("_s", ascending=False, kind="stable").drop(columns="_s")
    return out.reset_index(drop=True)


def store_repeats(store: Store, config: Config, rows: pd.DataFrame) -> Repeats:
    """Repeats read back from the store: the records of each side's chosen run for the row's key
    (after the op maps). A row whose records cannot be matched one for one with the engine's count
    (several raw ops merged, a converted metric) gets a reason instead, and keeps the point rule."""
    targets, runs = repeats_needed(rows)
    return repeats_of(store, config, targets, runs)


KEY_SEP = "\x1f"


def repeats_keys(rows: pd.DataFrame) -> set[str]:
    """The (fidelity, target, workload, op, metric, run) of each side of the rows with repeats,
    joined by KEY_SEP: the record groups their lookups read (`repeats_of(keys=...)`)."""
    import pandas as pd

    need = rows[(pd.to_numeric(rows.get("candidate_n"), errors="coerce").fillna(0) > 1)
                | (pd.to_numeric(rows.get("reference_n"), errors="coerce").fillna(0) > 1)]
    if not len(need):
        return set()
    key = None
    for c in ("target", "workload", "op", "metric"):
        text = need[c].astype(object).map(str)
        key = text if key is None else key + KEY_SEP + text
    out: set[str] = set()
    for s in ("candidate", "reference"):
        out.update(need[s].astype(object).map(str) + KEY_SEP + key + KEY_SEP + need[f"{s}_run"].astype(object).map(str))
    return out


def repeats_needed(rows: pd.DataFrame) -> tuple[set[str], set[str]]:
    """The targets and the runs (either side's) of the rows with repeats (n > 1 on a side): what
    `repeats_of` reads. Over a check's chunks, the union of each chunk's."""
    import pandas as pd

    need = rows[(pd.to_numeric(rows.get("candidate_n"), errors="coerce").fillna(0) > 1)
                | (pd.to_numeric(rows.get("reference_n"), errors="coerce").fillna(0) > 1)]
    if not len(need):
        return set(), set()
    runs = {str(x) for c in ("candidate_run", "reference_run") for x in need[c].dropna().unique()}
    return {str(x) for x in need["target"].unique()}, runs


def repeats_of(store: Store, config: Config, targets: set[str], runs: set[str],
               keys: set[str] | None = None) -> Repeats:
    """The repeats lookup of `store_repeats` for rows of these targets and runs (read once);
    `keys` (`repeats_keys` of the rows): only the records of these keys are kept (the lookup of
    the rows' keys is the same, its memory bounded by the rows with repeats, not the store)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from xfid.engine.keys import encode, raw_codes
    from xfid.engine.opmap import apply_op_maps
    from xfid.engine.selection import load

    if not targets:
        return lambda r: None
    table = load(store, targets=sorted(targets), runs=sorted(runs), columns=(*GROUP_COLUMNS, "value", "source"))
    if not table.num_rows:
        return lambda r: "the repeats' records are not in the store"
    src, src_names = raw_codes(table.column("source"))
    o_raw, raw_names = encode(table.column("op"))
    o, on, _, _ = apply_op_maps(src, src_names, o_raw, raw_names, config.op_maps)
    if keys is not None:  # the records of the keys looked up (their order kept: the bootstrap draws by position)
        ops = pa.array(np.asarray(on, dtype=object), pa.string()).take(pa.array(o))
        cols = [table.column(c).cast("string") for c in ("fidelity", "target", "workload")]
        joined = pc.binary_join_element_wise(*cols, ops, *(table.column(c).cast("string") for c in ("metric", "run")),
                                             KEY_SEP)
        mask = pc.fill_null(pc.is_in(joined, value_set=pa_strings(sorted(keys))), False)
        table = table.filter(mask)
        o = np.asarray(o)[mask.to_numpy(zero_copy_only=False)]
    groups = GroupRepeats.of_records(table, np.asarray(o), on)
    del table
    pa.default_memory_pool().release_unused()  # the records read are let go: only the groups stay
    return groups


RAW_OPS_MERGED = "several raw ops merged into the key"
COUNT_MISMATCH = "the repeats' records do not match the engine's count"


GROUP_COLUMNS = ("fidelity", "target", "workload", "op", "metric", "run", "stat")
"""What a group of repeats shares: the side's key (after the op maps), its run, and its stat."""


class GroupRepeats:
    """The Repeats lookup of `repeats_of`: the finite values of the records grouped by
    GROUP_COLUMNS (each group's values in the records' order: the bootstrap draws by position),
    held as arrays (the groups' keys, bounds and sizes, the values in group order), not a Python
    object per group. A side of a row (its fidelity, key, run) finds its records of the row's
    stat; else the one stat of that side whose count is the engine's (a reference aligned through
    value_matches has its own stat, e.g. mean for value). `many` looks up a check's rows at once;
    `__call__` one row (a Repeats)."""

    def __init__(self, codes: list[np.ndarray], names: list[list[str | None]], values: np.ndarray) -> None:
        """`codes`: per GROUP_COLUMNS, each record's code into `names` of that column (a null's
        name None); `values`: each record's value (finite)."""
        from xfid.engine.keys import KeyCoder, run_starts

        self.names = names
        self._index = [{x: i for i, x in enumerate(t) if x is not None} for t in names]
        cards = [len(t) + 1 for t in names]  # a text no record has: one code past the names
        (coder7, key7), (coder6, key6) = KeyCoder.fit(codes, cards), KeyCoder.fit(codes[:-1], cards[:-1])
        self._coders = (coder7, coder6)  # the side's stat varies last
        order = np.argsort(key7, kind="stable")  # the records by group, each group in record order
        sorted7 = key7[order]
        self.starts = run_starts(sorted7)
        self.ends = np.append(self.starts[1:], len(order))
        self.size = self.ends - self.starts
        self.group7, self.group6 = sorted7[self.starts], key6[order][self.starts]  # both sorted
        self.values = np.asarray(values, np.float64)[order]

    @classmethod
    def of_records(cls, table: Any, op: np.ndarray, op_names: list[str]) -> GroupRepeats:
        """From the records in `table` (GROUP_COLUMNS but the op, and value) and `op`, each
        record's code into `op_names` (the op after the op maps); non-finite values left out."""
        import pyarrow as pa

        from xfid.engine.keys import raw_codes

        value = table.column("value").to_numpy(zero_copy_only=False).astype(float)
        keep = np.flatnonzero(np.isfinite(value))
        kept = pa.array(keep)
        codes: list[np.ndarray] = []
        names: list[list[str | None]] = []
        for c in GROUP_COLUMNS:
            texts: list[str | None]
            if c == "op":
                code, texts = np.asarray(op)[keep], list(op_names)
            else:
                code, found = raw_codes(table.column(c).take(kept))
                code = np.where(code < 0, len(found), code)  # null: None, matching no row's text
                texts = [*found, None]
            codes.append(np.asarray(code, np.int64))
            names.append(texts)
        return cls(codes, names, value[keep])

    def __call__(self, r: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | str | None:
        return self.many({k: [r.get(k)] for k in REPEATS_INPUT if k in r})[0]

    def _groups(self, cols: dict[str, list[Any]], rows: list[int], side: str,
                coded: dict[str, np.ndarray]) -> list[np.ndarray | None]:
        """The records of one side of each row in `rows` (None: none with the engine's count);
        `coded`: the rows' codes of the fields already looked up (both sides share the key's)."""
        parts = []
        for c, index, texts in zip(GROUP_COLUMNS, self._index, self.names, strict=True):
            field = {"fidelity": side, "run": f"{side}_run"}.get(c, c)
            if field not in coded:
                values = cols[field]
                coded[field] = np.fromiter((index.get(str(values[j]), len(texts)) for j in rows), np.int64, len(rows))
            parts.append(coded[field])
        (want7, dead7), (want6, dead6) = (coder.encode(p) for coder, p in zip(self._coders, (parts, parts[:-1]),
                                                                              strict=True))
        g7, g6 = self.group7, self.group6
        at = np.searchsorted(g7, want7).clip(0, max(len(g7) - 1, 0))
        exact = (g7[at] == want7) & ~dead7 if len(g7) else np.zeros(len(rows), bool)
        lo = np.where(dead6, 0, np.searchsorted(g6, want6, "left"))
        hi = np.where(dead6, 0, np.searchsorted(g6, want6, "right"))
        counts = cols[f"{side}_n"]
        out: list[np.ndarray | None] = []
        for t, j in enumerate(rows):
            need = int(counts[j])
            g = int(at[t]) if exact[t] and self.size[at[t]] == need else -1
            if g < 0:  # the one stat of the side with the engine's count, if one
                fits = [x for x in range(lo[t], hi[t]) if self.size[x] == need]
                g = fits[0] if len(fits) == 1 else -1
            out.append(None if g < 0 else self.values[self.starts[g]:self.ends[g]])
        return out

    def many(self, cols: dict[str, list[Any]]) -> list[tuple[np.ndarray, np.ndarray] | str | None]:
        """The lookup of each row, the rows given as columns (REPEATS_INPUT, lists of one length)."""
        n = len(cols["target"])
        notes = cols.get("note", [None] * n)
        rest = [j for j, x in enumerate(notes) if not (x and "raw ops" in str(x))]
        coded: dict[str, np.ndarray] = {}
        cand, ref = (self._groups(cols, rest, s, coded) for s in ("candidate", "reference"))
        out: list[tuple[np.ndarray, np.ndarray] | str | None] = [RAW_OPS_MERGED] * n
        for j, c, r in zip(rest, cand, ref, strict=True):
            out[j] = COUNT_MISMATCH if c is None or r is None else (c, r)
        return out


def pa_strings(values: list[str]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.string())

