"""`xfid demo` run once per test run in a fresh folder, and its printed next commands run as printed.

The demo takes ~40 s: it is built once per test run (once for all of pytest-xdist's workers,
under a file lock) and each user gets a copy of its folder (a store is a folder: a copy is a
store of its own), with the folder's path in what the demo printed replaced by the copy's.
Shared by the tests that read or change the demo's store, reports and output.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Demo:
    """The demo's folder, its store, what it printed, and the next commands it suggested."""

    cwd: Path
    store: Path
    out: str
    next_commands: list[str]

    def line(self, pattern: str) -> re.Match[str]:
        """The first match of `pattern` in the demo's output (the test fails when there is none)."""
        m = re.search(pattern, self.out, re.M)
        assert m, f"{pattern!r} not in the demo's output:\n{self.out}"
        return m


def env() -> dict[str, str]:
    """The environment of a user: no XFID_* variables, this checkout first on the path."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("XFID_")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def xfid(cwd: Path, command: str | list[str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run an `xfid ...` command line (as a user types it) with this checkout's xfid, in `cwd`."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    assert argv[0] == "xfid", argv
    return subprocess.run([sys.executable, "-m", "xfid", *argv[1:]], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=timeout)


_RUN: dict[str, Demo] = {}


def _built(factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The folder of the one `xfid --store <dir>/store demo --out reports` of this test run, and
    what it printed. Under pytest-xdist the workers share it (their temp folders have one parent)."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    home = root / "demo-built"
    done = root / "demo-built.json"
    with open(root / "demo-built.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds it; the others wait, then copy
        if not done.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir()
            r = xfid(home, ["xfid", "--store", str(home / "store"), "demo", "--out", "reports"], timeout=900)
            assert r.returncode == 0, r.stdout + r.stderr
            done.write_text(json.dumps({"out": r.stdout}))
        out = json.loads(done.read_text())["out"]
    return home, out


def copy_demo(factory: pytest.TempPathFactory, name: str = "demo") -> Demo:
    """A copy of the demo's folder (store and reports) of its own, as if the demo had run there."""
    home, out = _built(factory)
    cwd = factory.mktemp(name)
    shutil.copytree(home, cwd, symlinks=True, dirs_exist_ok=True)
    out = out.replace(str(home), str(cwd))
    cmds = [ln.strip() for ln in out.split("\nnext (", 1)[1].splitlines() if ln.startswith("  xfid ")]
    return Demo(cwd, cwd / "store", out, cmds)


def run_demo(factory: pytest.TempPathFactory) -> Demo:
    """The demo's folder shared by the tests of this session (a copy of the run's one demo)."""
    if "demo" not in _RUN:
        _RUN["demo"] = copy_demo(factory, "demo-run")
    return _RUN["demo"]
