"""Stable discrepancy identity: a fingerprint of the key and the fidelity pair (the issue tracker keys on it).

This file is also the program of the helper process that hashes part of a large batch
(`python -I fingerprints.py`, `_helper_main`): it imports nothing of xfid, numpy only where used.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

    import numpy as np

CHUNK = 1 << 18
"""Rows whose joined keys are built at once (the joined bytes of 3.7M rows would be ~400 MB)."""
HELPER_MIN = 1 << 20
"""Fewest rows of which a helper process hashes a share. Starting it (interpreter, numpy) took
~0.2 s here and a row ~0.7 us in either process, so half of 1M rows saves ~0.15 s of wall time
on a free core and half of 3.7M ~1.1 s; with no free core the two processes only share one, and
the helper's start is lost (docs/scale.md, "The local engine, measured 2026-12-07 later")."""
HELPER_SHARE = 0.5
"""The share of the rows (the last ones) that the helper process hashes meanwhile."""


def fingerprint(target: str, workload: str, op: str, metric: str, stat: str, candidate: str, reference: str) -> str:
    """16 hex digits, the same on every machine and in every release for the same key."""
    blob = "\x1f".join((target, workload, op, metric, stat, candidate, reference))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def fingerprint_many(parts: list[list[str]], codes: list[object]) -> list[str]:
    """Many fingerprints at once, equal to `fingerprint()` for each row.

    Adjacent fields are pre-joined per distinct combination present (few: e.g. target x
    workload x op, then metric x stat x pair), so each row costs one or two byte joins and a hash.
    Python's sha256 holds the GIL for inputs this short (threads cannot share the work), so
    from HELPER_MIN rows on, with more than one CPU, a helper process (this file run as a
    script) hashes the last HELPER_SHARE of the rows while this process hashes the others (a
    gain only where a core is free: see HELPER_MIN). If the helper cannot be started or fails,
    this process hashes its rows as well.

    Args:
        parts: for each of xfid.engine.schema.FINGERPRINT_FIELDS, the list of its distinct strings.
        codes: for each field, an integer array (one element per row) indexing into parts.
    """
    n = len(codes[0]) if codes else 0  # type: ignore[arg-type]
    split = n - int(n * HELPER_SHARE) if n >= HELPER_MIN and _cpus() > 1 else n
    helper = _start_helper() if split < n else None  # it starts (imports numpy) while the keys are joined
    try:
        tables, invs = _joined(parts, codes)
        if helper is not None and not _send(helper, tables, [inv[split:] for inv in invs]):
            helper = None
        out = _hash_rows(tables, invs, 0, split)
        rest = _helper_result(helper, n - split) if helper is not None else None
        return out + (rest if rest is not None else _hash_rows(tables, invs, split, n))
    finally:
        if helper is not None:  # done, failed or interrupted: never leave it behind
            _stop(helper)


