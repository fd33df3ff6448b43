"""`xfid demo` run once per test session in a fresh folder, and its printed next commands run as printed.

Shared by tests/test_demo_consistency.py and tests/test_counts.py (the demo takes ~40 s).
"""

from __future__ import annotations

import os
import re
import shlex
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


def run_demo(factory: pytest.TempPathFactory) -> Demo:
    """`xfid --store <dir>/store demo --out reports` in a new folder, once per session."""
    if "demo" not in _RUN:
        cwd = factory.mktemp("demo-run")
        r = xfid(cwd, ["xfid", "--store", str(cwd / "store"), "demo", "--out", "reports"], timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        cmds = [ln.strip() for ln in r.stdout.split("\nnext (", 1)[1].splitlines() if ln.startswith("  xfid ")]
        _RUN["demo"] = Demo(cwd, cwd / "store", r.stdout, cmds)
    return _RUN["demo"]
