"""The probe's output: raw per-op values buffered at op exit, encoded to JSON lines in batches.

An op's exit only appends the finished `Probe` to `_PENDING`; its line is built (by hand, the
same text `json.dumps` of the record would give) and written when the buffer is flushed:

- when an op exits more than `FLUSH_S` seconds after the last flush (so in a steady run a
  line reaches the file about `FLUSH_S` after its op at most),
- at once when an op raised (so a failing op and everything before it is on disk before the
  exception propagates, even if the simulator dies next),
- when cocotb shuts down (end of the regression, also after a failing test) and at interpreter
  exit, and whenever `flush()` is called.

A simulator killed hard (SIGKILL, out of memory, a segfault, os._exit) loses the ops since
the last flush: in a steady run its last `FLUSH_S` seconds' worth, or all ops since the last
one that flushed if it hangs after them; every op before that is in the file (the old code,
a buffered text file flushed every `FLUSH_S`, lost the same).
"""

from __future__ import annotations

import atexit
import json
import time
from pathlib import Path
from typing import Any

FLUSH_S = 0.25
"""Records reach the file at most this long after their op (and always at exit)."""
FLUSH_OPS = 4096
"""... or after this many buffered ops, whichever comes first (bounds memory)."""

_PENDING: list[Any] = []
_FILES: dict[str, Any] = {}
_LAST_FLUSH = [0.0]
_HOOKED = [False]


def _add(now: float) -> None:
    """Flush for a probe's exit that found a flush due (failed op, old or big buffer, first op)."""
    if not _HOOKED[0]:
        _hook_shutdown()
    flush()
    _LAST_FLUSH[0] = now


def _hook_shutdown() -> None:
    """Flush when cocotb shuts down (before the simulator finalizes), besides atexit."""
    _HOOKED[0] = True
    try:
        from cocotb import _shutdown

        _shutdown.register(flush)
    except (ImportError, AttributeError):  # cocotb internals moved: atexit still flushes
        pass


def flush() -> None:
    """Encode the buffered ops and write them to their files (unbuffered: in the OS after this)."""
    if _PENDING:
        batch = _PENDING[:]
        _PENDING.clear()
        by_out: dict[str, list[str]] = {}
        for p in batch:
            try:
                line = _line(p)
            except Exception:  # never lose the batch over one odd value: the record, key order aside
                line = json.dumps(p.record, default=str)
            by_out.setdefault(p._s.out_key, []).append(line)
        for key, lines in by_out.items():
            f, data = _writer(key), memoryview(("\n".join(lines) + "\n").encode("utf-8"))
            while data:  # a raw write may be partial
                n = f.write(data)
                if not n:
                    raise OSError(f"{key}: could not write the probe's records")
                data = data[n:]


def _writer(key: str) -> Any:
    """An unbuffered append-mode file kept open for the process: one write() call per flush."""
    f = _FILES.get(key)
    if f is None or f.closed:
        path = Path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        f = _FILES[key] = open(path, "ab", buffering=0)  # noqa: SIM115 - closed at exit
    return f


@atexit.register
def _close_all() -> None:
    flush()
    for f in _FILES.values():
        f.close()
    _FILES.clear()


_FORMAT_JSON: list[str] = []
_STR_JSON: dict[str, str] = {}
_KEYS_JSON: dict[tuple[Any, ...], tuple[str, ...] | None] = {}
_STAMPS: dict[int, str] = {}
_SIMPLE = (int, str, float, type(None))


def _str_json(s: Any) -> str:
    """json.dumps of a value that repeats (op names, cycles_from), cached."""
    try:
        hit = _STR_JSON.get(s)
    except TypeError:  # unhashable
        return json.dumps(s, default=str)
    if hit is None:
        hit = json.dumps(s, default=str)
        if len(_STR_JSON) < 10_000:
            _STR_JSON[s] = hit
    return hit


def _num(v: Any) -> str:
    """json.dumps of a number: ints and finite floats without the encoder call."""
    t = type(v)
    if t is int:
        return str(v)
    if t is float and v - v == 0.0:  # finite (json writes NaN/Infinity itself)
        return repr(v)
    return json.dumps(v, default=str)


