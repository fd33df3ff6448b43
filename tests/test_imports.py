"""No import cycles: a module never imports itself back through others, not even lazily.

The graph is built from the source (ast), not by importing: every `import` and `from ... import`
anywhere in a module (top level, inside functions and methods, in try/except) is an edge, except
those under `if TYPE_CHECKING:` (never executed). `from pkg import name` points at `pkg.name`
when that is a module, else at `pkg`. The implicit import of a module's parent packages is not an
edge (every submodule would otherwise form a cycle with its package's `__init__`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("xfid", "rtl_hooks")

def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in the tree, except those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    """The project modules one import statement of module `name` (file `path`) loads."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    if node.level:  # relative: from the module's package, `level - 1` packages up
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = package[:len(package) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    out = set()
    for a in node.names:
        sub = f"{mod}.{a.name}"
        if sub in known:
            out.add(sub)
        elif mod in known:
            out.add(mod)
    return out


def _lazy_homes(tree: ast.AST) -> set[str]:
    """The submodules a package's `__init__` loads on first use of a public name (PEP 562): the
    values of its module-level `_HOME = {name: submodule}` (xfid.engine). Each is an edge, as
    an eager import of them would be."""
    for node in getattr(tree, "body", []):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_HOME" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            return {v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return set()


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in _imports(tree):
            edges |= _targets(name, path, node, known)
        edges |= {f"{name}.{home}" for home in _lazy_homes(tree)} & known.keys()
        edges.discard(name)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the components with more than one module (each holds a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def a_cycle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """One cycle inside a strongly connected component, as a path that returns to its start."""
    start = min(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth first from start, inside the component, until an edge returns to it
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {sorted(comp)}")


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "xfid.engine.pipeline" in graph["xfid.engine"]  # a package's lazy public name (_HOME)
    assert "xfid.tracker.tracker" in graph["xfid.tracker"]  # from a package's __init__
    assert "xfid.engine.pipeline" in graph["xfid.engine.calibration"]  # inside a function
    assert len(graph) > 50


def test_no_import_cycles():
    graph = import_graph()
    found = {frozenset(c): a_cycle(graph, c) for c in strongly_connected(graph)}
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(v) for v in found.values())


def test_no_package_name_is_shadowed_by_a_submodule():
    """A package's public names stay what they are after every submodule is imported (a module
    `engine/correlate.py` would replace a function `engine.correlate` once imported)."""
    import importlib
    import pkgutil
    import types

    for name in ("xfid.engine", "xfid.drift"):
        pkg = importlib.import_module(name)
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{name}.{info.name}")
        for public in getattr(pkg, "__all__", ()):
            assert not isinstance(getattr(pkg, public), types.ModuleType), f"{name}.{public} is a module"
    from xfid.engine import CalibrationResult, Correlation, calibrate, correlate, fingerprint

    assert all(callable(f) for f in (calibrate, correlate, fingerprint, CalibrationResult, Correlation))


_FRESH_IMPORTS = r"""
import importlib, os, sys, traceback
import numpy, pandas, pyarrow, pyarrow.parquet, scipy.stats  # third-party only: shared by the forks
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status:
        failed.append(name)
print("FAILED:" + ",".join(failed))
"""


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Each project module imported first, alone (a forked child of an interpreter that has
    imported no project module): a cycle through a package's `__init__` (which the graph above
    does not count) fails here as an ImportError of a partly initialised module."""
    import subprocess
    import sys

    names = sorted(n for n in _modules() if not n.endswith(".__main__"))  # __main__ runs the CLI
    proc = subprocess.run([sys.executable, "-c", _FRESH_IMPORTS, *names], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    failed = proc.stdout.strip().rsplit("FAILED:", 1)[-1]
    assert not failed, f"modules that fail when imported first: {failed}\n{proc.stderr[-4000:]}"
