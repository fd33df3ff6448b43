"""Fuzz kinds that are not one hand-written file: ingested folders, Verilog for `rtl inspect`,
damaged check files under `report`, and hostile names through every command's output.

Run through `benchmarks/fuzz.py --kind tree|rtl|checkfile|names`. Each input is generated
from a seeded random choice among the hazards a careless or hostile user produces; each is
then run as the command would run it, under a CPU alarm. Outcomes: ok, XfidError (clean),
BUG (any other exception, or — for `tree` — a message that reveals a file outside the tree,
or — for `names` — a raw control or bidi character in the output), TIMEOUT, MEMORY.

- tree: a folder to ingest holding symlink loops, symlinks out of the tree (to a file whose
  content is a marker), FIFOs, sidecars whose `options`/`target` are wrong types, absolute
  paths, `..` paths or symlinks, a results.xml that is a symlink out of the tree.
- rtl: Verilog modules whose parameters are huge shifts, powers, replications, deep
  parentheses, divisions by zero, negative or giant widths, and garbage.
- checkfile: a store with recorded checks whose check files are then truncated, bit-flipped,
  replaced by CSV, by another check's file, or removed; `report` (over a period that holds the
  checks, so that it reads the latest check's file) and `doctor` must say so: doctor exiting 0
  with any check file changed, or report exiting 0 with the latest one changed, is a BUG.
- names: op/workload/run/owner names with terminal escapes, bidi overrides and C1 controls,
  then a random command and format (correlate, calibrate, compare, issues, sources, summary);
  run in groups of 10 inputs per store, and one input at a time again for a group with a finding.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = "XFID-OUTSIDE-MARKER-7f3a"
"""The content of the file outside the tree: an error that quotes it has read outside."""
HOSTILE = ["\x1b]0;owned\x07", "\x1b[2J", "\u202e", "\u2066", "\x85", "\x9b31m", "\r", "\x00", "\x7f", "\u200f",
           "\x1b[1;1H", "\x08\x08", "\x0c"]
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")
HEADER = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"


class Outcome(Exception):
    """A finding that is not an exception of the code under test (a leak, a raw escape)."""


# --- tree ---------------------------------------------------------------------------------

class TreeKind:
    name = "tree"

    def __init__(self, work: Path):
        self.work = work
        self.outside = work / "outside"
        self.outside.mkdir()
        (self.outside / "secret.xml").write_text(f"<testsuites><testsuite name='{MARKER}'/></testsuites>")
        (self.outside / "secret.csv").write_text(HEADER + f"measured,t,{MARKER},op,latency,value,1,us,r,\n")
        (self.outside / "xfid-source.toml").write_text(f'target = "{MARKER}"\n')
        self.n = 0

    def make(self, rng: random.Random) -> Path:
        self.n += 1
        d = self.work / f"t{self.n}"
        d.mkdir()
        (d / "records.csv").write_text(HEADER + "measured,h100-sxm,w1,attn,latency,value,1.5,us,r1,\n")
        sub = d / "sub"
        sub.mkdir()
        for _ in range(rng.randint(1, 5)):
            rng.choice(TREE_HAZARDS)(d, sub, self.outside, rng)
        return d

    def run(self, d: Path) -> None:
        from xfid.errors import XfidError
        from xfid.ingest import IngestOptions, ingest
        from xfid.store import Store

        try:
            with Store(d.parent / f"s{self.n}") as s:
                rep = ingest(s, [d], IngestOptions())
            text = json.dumps([f.path for f in rep.files]) + json.dumps(rep.skipped)
        except XfidError as e:
            text = str(e)
            if MARKER in text:
                raise Outcome(f"LEAK: an error quotes the file outside the tree: {text[:200]}") from None
            raise
        finally:
            shutil.rmtree(d.parent / f"s{self.n}", ignore_errors=True)
        if MARKER in text:
            raise Outcome(f"LEAK: ingest read a file outside the tree: {text[:200]}")

    def done(self, d: Path) -> None:
        shutil.rmtree(d, ignore_errors=True)


def _loop(d: Path, sub: Path, out: Path, rng: random.Random) -> None:
    with contextlib.suppress(OSError):
        (sub / f"loop{rng.randrange(9)}").symlink_to(d if rng.random() < 0.5 else "..")


def _out_link(d: Path, sub: Path, out: Path, rng: random.Random) -> None:
    name = rng.choice(["results.xml", "x.csv", "xfid-source.toml", "linked"])
    target = rng.choice([out / "secret.xml", out / "secret.csv", out / "xfid-source.toml", out, Path("/etc/passwd")])
    with contextlib.suppress(OSError):
        (rng.choice([d, sub]) / name).symlink_to(target)


def _fifo(d: Path, sub: Path, out: Path, rng: random.Random) -> None:
    with contextlib.suppress(OSError):
        os.mkfifo(rng.choice([d, sub]) / f"pipe{rng.randrange(9)}.csv")


def _sidecar(d: Path, sub: Path, out: Path, rng: random.Random) -> None:
    value = rng.choice([5, "/etc/shadow", str(out / "secret.xml"), "../../x.xml", "../outside/secret.xml",
                        "linked", "", "results.xml", True, "[1, 2]", "{ a = 1 }", "1e400", "x" * 5000])
    key = rng.choice(["results", "target", "run", "fidelity", "workload", "adapter"])
    body = rng.choice([
        f"options = {{ {key} = {json.dumps(value)} }}\n" if isinstance(value, str) else f"options = {{ {key} = {value} }}\n",
        f"{key} = {json.dumps(value)}\n" if isinstance(value, str) else f"{key} = {str(value).lower()}\n",
        f'[files."records.csv"]\noptions = {{ results = {json.dumps(str(value))} }}\n',
        'adapter = "cocotb"\noptions = { results = "../outside/secret.xml" }\n',
    ])
    _write(rng.choice([d, sub]) / "xfid-source.toml", body.encode())


def _junk(d: Path, sub: Path, out: Path, rng: random.Random) -> None:
    name = rng.choice(["results.xml", "a.json", "b.csv", "c.parquet", "d.sqlite", "e.nsys-rep"])
    _write(rng.choice([d, sub]) / name, rng.randbytes(rng.randint(0, 300)))


def _write(path: Path, data: bytes) -> None:
    """Write a file of the tree, never through a link placed there earlier (that would change
    the file outside the tree)."""
    if not path.is_symlink() and not path.is_dir():
        path.write_bytes(data)


TREE_HAZARDS = [_loop, _out_link, _fifo, _sidecar, _junk]


# --- rtl ----------------------------------------------------------------------------------

class RtlKind:
    name = "rtl"

    def __init__(self, work: Path):
        self.work = work
        self.seeds = [p.read_text() for p in sorted((ROOT / "fixtures" / "rtl").rglob("*.v"))]
        self.n = 0

    def make(self, rng: random.Random) -> Path:
        self.n += 1
        exprs = [f"1 << {rng.choice([64, 4096, 100_000, 10**9])}", f"2 ** {rng.choice([10, 5000, 10**6])}",
                 "(" * rng.choice([10, 500, 5000]) + "1" + ")" * rng.choice([10, 500, 5000]),
                 "8 / 0", "8 % 0", "-1", f"{rng.choice([1, 10**5, 10**30])} * W", "W - 100", "$clog2(1 << 200)",
                 "{4096{1'b1}}", "32'hFFFF_FFFF + 1", "1'bx", "W ? 4 : 8", "'hz", "W >> -1", "64'd" + "9" * 40]
        p1, p2 = rng.choice(exprs), rng.choice(exprs)
        width = rng.choice(["[W-1:0]", "[W:0]", "[(W*W)-1:0]", "[0:W]", "[-5:0]", "[D-1:0]", "[4095:0]", "[1<<40:0]"])
        text = (f"module m #(parameter W = {p1}, parameter D = {p2}) (\n  input wire {width} a,\n"
                f"  output reg {width} y\n);\nendmodule\n")
        if rng.random() < 0.3 and self.seeds:  # a real module with one parameter default replaced
            text = re.sub(r"(parameter\s+\w+\s*=\s*)[^,;)\n]+", lambda m: m.group(1) + rng.choice(exprs),
                          rng.choice(self.seeds), count=1)
        if rng.random() < 0.15:
            b = bytearray(text.encode())
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            text = b.decode("utf-8", "replace")
        p = self.work / f"m{self.n}.v"
        p.write_text(text, encoding="utf-8")
        return p

    def run(self, p: Path) -> None:
        from rtl_hooks.inspect import format_table, get_module

        mod = get_module(p, None)
        format_table(mod)
        json.dumps(mod.to_dict())

    def done(self, p: Path) -> None:
        p.unlink(missing_ok=True)


# --- checkfile ----------------------------------------------------------------------------

class CheckfileKind:
    name = "checkfile"

    def __init__(self, work: Path):
        from tests.test_engine_helpers import rec, write_csv

        self.work = work
        self.base = work / "base"
        src = work / "in"
        src.mkdir()
        write_csv(src / "m.csv", [rec("measured", f"op{i}", 1.0 + i) for i in range(6)])
        write_csv(src / "a.csv", [rec("archmodel", f"op{i}", (1.0 + i) * (1.5 if i % 2 else 1.01)) for i in range(6)])
        from click.testing import CliRunner

        from xfid.cli import cli

        for args in (["ingest", "--adapter", "xfid-records", str(src)], ["check"], ["check"]):
            r = CliRunner().invoke(cli, ["--store", str(self.base), *args])
            assert r.exit_code in (0, 1), r.output
        # the report's period must hold the checks, or it correlates afresh and never reads a check file
        self.since = datetime.now(UTC).date().isoformat()
        self.n = 0

    def make(self, rng: random.Random) -> Path:
        self.n += 1
        s = self.work / f"s{self.n}"
        shutil.copytree(self.base, s)
        files = sorted((s / "checks").glob("*.parquet"))
        for _ in range(rng.randint(1, 3)):
            f = rng.choice(files)
            op = rng.randrange(5)
            if op == 0 and f.exists():  # removed
                f.unlink()
            elif op == 1 and f.exists() and f.stat().st_size:  # truncated
                b = f.read_bytes()
                f.write_bytes(b[: rng.randrange(len(b))])
            elif op == 2 and f.exists() and f.stat().st_size:  # bit flips
                b = bytearray(f.read_bytes())
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
                f.write_bytes(bytes(b))
            elif op == 3:  # an export written over it
                f.write_text("fidelity,op\nmeasured,x\n")
            elif op == 4 and len(files) > 1:  # another check's file
                other = rng.choice([g for g in files if g != f])
                if other.exists():
                    shutil.copyfile(other, f)
        # judged on the final bytes (a truncation undone by a copy of an identical twin is no damage):
        # each check recorded the hash of its file, so every changed or missing file is surely damaged
        base = {g.name: g.read_bytes() for g in (self.base / "checks").glob("*.parquet")}
        now = {g.name: g.read_bytes() for g in (s / "checks").glob("*.parquet")}
        self.damaged = sorted(name for name in base if now.get(name) != base[name])
        self.latest = max(base, key=lambda name: int(re.sub(r"\D", "", name)))
        return s

    def run(self, s: Path) -> None:
        from click.testing import CliRunner

        from xfid.cli import cli

        report = ["report", "--since", self.since, "--html", "-o", str(s.parent / f"r{self.n}.html")]
        for args in (report, ["doctor"]):
            r = CliRunner().invoke(cli, ["--store", str(s), *args], catch_exceptions=True)
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                raise r.exception
            if r.exit_code == 2 and "Error:" not in r.output:
                raise Outcome(f"exit 2 without Error: {r.output[-200:]}")
            if args[0] == "doctor" and self.damaged and r.exit_code == 0:
                raise Outcome(f"doctor says healthy about changed or missing check files {self.damaged}")
            if args[0] == "report" and self.latest in self.damaged and r.exit_code == 0:
                raise Outcome(f"report rendered from a changed or missing {self.latest}")

    def done(self, s: Path) -> None:
        shutil.rmtree(s, ignore_errors=True)
        (s.parent / f"r{self.n}.html").unlink(missing_ok=True)


# --- names --------------------------------------------------------------------------------

NAME_COMMANDS = [
    ["correlate", "--format", "table"], ["correlate", "--format", "markdown"], ["correlate", "--format", "csv"],
    ["correlate", "--format", "json"], ["issues", "list"], ["issues", "list", "--format", "csv"],
    ["issues", "list", "--format", "json"], ["sources"], ["summary"],
    ["calibrate", "--candidate", "roofline", "--reference", "measured", "--target", "h100-sxm"],
    ["compare", "--baseline", "{base}", "--format", "text", "--fail-on", "any"],
    ["compare", "--baseline", "{base}", "--format", "markdown", "--fail-on", "any"],
    ["compare", "--baseline", "{base}", "--format", "junit", "--fail-on", "any"],
]


class NamesKind:
    """Each input is a set of hostile names and one command to run over them.

    Run in groups: one store takes a group's names at once (ingest, snapshot, ingest, check:
    one issue per input), then each input's owner is set with `issues ack` on its own issue
    and each input's command runs over the store. Every name still goes through ingest, check
    and a command's output, now beside the group's other names; the store is built once per
    group instead of once per input. A group with any finding, or with a step that does not
    exit 0, is run again one input at a time (`run`), so that each finding names its input.
    """

    name = "names"
    group = 10

    def __init__(self, work: Path):
        self.work = work
        self.n = 0

    def make(self, rng: random.Random) -> dict[str, Any]:
        self.n += 1

        def name() -> str:
            parts = [rng.choice(["qkv", "attn", "w", "r"])]
            for _ in range(rng.randint(1, 4)):
                parts.append(rng.choice([*HOSTILE, "x", "ok", "\t", "µs"]))
            return "".join(parts)

        return {"op": name(), "workload": name(), "run": name(), "owner": name(),
                "cmd": rng.choice(NAME_COMMANDS), "id": self.n}

    def run(self, inp: dict[str, Any]) -> None:
        """One input alone in its own store."""
        self._run_group([inp], strict=False)

    def run_group(self, inps: list[dict[str, Any]]) -> bool:
        """A group of inputs in one store; False when the group cannot stand for its inputs
        (two inputs name the same op and workload, or a step did not exit 0): run them alone."""
        if len({(i["op"], i["workload"]) for i in inps}) < len(inps):
            return False
        return self._run_group(inps, strict=True)

    def _run_group(self, inps: list[dict[str, Any]], strict: bool) -> bool:
        from click.testing import CliRunner

        from tests.test_engine_helpers import rec, write_csv
        from xfid.cli import cli

        d = self._dir(inps)
        d.mkdir()
        store = d / "s"
        write_csv(d / "m.csv", [rec("measured", i["op"], 1.0, workload=i["workload"], run=i["run"]) for i in inps])
        write_csv(d / "r.csv", [rec("roofline", i["op"], 0.5, workload=i["workload"]) for i in inps])
        write_csv(d / "a.csv", [rec("archmodel", i["op"], 3.0, workload=i["workload"]) for i in inps])

        def xfid(*args: str) -> int:
            r = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=True)
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                raise r.exception
            if r.exit_code == 2 and "Error:" not in r.output:
                raise Outcome(f"exit 2 without Error: {r.output[-200:]}")
            hit = RAW.search(r.output)
            if hit:
                raise Outcome(f"RAW {hit.group()!r} in the output of {' '.join(args[:3])}")
            return r.exit_code

        base = d / "base.json"
        steps = [("ingest", "--adapter", "xfid-records", str(d / "m.csv"), str(d / "r.csv")),
                 ("snapshot", "-o", str(base)),
                 ("ingest", "--adapter", "xfid-records", str(d / "a.csv")),
                 ("check",),
                 *[("issues", "ack", f"XF-{k + 1}", "--owner", i["owner"]) for k, i in enumerate(inps)]]
        for step in steps:
            if xfid(*step) != 0 and strict:
                return False
        for i in inps:
            xfid(*[a.replace("{base}", str(base)) for a in i["cmd"]])
        return True

    def _dir(self, inps: list[dict[str, Any]]) -> Path:
        return self.work / f"n{inps[0]['id']}-{len(inps)}"

    def done(self, inp: dict[str, Any]) -> None:
        shutil.rmtree(self._dir([inp]), ignore_errors=True)

    def done_group(self, inps: list[dict[str, Any]]) -> None:
        shutil.rmtree(self._dir(inps), ignore_errors=True)


KINDS = {"tree": TreeKind, "rtl": RtlKind, "checkfile": CheckfileKind, "names": NamesKind}


def run_more(name: str, inputs: int, rng: random.Random, work: Path, limit_s: int,
             progress: int = 0) -> dict[str, Any]:
    """Fuzz one of these kinds; returns the outcome counts (and, every `progress` inputs, a line on stderr)."""
    import collections
    import signal
    import time
    import traceback

    from xfid.errors import XfidError

    d = work / name
    d.mkdir()
    kind = KINDS[name](d)
    counts: collections.Counter = collections.Counter()
    seen: set[str] = set()
    t0 = time.perf_counter()

    def judge(run: Any, arg: Any, alarm_s: int) -> tuple[str, str, Any]:
        signal.alarm(alarm_s)
        try:
            return "ok", "", run(arg)
        except XfidError:
            return "xfid_error", "", None
        except Outcome as e:
            return "BUG", str(e), None
        except TimeoutError:
            return "TIMEOUT", "past the alarm", None
        except MemoryError:
            return "MEMORY", "", None
        except Exception as e:
            return "BUG", f"{type(e).__name__}: {e}"[:300] + "\n" + traceback.format_exc()[-1500:], None
        finally:
            signal.alarm(0)

    def one(inp: Any) -> None:
        outcome, msg, _ = judge(kind.run, inp, limit_s)
        counts[outcome] += 1
        if outcome != "ok" and outcome != "xfid_error" and msg.split("\n")[0] not in seen:
            seen.add(msg.split("\n")[0])
            print(f"  {name}: {outcome}: {msg}\n  (input: {inp!r:.300})", file=sys.stderr)
        kind.done(inp)

    group = getattr(kind, "group", 1)
    done = 0
    while done < inputs:
        inps = [kind.make(rng) for _ in range(min(group, inputs - done))]
        if len(inps) > 1:  # the group at once; each input alone again unless the group passed whole
            outcome, _, whole = judge(kind.run_group, inps, limit_s * len(inps))
            kind.done_group(inps)
            if outcome == "ok" and whole:
                counts["ok"] += len(inps)
            else:
                counts["regrouped"] += 1
                for inp in inps:
                    one(inp)
        else:
            one(inps[0])
        done += len(inps)
        if progress and done // progress != (done - len(inps)) // progress and done < inputs:
            print(f"  {name}: {done}/{inputs} inputs, {counts['BUG']} BUG, {counts['TIMEOUT']} TIMEOUT, "
                  f"{counts['MEMORY']} MEMORY, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    counts["inputs"] = inputs
    counts["seconds"] = round(time.perf_counter() - t0, 1)
    return counts
