"""Formats xfid recognises but does not read yet, so that such a file is refused by name.

A GuideLLM report, or llmperf's per-request file beside its summary, would otherwise get
"no adapter recognises this file", which tells the user nothing. `recognise` is asked only once no adapter claimed
the file; each entry is a cheap test of the file's first bytes, like an adapter's sniff.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from xfid.adapters.base import head_text


def _guidellm(path: Path, head: bytes) -> bool:
    """GuideLLM's benchmarks.json / .yaml: `generative_benchmark` entries, or its metadata block."""
    t = head_text(head)
    s = t.lstrip()
    if s.startswith("{"):
        return '"guidellm_version"' in t or ('"benchmarks"' in t and '"generative_benchmark"' in t)
    return "benchmarks:" in t and "type_: generative_benchmark" in t


def _llmperf_individual(path: Path, head: bytes) -> bool:
    """llmperf's `*_individual_responses.json`: a JSON list of one object per request."""
    s = head_text(head).lstrip()
    return s.startswith("[") and '"ttft_s"' in s and '"end_to_end_latency_s"' in s


KNOWN: tuple[tuple[str, Callable[[Path, bytes], bool], str], ...] = (
    ("a GuideLLM report", _guidellm,
     "write the numbers you need into an xfid-records CSV to ingest them, or skip the file "
     "with `skip = true` in xfid-source.toml"),
    ("an llmperf per-request file (individual responses)", _llmperf_individual,
     "ingest the *_summary.json llmperf writes beside it: adapter llmperf reads its statistics"),
)
"""(the format with its article, sniff, what to do instead) of each recognised format no adapter reads."""


def recognise(path: Path, head: bytes) -> str | None:
    """The refusal for a file of a known format xfid does not read; None for any other file."""
    for what, sniff, fix in KNOWN:
        if sniff(path, head):
            return f"this is {what}; xfid does not read it yet ({fix})"
    return None


__all__ = ["KNOWN", "recognise"]
