"""The adapter registry: every built-in adapter imports and has a name, a fidelity, formats, sniff and read."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from xfid.adapters import BUILTIN, all_adapters, get_adapter
from xfid.adapters.base import Adapter


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_adapter_is_complete(name):
    mod, _, attr = BUILTIN[name].partition(":")
    cls = getattr(importlib.import_module(mod), attr)  # an import error fails here, never hidden
    assert issubclass(cls, Adapter) and cls.name == name
    assert isinstance(cls.formats, str) and cls.formats
    assert cls.fidelity is None or isinstance(cls.fidelity, str)
    assert callable(cls.sniff) and callable(cls.read) and not getattr(cls.read, "__isabstractmethod__", False)
    assert cls.sniff(Path("empty"), b"") is False
    assert get_adapter(name) is cls


def test_all_builtins_offered():
    assert list(all_adapters())[: len(BUILTIN)] == list(BUILTIN)