def _joined(parts: list[list[str]], codes: list[object]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The fields joined in groups: per group, the joined bytes of each combination present
    (every group's but the first with its leading separator) and each row's index into them."""
    import numpy as np

    cols = [np.asarray(c) for c in codes]
    tables: list[np.ndarray] = []
    invs: list[np.ndarray] = []
    i = 0
    while i < len(parts):
        # join fields i..j-1 while the combined code space stays small (one key array, in place)
        key, card, j = cols[i].astype(np.int64), max(len(parts[i]), 1), i + 1
        while j < len(parts) and card * max(len(parts[j]), 1) <= GROUP_SPACE:
            key *= max(len(parts[j]), 1)
            key += cols[j]
            card *= max(len(parts[j]), 1)
            j += 1
        uniq, inv = _dense(key, card)
        del key
        tables.append(_combination_texts(parts[i:j], uniq, lead=bool(tables)))
        invs.append(inv)
        i = j
    return tables, invs


def _combination_texts(fields: list[list[str]], combos: np.ndarray, lead: bool) -> np.ndarray:
    """The joined bytes of each combination (a mixed-radix code over the fields' lengths), with a
    leading separator if `lead`: per field, its encoded names taken at the combinations' digits,
    added as object arrays (one bytes add per combination and field, no Python loop per combination)."""
    import numpy as np

    sep = b"\x1f"
    digits = []
    rest = combos.astype(np.int64)
    for names in reversed(fields):
        rest, d = np.divmod(rest, max(len(names), 1))
        digits.append(d)
    out = None
    for k, (names, d) in enumerate(zip(fields, reversed(digits), strict=True)):
        pre = sep if k or lead else b""
        enc = np.empty(len(names), dtype=object)
        enc[:] = [pre + x.encode("utf-8") for x in names]
        out = enc[d] if out is None else out + enc[d]
    assert out is not None
    return out


def _hash_rows(tables: list[np.ndarray], invs: list[np.ndarray], start: int, stop: int) -> list[str]:
    """The fingerprints of rows start..stop-1, CHUNK rows' joined keys at a time (bounded memory)."""
    sha = hashlib.sha256
    out: list[str] = []
    for a in range(start, stop, CHUNK):
        b = min(a + CHUNK, stop)
        blobs = None
        for table, inv in zip(tables, invs, strict=True):
            col = table[inv[a:b]]
            blobs = col if blobs is None else blobs + col
        out += [sha(x).hexdigest()[:16] for x in (blobs.tolist() if blobs is not None else [])]
    return out


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _start_helper() -> subprocess.Popen[bytes] | None:
    """A helper process (see _helper_main), or None if it cannot be started."""
    import subprocess

    # an embedding program (a server binary, a frozen app) is not an interpreter to run a file with
    if not os.path.basename(sys.executable or "").lower().startswith("python") or not os.path.isfile(__file__):
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return None


def _send(proc: subprocess.Popen[bytes], tables: list[np.ndarray], invs: list[np.ndarray]) -> bool:
    """Give the helper its rows; False (and the helper stopped) if it died before reading them."""
    import pickle

    assert proc.stdin is not None
    try:
        with proc.stdin:
            pickle.dump((tables, invs), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:
        _stop(proc)
        return False
    return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the helper if it still runs, reap it and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None and not pipe.closed:
            with contextlib.suppress(OSError):  # a broken pipe's unflushed input
                pipe.close()


def _helper_result(proc: subprocess.Popen[bytes], m: int) -> list[str] | None:
    """The helper's m fingerprints, or None if it failed (the caller then hashes those rows)."""
    import numpy as np
    import pyarrow as pa

    assert proc.stdout is not None
    try:
        with proc.stdout:
            data = proc.stdout.read()
        ok = proc.wait() == 0
    except OSError:
        return None
    if not ok or len(data) != 16 * m:
        return None
    offsets = np.arange(0, 16 * m + 1, 16, dtype=np.int64)
    hexes = pa.Array.from_buffers(pa.large_string(), m, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return hexes.to_numpy(zero_copy_only=False).tolist()


def _helper_main() -> None:
    """The helper process: reads (joined tables, index arrays) from stdin (pickled by
    _start_helper, its parent), hashes every row with _hash_rows and writes each row's 16 hex
    digits to stdout, in row order, once all are done (the parent reads only once its own rows
    are hashed: writing earlier into the full pipe would stop this process until then)."""
    import pickle

    import numpy  # noqa: F401  (imported before the input arrives: the parent is still joining the keys)

    tables, invs = pickle.load(sys.stdin.buffer)
    n = len(invs[0]) if invs else 0
    # each chunk's digits joined at once: ~16 bytes a row held, not a str object a row
    out = b"".join("".join(_hash_rows(tables, invs, a, min(a + CHUNK, n))).encode("ascii")
                   for a in range(0, n, CHUNK))
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()


GROUP_SPACE = 1 << 16
"""Largest code space of one group of joined fields: its present combinations are joined in
Python (at most this many), and each further group costs every row a bytes add."""


def _dense(key: np.ndarray, card: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(key, return_inverse=True) for keys in [0, card): one counting pass, no sort."""
    import numpy as np

    present = np.bincount(key, minlength=card) > 0
    uniq = np.flatnonzero(present)
    lut = np.cumsum(present, dtype=np.int64) - 1
    return uniq, lut.astype(np.int32 if len(uniq) < 1 << 31 else np.int64)[key]


if __name__ == "__main__":
    _helper_main()
