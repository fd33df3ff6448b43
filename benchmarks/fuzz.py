"""Fuzz adapters, sidecars, config files and compare baselines: every failure must be an XfidError.

For each adapter, seeds are the fixture files it recognises plus hostile specials (deep JSON
nesting, giant integers, huge fields, XML entity bombs). Each input is mutated (bit flips,
truncation, duplicated/deleted/shuffled lines, inserted junk, numbers replaced by extremes)
and read through the adapter and the one normalizer, in a worker process with a CPU-time
alarm and an address-space limit. Outcomes: ok, XfidError (clean), BUG (any other
exception: a traceback a user would see), TIMEOUT, MEMORY.

    python benchmarks/fuzz.py --seconds 180          # per adapter
    python benchmarks/fuzz.py --adapter ncu --seconds 30

Sidecars (`xfid-source.toml`), config files (`xfid.toml`) and compare baselines (snapshot
JSON) are fuzzed in-process (fast: 10k inputs in about a minute each) by `benchmarks/fuzz_inputs.py`:
the seeds are parsed, their values replaced by wrong types and extremes (NaN, inf, negatives,
huge numbers and strings, dates past 9999, nested tables), keys deleted, renamed or added,
and the result written back and sometimes byte-mutated too; a small sample also goes
through the CLI (`xfid --config`, `xfid ingest`, `xfid compare`):

    python benchmarks/fuzz.py --kind config --inputs 10000
    python benchmarks/fuzz.py --kind sidecar --kind baseline --inputs 10000 --cli-sample 100

Folders to ingest (symlink loops, links out of the tree, FIFOs, hostile sidecar options),
Verilog for `rtl inspect`, damaged check files under `report`/`doctor`, and hostile names
through every command's output (benchmarks/fuzz_more.py):

    python benchmarks/fuzz.py --kind tree --kind rtl --kind checkfile --kind names --inputs 10000

`names` runs its inputs in groups of 10 sharing one store; a group with a finding is run again
one input at a time (the `regrouped` column counts those groups), so each BUG names its input.
On a machine with idle cores, split a long run over processes with different seeds (each seed
is its own input stream):

    python benchmarks/fuzz.py --kind checkfile --inputs 5000 --seed 1 &
    python benchmarks/fuzz.py --kind checkfile --inputs 5000 --seed 2 &
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import multiprocessing as mp
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 10
LIMIT_MB = 2048

SPECIALS = {
    "deep_json": "[" * 100_000 + "]" * 100_000,
    "deep_obj": '{"a":' * 5000 + "1" + "}" * 5000,
    "giant_int": '{"request_throughput": 1' + "0" * 50_000 + ', "completed": 1}',
    "huge_field": "a," * 10 + "x" * 5_000_000 + "\n",
    "entity_bomb": ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i else "&lol;" * 10}">' for i in range(10))
                    + ']><testsuites><testsuite name="&lol9;"/></testsuites>'),
    "external_entity": '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><testsuites>&e;</testsuites>',
    "nul_bytes": "\x00" * 1000,
    "bom_only": "\ufeff",
}


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        if not b:
            b = bytearray(rng.randbytes(16))
        if op == 0:  # bit flips
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # truncate
            b = b[: rng.randrange(len(b) + 1)]
        elif op in (2, 3, 4):  # line edits
            lines = bytes(b).split(b"\n")
            i = rng.randrange(len(lines))
            if op == 2:
                lines.insert(i, lines[rng.randrange(len(lines))])
            elif op == 3 and len(lines) > 1:
                del lines[i]
            else:
                rng.shuffle(lines)
            b = bytearray(b"\n".join(lines))
        elif op == 5:  # junk
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.choice([b",", b'"', b"\n", b"n/a", b"[N/A]", b"NaN", b"-1e309", b"\xff\xfe", b"{", b"]]", b"<", b"&"])
        elif op == 6:  # replace a number with an extreme
            text = bytes(b)
            digits = [i for i, c in enumerate(text) if 48 <= c <= 57]
            if digits:
                i = rng.choice(digits)
                b[i:i + 1] = rng.choice([b"99999999999999999999999999", b"-0", b"1e400", b"nan", b"inf", b"-5", b""])
        elif op == 7:  # repeat a chunk
            i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
            b[j:j] = b[i:j] * rng.randint(1, 50)
        else:  # encoding change
            with contextlib.suppress(UnicodeDecodeError):
                b = bytearray(bytes(b).decode("utf-8").encode(rng.choice(["utf-16", "latin-1", "utf-8-sig"]), errors="replace"))
    return bytes(b)


def _worker(adapter: str, path: str, q) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MB * 2**20, LIMIT_MB * 2**20))
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError()))
    signal.alarm(LIMIT_S)
    from xfid.errors import XfidError
    from xfid.ingest import IngestOptions, ingest
    from xfid.store import Store

    try:
        # exactly the user's path: `xfid ingest FILE --adapter NAME --target t --workload w`
        with tempfile.TemporaryDirectory() as d, Store(Path(d) / "s") as store:
            ingest(store, [path], IngestOptions(adapter=adapter, target="t", workload="w", run="r"))
        q.put(("ok", ""))
    except XfidError as e:
        # the ingest safety net names the file but not the line: count it apart from the
        # adapter's own, specific errors
        q.put(("generic" if "could not read this file" in str(e) else "xfid_error", str(e)[:300]))
    except TimeoutError:
        q.put(("TIMEOUT", ""))
    except MemoryError:
        q.put(("MEMORY", ""))
    except BaseException as e:
        q.put(("BUG", f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc()[-1500:]))


def seeds_for(adapter: str) -> list[bytes]:
    from xfid.adapters import sniff_all

    out = []
    for f in sorted((ROOT / "fixtures").rglob("*")):
        if f.is_file() and f.stat().st_size < 2_000_000 and f.suffix not in (".md", ".toml", ".v", ".py"):
            try:
                if adapter in sniff_all(f):
                    out.append(f.read_bytes())
            except OSError:
                pass
    return out


def fuzz(adapter: str, seconds: float, rng: random.Random, tmp: Path) -> collections.Counter:
    seeds = seeds_for(adapter) or [b""]
    specials = [s.encode() for s in SPECIALS.values()]
    counts: collections.Counter = collections.Counter()
    bugs: dict[str, str] = {}
    ctx = mp.get_context("fork")
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        data = specials[i] if i < len(specials) else mutate(rng.choice(seeds), rng)
        i += 1
        p = tmp / f"in-{adapter}{Path('x.json' if data[:1] in (b'{', b'[') else 'x.csv').suffix}"
        p.write_bytes(data)
        q = ctx.Queue()
        proc = ctx.Process(target=_worker, args=(adapter, str(p), q))
        proc.start()
        proc.join(LIMIT_S + 5)
        if proc.is_alive():
            proc.kill()
            proc.join()
            kind, msg = "TIMEOUT", "hung past the alarm"
        else:
            kind, msg = q.get() if not q.empty() else ("MEMORY" if proc.exitcode else "BUG", f"exit {proc.exitcode}")
        counts[kind] += 1
        if kind in ("BUG", "TIMEOUT", "MEMORY", "generic") and msg.split("\n")[0] not in bugs:
            bugs[msg.split("\n")[0]] = msg
            keep = tmp.parent / f"fuzz-{adapter}-{len(bugs)}{p.suffix}"
            keep.write_bytes(data)
            print(f"  {adapter}: {kind}: {msg.splitlines()[0]}  (input kept at {keep})", file=sys.stderr)
    counts["inputs"] = i
    return counts


def run_more_kinds(names: list[str], inputs: int, seed: int) -> int:
    """The folder, Verilog, check-file and names kinds (benchmarks/fuzz_more.py), in this process."""
    from benchmarks.fuzz_inputs import _alarm
    from benchmarks.fuzz_more import run_more

    resource.setrlimit(resource.RLIMIT_AS, (4096 * 2**20, 4096 * 2**20))
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(seed)
    bad = 0
    print(f"{'kind':<10} {'inputs':>7} {'ok':>6} {'XfidError':>10} {'BUG':>5} {'TIMEOUT':>8} {'MEMORY':>7} {'seconds':>8} "
          f"{'regrouped':>9}")
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            c = run_more(n, inputs, rng, Path(d), LIMIT_S, progress=max(1, min(500, inputs // 10)))
            bad += c["BUG"] + c["TIMEOUT"] + c["MEMORY"]
            print(f"{n:<10} {c['inputs']:>7} {c['ok']:>6} {c['xfid_error']:>10} {c['BUG']:>5} {c['TIMEOUT']:>8} "
                  f"{c['MEMORY']:>7} {c['seconds']:>8} {c['regrouped']:>9}", flush=True)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180.0, help="per adapter")
    ap.add_argument("--adapter", action="append")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kind", action="append",
                    choices=("adapters", "sidecar", "config", "baseline", "tree", "rtl", "checkfile", "names"),
                    help="what to fuzz (repeatable; default adapters)")
    ap.add_argument("--inputs", type=int, default=10_000, help="inputs per in-process kind")
    ap.add_argument("--cli-sample", type=int, default=50, help="of those, how many also go through the CLI")
    a = ap.parse_args()
    kinds = a.kind or ["adapters"]
    bad = 0
    sys.path.insert(0, str(ROOT))
    hand = [k for k in kinds if k in ("sidecar", "config", "baseline")]
    if hand:
        from benchmarks.fuzz_inputs import run_kinds

        bad += run_kinds(hand, a.inputs, a.cli_sample, a.seed, mutate)
    more = [k for k in kinds if k in ("tree", "rtl", "checkfile", "names")]
    if more:
        bad += run_more_kinds(more, a.inputs, a.seed)
    if "adapters" not in kinds:
        sys.exit(1 if bad else 0)
    from xfid.adapters import all_adapters

    names = a.adapter or list(all_adapters())
    rng = random.Random(a.seed)
    total: collections.Counter = collections.Counter()
    print(f"{'adapter':<14} {'inputs':>7} {'ok':>6} {'XfidError':>10} {'generic':>8} {'BUG':>5} {'TIMEOUT':>8} {'MEMORY':>7}")
    with tempfile.TemporaryDirectory() as d:
        work = Path(d) / "w"
        work.mkdir()
        for n in names:
            c = fuzz(n, a.seconds, rng, work)
            total.update(c)
            print(f"{n:<14} {c['inputs']:>7} {c['ok']:>6} {c['xfid_error']:>10} {c['generic']:>8} {c['BUG']:>5} "
                  f"{c['TIMEOUT']:>8} {c['MEMORY']:>7}", flush=True)
    print(f"{'total':<14} {total['inputs']:>7} {total['ok']:>6} {total['xfid_error']:>10} {total['generic']:>8} "
          f"{total['BUG']:>5} {total['TIMEOUT']:>8} {total['MEMORY']:>7}")
    print("XfidError: the adapter's own message (file and line); generic: the ingest safety net caught an "
          "unexpected exception and named the file (no line) - each is a place to sharpen an adapter")
    sys.exit(1 if bad + total["BUG"] + total["TIMEOUT"] + total["MEMORY"] else 0)


if __name__ == "__main__":
    main()
