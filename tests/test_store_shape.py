"""The shape of issue 30: each safety rule written in one place (docs/reliability.md).

- the names of temps (`.tmp-…`, TMP_PREFIX) and their globs: only xfid/committed.py, whose
  `settle_temps`/`deletable` decide for parts and check files alike which temp may be deleted;
- XFID_DATABASE_URL / XFID_RECORDS_URL read from the environment only in xfid/locations.py;
- where the records are (a directory or a bucket) decided in xfid/partfiles.py, not by
  branches on `fs` in the Store;
- no module of the store's split over ~450 lines.

Read from the source with `ast`, so a docstring or an error message naming a variable is not
a read, and a regex or f-string building a temp's name is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

XFID = Path(__file__).resolve().parents[1] / "xfid"
URL_VARS = {"XFID_DATABASE_URL", "XFID_RECORDS_URL"}


def _modules() -> list[Path]:
    return sorted(p for p in XFID.rglob("*.py") if "engine" not in p.relative_to(XFID).parts)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of bare string statements (docstrings, attribute docstrings): text, not code."""
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def _code_strings(tree: ast.AST) -> list[str]:
    skip = _docstrings(tree)
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def _trees() -> dict[str, ast.AST]:
    return {str(p.relative_to(XFID.parent)): ast.parse(p.read_text(encoding="utf-8")) for p in _modules()}


def test_temp_names_and_globs_are_built_in_one_module():
    where_literal = sorted(m for m, t in _trees().items() if any(".tmp-" in s for s in _code_strings(t)))
    assert where_literal == ["xfid/committed.py"]
    uses = sorted(m for m, t in _trees().items() for n in ast.walk(t)
                  if (isinstance(n, ast.Name) and n.id == "TMP_PREFIX")
                  or (isinstance(n, ast.Attribute) and n.attr == "TMP_PREFIX"))
    assert set(uses) == {"xfid/committed.py"}, uses


def _env_key(node: ast.AST) -> ast.AST | None:
    """The key of an `os.environ[...]`, `os.environ.get(...)` or `os.getenv(...)` read."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
        return node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        f = node.func
        if f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ":
            return node.args[0]
        if f.attr == "getenv":
            return node.args[0]
    return None


def test_the_two_urls_are_read_from_the_environment_in_one_module():
    readers: dict[str, list[str]] = {}
    for mod, tree in _trees().items():
        for n in ast.walk(tree):
            key = _env_key(n)
            if key is None:
                continue
            if isinstance(key, ast.Constant):
                name = str(key.value)
            elif isinstance(key, ast.Name):
                name = key.id
            else:  # a computed key could be either: named here so a reader adds it to the rule
                name = ast.unparse(key)
            if name in URL_VARS or name in ("DATABASE_ENV", "RECORDS_ENV") or not isinstance(
                    key, (ast.Constant, ast.Name)):
                readers.setdefault(mod, []).append(name)
    assert set(readers) == {"xfid/locations.py"}, readers


def test_the_store_never_asks_which_kind_of_location_it_has():
    tree = ast.parse((XFID / "store.py").read_text(encoding="utf-8"))
    asks = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(isinstance(x, ast.Attribute) and x.attr == "fs" for x in [n.left, *n.comparators])]
    assert asks == []


@pytest.mark.parametrize("module", ["store.py", "partfiles.py", "partread.py", "partwrite.py", "committed.py",
                                    "locations.py"])
def test_no_module_of_the_split_is_over_450_lines(module):
    assert len((XFID / module).read_text(encoding="utf-8").splitlines()) <= 450
