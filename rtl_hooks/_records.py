"""The probe's JSON lines: each finished op encoded by hand to the text `json.dumps` of its record gives.

An op's exit only keeps raw values (rtl_hooks._session buffers the finished probes); the lines
are encoded here in batches, when the session flushes, and appended to their files with one
unbuffered write per file and flush. A passed op whose values are plain ints fills a %-template
made once per (setup, test, counter names); anything else is encoded field by field. Both give
byte for byte what `json.dumps` of the record gives (tests pin it), in the same key order.
The templates cut the probe's cost by more than half: 6.2 us per op against 14.0 us when each line is
`json.dumps(probe.record)` (benchmarks/rtl_probe.py, "probe alone", median of per-run minima,
4 alternating runs; the figures' setting is in the `Probe` docstring).

The memo dicts below map values to their JSON text (op names, counter names, seconds to time
stamps): pure functions, the same in every session, each bounded in size.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rtl_hooks._env import FORMAT


class Part(NamedTuple):
    """A part of the record that repeats over ops (the test's, the setup's): its fields and their JSON."""

    fields: dict[str, Any]
    json: str


def part(fields: dict[str, Any], *, sort_keys: bool = False) -> Part:
    """The fields and their JSON object text (`default=str` for odd values)."""
    return Part(fields, json.dumps(fields, sort_keys=sort_keys, default=str))


def write_batch(batch: list[Any], files: dict[str, Any]) -> None:
    """Encode finished probes and append their lines to their files (in the OS after this).

    `files` maps an output path to its open file; missing ones are opened (append, unbuffered).
    """
    by_out: dict[str, list[str]] = {}
    for p in batch:
        try:
            text = line(p)
        except Exception:  # never lose the batch over one odd value: the record, key order aside
            text = json.dumps(p.record, default=str)
        by_out.setdefault(p._s.out_key, []).append(text)
    for key, lines in by_out.items():
        f = files.get(key)
        if f is None or f.closed:
            path = Path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            f = files[key] = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by the session
        data = memoryview(("\n".join(lines) + "\n").encode("utf-8"))
        while data:  # a raw write may be partial
            n = f.write(data)
            if not n:
                raise OSError(f"{key}: could not write the probe's records")
            data = data[n:]


_FORMAT_JSON = json.dumps(FORMAT)
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


def frozen_extra(extra: Mapping[str, Any]) -> dict[str, Any] | str:
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


def line(p: Any) -> str:
    """The JSON line of a finished probe: json.dumps(record), same keys in the same order.

    A passed op whose values are plain ints fills a %-template made once per (setup, test,
    counter names) and kept on the setup; anything else goes through `line_general`.
    """
    counts = p._counts
    extra = p._extra
    if p._error is None and type(p._cycles) is int and type(p._dt_ps) is int:
        # counter deltas are exact ints by construction (every reader returns int(...))
        templates = p._s.templates
        key = (p._test.json, tuple(counts))
        tpl = templates.get(key)
        if tpl is None:
            tpl = _template(p)
            if len(templates) > 1000:
                templates.clear()
            templates[key] = tpl
        extra_json = "{}" if extra is None else extra if type(extra) is str else _dict_json(extra)
        return tpl[0] % (_str_json(p.op), p._cycles, p._dt_ps, *counts.values(), extra_json,
                         repr(round(p._now - p._wall0, 6)), _stamp(p._time)) + tpl[1]
    return line_general(p)


def _template(p: Any) -> tuple[str, str]:
    """A passed op's line as a %-template with one slot per op value, and the fixed rest."""
    def esc(text: str) -> str:
        return text.replace("%", "%%")

    counts = ", ".join(f"{esc(json.dumps(k))}: %d" for k in p._counts)
    head = (f'{{"format": {esc(_FORMAT_JSON)}, "op": %s, "passed": true, "error": null, "cycles": %d, '
            f'"cycles_from": {esc(json.dumps(p._s.how))}, "sim_time_ps": %d, "counters": {{{counts}}}, '
            f'"extra": %s, "wall_s": %s, "time": "%s", ')
    return head, p._test.json[1:-1] + ", " + p._s.static_part().json[1:]


def line_general(p: Any) -> str:
    """The same line for any values (failed ops, None cycles, non-int counters), field by field."""
    err = p._error
    extra = p._extra
    extra_json = "{}" if extra is None else extra if isinstance(extra, str) else _dict_json(extra)
    dynamic = (
        f'{{"format": {_FORMAT_JSON}, "op": {_str_json(p.op)}, '
        f'"passed": {"true" if err is None else "false"}, "error": {"null" if err is None else json.dumps(err)}, '
        f'"cycles": {"null" if p._cycles is None else _num(p._cycles)}, "cycles_from": {_str_json(p._s.how)}, '
        f'"sim_time_ps": {_num(p._dt_ps)}, "counters": {_dict_json(p._counts)}, "extra": {extra_json}, '
        f'"wall_s": {_num(round(p._now - p._wall0, 6))}, "time": {json.dumps(_stamp(p._time))}'
    )
    return dynamic + ", " + p._test.json[1:-1] + ", " + p._s.static_part().json[1:]
