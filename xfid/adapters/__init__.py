"""The adapter registry: one table of built-in adapters, plus the `xfid.adapters` entry points."""

from __future__ import annotations

import importlib
import sys
import types
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from xfid.adapters.base import HEAD_BYTES, Adapter, ReadContext
from xfid.errors import AdapterError

# name -> "module:Class". Imported lazily, so `xfid --help` stays fast.
BUILTIN: dict[str, str] = {
    "xfid-records": "xfid.adapters.records:RecordsAdapter",
    "vllm": "xfid.adapters.vllm:VllmAdapter",
    "sglang": "xfid.adapters.sglang:SglangAdapter",
    "genai-perf": "xfid.adapters.genai_perf:GenaiPerfAdapter",
    "aiperf": "xfid.adapters.aiperf:AiperfAdapter",
    "ncu": "xfid.adapters.ncu:NcuAdapter",
    "nsys": "xfid.adapters.nsys:NsysAdapter",
    "nvidia-smi": "xfid.adapters.nvidia_smi:NvidiaSmiAdapter",
    "dcgm": "xfid.adapters.dcgm:DcgmAdapter",
    "dcgm-exporter": "xfid.adapters.dcgm_exporter:DcgmExporterAdapter",
    "mlperf": "xfid.adapters.mlperf:MlperfAdapter",
    "scalesim": "xfid.adapters.scalesim:ScalesimAdapter",
    "timeloop": "xfid.adapters.timeloop:TimeloopAdapter",
    "genz": "xfid.adapters.genz:GenzAdapter",
    "llm-viewer": "xfid.adapters.llm_viewer:LlmViewerAdapter",
    "llmcompass-hw": "xfid.adapters.llmcompass:LlmCompassHwAdapter",
    "cocotb": "xfid.adapters.cocotb:CocotbAdapter",
    "trtllm-bench": "xfid.adapters.trtllm:TrtllmBenchAdapter",
    "perf-analyzer": "xfid.adapters.perf_analyzer:PerfAnalyzerAdapter",
    "vllm-latency": "xfid.adapters.vllm_offline:VllmLatencyAdapter",
    "vllm-throughput": "xfid.adapters.vllm_offline:VllmThroughputAdapter",
    "serving-console": "xfid.adapters.serving_console:ServingConsoleAdapter",
    "sglang-one-batch": "xfid.adapters.sglang_one_batch:SglangOneBatchAdapter",
    "llmperf": "xfid.adapters.llmperf:LlmperfAdapter",
}

__all__ = ["Adapter", "ReadContext", "UnreadFormatError", "all_adapters", "describe", "detect", "get_adapter"]


class UnreadFormatError(AdapterError):
    """A file of a format xfid recognises but does not read (xfid.adapters.unread); `reason`
    is the refusal without the path, shown as the skip reason in a folder ingest."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _load(spec: str) -> type[Adapter]:
    mod, _, attr = spec.partition(":")
    cls: type[Adapter] = getattr(importlib.import_module(mod), attr)
    return cls


def all_adapters() -> dict[str, type[Adapter]]:
    """Every adapter available: built-ins first, then third-party entry points."""
    found: dict[str, type[Adapter]] = {}
    for name, spec in BUILTIN.items():
        found[name] = _load(spec)
    for ep in entry_points(group="xfid.adapters"):
        if ep.name not in found:
            found[ep.name] = ep.load()
    return found


def describe() -> list[dict[str, Any]]:
    """The registered adapters: name, fidelity (None: from the file), formats (`xfid.adapters()`)."""
    return [{"name": n, "fidelity": c.fidelity, "formats": c.formats} for n, c in all_adapters().items()]


def get_adapter(name: str) -> type[Adapter]:
    """The adapter class called `name`.

    Raises:
        AdapterError: no such adapter; the message lists the valid names.
    """
    adapters = all_adapters()
    if name not in adapters:
        raise AdapterError(f"unknown adapter {name!r}; valid adapters: {', '.join(adapters)}")
    return adapters[name]


def sniff_all(path: Path) -> list[str]:
    """Names of every adapter whose sniff accepts the file."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    return [n for n, cls in all_adapters().items() if cls.sniff(path, head)]


def detect(path: Path) -> type[Adapter]:
    """The one adapter that recognises `path`.

    Raises:
        AdapterError: none or several recognise it; the message lists the candidates.
    """
    hits = sniff_all(path)
    if len(hits) == 1:
        return get_adapter(hits[0])
    if not hits:
        from xfid.adapters.unread import recognise

        with open(path, "rb") as f:
            refusal = recognise(path, f.read(HEAD_BYTES))
        if refusal:
            raise UnreadFormatError(f"{path}: {refusal}", refusal)
        raise AdapterError("{path}: no adapter recognises this file; pass {adapter} NAME (one of {names})",
                           params=("adapter",), path=path, names=", ".join(all_adapters()))
    raise AdapterError("{path}: several adapters recognise this file ({hits}); pass {adapter} NAME",
                       params=("adapter",), path=path, hits=", ".join(hits))


class _CallableRegistry(types.ModuleType):
    """This package is also the public `xfid.adapters()`: the import system sets `xfid.adapters` to
    this module once anything imports it, so the module itself answers the call, and the public
    name means the same before and after (tests/test_copy_and_api.py checks every public name)."""

    def __call__(self) -> list[dict[str, Any]]:
        return describe()


sys.modules[__name__].__class__ = _CallableRegistry
