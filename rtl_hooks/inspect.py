"""Verilog inspection with pyverilog: modules, parameters (defaults, expressions) and ports."""

from __future__ import annotations

import atexit
import math
import re
import shutil
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from xfid.errors import RTLError


@dataclass
class Param:
    """A module parameter: its default as written, and its value when it is a constant expression."""

    name: str
    default: str
    value: int | None
    local: bool = False


@dataclass
class Port:
    """A module port: direction, width in bits (None when it depends on something unknown)."""

    name: str
    direction: str
    width: int | None
    width_expr: str
    signed: bool = False


@dataclass
class Module:
    """One module definition of a Verilog file."""

    name: str
    file: str
    line: int
    params: list[Param] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def defaults(self) -> dict[str, int | None]:
        """Overridable (non-local) parameters and their default values."""
        return {p.name: p.value for p in self.params if not p.local}


def _import_pyverilog() -> None:
    """Import pyverilog quietly: its __init__ leaves its VERSION file open (a ResourceWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        import pyverilog.vparser.parser  # noqa: F401


@lru_cache(maxsize=1)
def _parser() -> Any:
    """The pyverilog parser, built once per process; its tables go to a temp dir, never the cwd."""
    _import_pyverilog()
    from pyverilog.vparser.parser import VerilogParser

    out = tempfile.mkdtemp(prefix="xfid-pyverilog-")
    atexit.register(shutil.rmtree, out, True)
    return VerilogParser(outputdir=out, debug=False)


def parse_file(path: str | Path) -> list[Module]:
    """Every module of a Verilog file (no macro or include expansion).

    Raises:
        RTLError: the file is missing, not text, or has a syntax error (with its line).
    """
    _import_pyverilog()
    from pyverilog.vparser import ast
    from pyverilog.vparser.parser import ParseError

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RTLError(f"{path}: no such Verilog file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RTLError(f"{path}: cannot read it as Verilog text ({e})") from None
    parser = _parser()
    parser.lexer.reset_lineno()
    try:
        tree = parser.parse(text)
    except ParseError as e:
        m = re.search(r"line:(\d+)", str(e))
        near = str(e).split(": ", 1)[-1]
        where = f"line {m.group(1)}" if m else "end of file"
        raise RTLError(f"{path}, {where}: Verilog syntax error ({near}); fix the source, "
                       "or check it with `verilator --lint-only`") from None
    mods = []
    for d in tree.description.definitions:
        if isinstance(d, ast.ModuleDef):
            mods.append(_module(d, str(path)))
    if not mods:
        raise RTLError(f"{path}: no module definition found")
    return mods


def get_module(path: str | Path, top: str | None = None) -> Module:
    """The module called `top`, or the one named like the file, or the only/last one.

    Raises:
        RTLError: `top` is not defined in the file (the message lists the modules).
    """
    mods = parse_file(path)
    names = [m.name for m in mods]
    want = top or (Path(path).stem if Path(path).stem in names else None)
    if want is None:
        return mods[-1]
    for m in mods:
        if m.name == want:
            return m
    raise RTLError(f"{path}: no module {want!r}; the file defines {', '.join(names)} (pass --top NAME)")


def resolve_params(mod: Module, overrides: dict[str, str | int]) -> dict[str, int]:
    """Parameter values with `overrides` applied; local parameters are not overridable.

    Raises:
        RTLError: an unknown or local parameter, a non-integer value, or a default that is not constant.
    """
    known = mod.defaults()
    for k in overrides:
        if k not in known:
            local = " (a localparam, derived from the others)" if any(p.name == k and p.local for p in mod.params) else ""
            raise RTLError(f"module {mod.name} has no parameter {k!r}{local}; "
                           f"its parameters are {', '.join(known) or 'none'}")
    out: dict[str, int] = {}
    for k, default in known.items():
        v = overrides.get(k, default)
        if isinstance(v, str):
            parsed = parse_int(v)
            if parsed is None:
                raise RTLError(f"parameter {k}={v!r} of {mod.name} is not an integer (use e.g. {k}=8)")
            v = parsed
        if v is None:
            raise RTLError(f"parameter {k} of {mod.name} has no constant default; pass --param {k}=VALUE")
        out[k] = int(v)
    return out


_NUM = re.compile(r"^(?:(\d+)?'([sS])?([bBoOdDhH]))?([0-9a-fA-F_xXzZ?]+)$")


def parse_int(text: str) -> int | None:
    """An integer from a Verilog literal (`8`, `8'd4`, `'h1F`, `-3`); None for x/z or junk."""
    t = text.strip().replace("_", "")
    neg = t.startswith("-")
    t = t[1:] if neg else t
    m = _NUM.match(t)
    if not m:
        return None
    base = {"b": 2, "o": 8, "d": 10, "h": 16}[(m.group(3) or "d").lower()]
    if len(m.group(4)) > MAX_BITS:  # past the widest constant (and Python's int-from-text limit)
        return None
    try:
        v = int(m.group(4), base)
    except ValueError:
        return None
    return -v if neg else v


def _module(d: Any, path: str) -> Module:
    from pyverilog.vparser import ast

    mod = Module(d.name, path, int(d.lineno))
    env: dict[str, int | None] = {}
    decls = list(d.paramlist.params) if d.paramlist else []
    decls += [it for it in d.items if isinstance(it, ast.Decl)]
    for decl in decls:
        for p in decl.list:
            if isinstance(p, ast.Parameter):  # Localparam is a subclass
                v = _value(p.value.var, env, path, f"parameter {p.name}")
                env[p.name] = v
                mod.params.append(Param(p.name, _text(p.value.var), v, isinstance(p, ast.Localparam)))
    for port in d.portlist.ports if d.portlist else []:
        if isinstance(port, ast.Ioport):
            v = port.first
            direction = type(v).__name__.lower()
            width_expr = f"[{_text(v.width.msb)}:{_text(v.width.lsb)}]" if v.width is not None else ""
            width: int | None = 1
            if v.width is not None:
                where = f"the width of port {v.name}"
                msb, lsb = _value(v.width.msb, env, path, where), _value(v.width.lsb, env, path, where)
                width = abs(msb - lsb) + 1 if msb is not None and lsb is not None else None
            mod.ports.append(Port(v.name, direction, width, width_expr, bool(v.signed)))
    return mod


MAX_BITS = 4096
"""The widest constant evaluated: a parameter or width past it is an error, not a hang."""


class _TooWide(Exception):
    """Internal: a constant expression whose value would exceed MAX_BITS."""


def _fit(v: int) -> int:
    if v.bit_length() > MAX_BITS:
        raise _TooWide
    return v


def _power(a: int, b: int) -> int | None:
    if b < 0:
        return None
    if abs(a) > 1 and b * (abs(a).bit_length() - 1) > MAX_BITS:
        raise _TooWide
    return _fit(a**b)


def _shift(a: int, b: int) -> int | None:
    if b < 0:
        return None
    if a and b > MAX_BITS:
        raise _TooWide
    return _fit(a << b)


_BIN = {"Plus": ("+", lambda a, b: _fit(a + b)), "Minus": ("-", lambda a, b: _fit(a - b)),
        "Times": ("*", lambda a, b: _fit(a * b)),
        "Divide": ("/", lambda a, b: a // b if b else None), "Mod": ("%", lambda a, b: a % b if b else None),
        "Power": ("**", _power), "Sll": ("<<", _shift),
        "Srl": (">>", lambda a, b: a >> b if b >= 0 else None)}


def _value(node: Any, env: dict[str, int | None], path: str, what: str) -> int | None:
    """`_eval`, with a value wider than MAX_BITS a clean error naming `what`."""
    try:
        return _eval(node, env)
    except _TooWide:
        raise RTLError(f"{path}: {what} = {_text(node)[:80]} is wider than {MAX_BITS} bits; xfid evaluates "
                       f"constants of up to {MAX_BITS} bits (fix the expression)") from None


def _eval(node: Any, env: dict[str, int | None]) -> int | None:
    """Value of a constant expression; None when it names something unknown."""
    kind = type(node).__name__
    if kind == "IntConst":
        return parse_int(node.value)
    if kind == "Identifier":
        return env.get(node.name)
    if kind in _BIN:
        a, b = _eval(node.left, env), _eval(node.right, env)
        return None if a is None or b is None else _BIN[kind][1](a, b)
    if kind == "Uminus":
        a = _eval(node.right, env)
        return None if a is None else -a
    if kind == "Cond":
        c = _eval(node.cond, env)
        return None if c is None else _eval(node.true_value if c else node.false_value, env)
    if kind == "SystemCall" and node.syscall == "clog2" and len(node.args) == 1:
        a = _eval(node.args[0], env)
        return None if a is None or a < 0 else (0 if a <= 1 else math.ceil(math.log2(a)))
    return None


def _text(node: Any) -> str:
    """Verilog text of an expression (enough for parameters and widths)."""
    kind = type(node).__name__
    if kind == "IntConst":
        return str(node.value)
    if kind == "Identifier":
        return str(node.name)
    if kind in _BIN:
        return f"{_paren(node.left)} {_BIN[kind][0]} {_paren(node.right)}"
    if kind == "Uminus":
        return f"-{_paren(node.right)}"
    if kind == "Cond":
        return f"{_paren(node.cond)} ? {_paren(node.true_value)} : {_paren(node.false_value)}"
    if kind == "SystemCall":
        return f"${node.syscall}(" + ", ".join(_text(a) for a in node.args) + ")"
    if kind == "StringConst":
        return f'"{node.value}"'
    return kind


def _paren(node: Any) -> str:
    t = _text(node)
    return f"({t})" if type(node).__name__ in _BIN or type(node).__name__ == "Cond" else t


def format_table(mod: Module) -> str:
    """A plain-text table of a module's parameters and ports."""
    lines = [f"module {mod.name}  ({mod.file}, line {mod.line})", "", "parameters:"]
    w = max([len(p.name) for p in mod.params] + [4])
    for p in mod.params:
        val = "?" if p.value is None else str(p.value)
        expr = "" if p.default == val else f"  = {p.default}"
        lines.append(f"  {p.name:<{w}}  {val:>8}{expr}{'  (localparam)' if p.local else ''}")
    if not mod.params:
        lines.append("  (none)")
    lines += ["", "ports:"]
    w = max([len(q.name) for q in mod.ports] + [4])
    for q in mod.ports:
        width = "?" if q.width is None else str(q.width)
        lines.append(f"  {q.direction:<6}  {q.name:<{w}}  {width:>4} bit{'s' if q.width != 1 else ' '}"
                     f"{'  signed' if q.signed else ''}{'  ' + q.width_expr if q.width_expr else ''}")
    return "\n".join(lines)