def _dict_json(d: dict[Any, Any]) -> str:
    """json.dumps(d, default=str), fast when keys are str and values plain ints (counters)."""
    if not d:
        return "{}"
    keys = tuple(d)
    enc = _KEYS_JSON.get(keys, ())
    if enc == ():
        enc = tuple(json.dumps(k) for k in keys) if all(type(k) is str for k in keys) else None
        if len(_KEYS_JSON) < 1000:
            _KEYS_JSON[keys] = enc
    if enc is None:
        return json.dumps(d, default=str)
    vals = tuple(d.values())
    for v in vals:
        if type(v) is not int:
            return json.dumps(d, default=str)
    return "{" + ", ".join([f"{k}: {v}" for k, v in zip(enc, vals, strict=True)]) + "}"


def frozen_extra(extra: dict[str, Any]) -> dict[str, Any] | str:
    """What to keep of `extra` at op exit: a copy if its values are immutable scalars, else its JSON.

    Encoding later is then safe even if the testbench mutates its dict or lists afterwards.
    """
    for v in extra.values():
        if type(v) not in _SIMPLE and type(v) is not bool:
            return json.dumps(extra, default=str)
    return dict(extra)


def _stamp(t: float) -> str:
    """The record's `time` (UTC, seconds), cached per second."""
    s = int(t)
    hit = _STAMPS.get(s)
    if hit is None:
        if len(_STAMPS) > 1000:
            _STAMPS.clear()
        hit = _STAMPS[s] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    return hit


_TEMPLATES: dict[tuple[Any, ...], tuple[str, str]] = {}


def _line(p: Any) -> str:
    """The JSON line of a finished probe: json.dumps(record), same keys in the same order.

    A passed op whose values are plain ints fills a %-template made once per (setup, test,
    counter names); anything else goes through `_line_general`.
    """
    counts = p._counts
    extra = p._extra
    if p._error is None and type(p._cycles) is int and type(p._dt_ps) is int:
        # counter deltas are exact ints by construction (every reader returns int(...))
        key = (p._s, p._test[1], tuple(counts))
        tpl = _TEMPLATES.get(key)
        if tpl is None:
            tpl = _template(p)
            if len(_TEMPLATES) > 1000:
                _TEMPLATES.clear()
            _TEMPLATES[key] = tpl
        extra_json = "{}" if extra is None else extra if type(extra) is str else _dict_json(extra)
        return tpl[0] % (_str_json(p.op), p._cycles, p._dt_ps, *counts.values(), extra_json,
                         repr(round(p._now - p._wall0, 6)), _stamp(p._time)) + tpl[1]
    return _line_general(p)


def _template(p: Any) -> tuple[str, str]:
    """A passed op's line as a %-template with one slot per op value, and the fixed rest."""
    if not _FORMAT_JSON:
        from rtl_hooks._support import FORMAT

        _FORMAT_JSON.append(json.dumps(FORMAT))

    def esc(text: str) -> str:
        return text.replace("%", "%%")

    counts = ", ".join(f"{esc(json.dumps(k))}: %d" for k in p._counts)
    head = (f'{{"format": {esc(_FORMAT_JSON[0])}, "op": %s, "passed": true, "error": null, "cycles": %d, '
            f'"cycles_from": {esc(json.dumps(p._s.how))}, "sim_time_ps": %d, "counters": {{{counts}}}, '
            f'"extra": %s, "wall_s": %s, "time": "%s", ')
    return head, p._test[1][1:-1] + ", " + p._s.static_part()[1][1:]


def _line_general(p: Any) -> str:
    """The same line for any values (failed ops, None cycles, non-int counters), field by field."""
    if not _FORMAT_JSON:
        from rtl_hooks._support import FORMAT

        _FORMAT_JSON.append(json.dumps(FORMAT))
    err = p._error
    extra = p._extra
    extra_json = "{}" if extra is None else extra if isinstance(extra, str) else _dict_json(extra)
    dynamic = (
        f'{{"format": {_FORMAT_JSON[0]}, "op": {_str_json(p.op)}, '
        f'"passed": {"true" if err is None else "false"}, "error": {"null" if err is None else json.dumps(err)}, '
        f'"cycles": {"null" if p._cycles is None else _num(p._cycles)}, "cycles_from": {_str_json(p._s.how)}, '
        f'"sim_time_ps": {_num(p._dt_ps)}, "counters": {_dict_json(p._counts)}, "extra": {extra_json}, '
        f'"wall_s": {_num(round(p._now - p._wall0, 6))}, "time": {json.dumps(_stamp(p._time))}'
    )
    return dynamic + ", " + p._test[1][1:-1] + ", " + p._s.static_part()[1][1:]
