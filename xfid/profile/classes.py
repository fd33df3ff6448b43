"""Op classes from op names, size buckets as decades, precision of an observation (docs/profile.md)."""

from __future__ import annotations

import math
import re
from typing import Any

END_TO_END = "end-to-end"
OTHER = "other"

_LAYER = re.compile(r"^(?:layers?|blk|block|h)[._]?\d+[._]", re.IGNORECASE)
_SHAPE = re.compile(r"\[[^\]]*\]")

OP_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("communication", re.compile(r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|nccl|rccl|collective"
                                 r"|send_?recv|interconnect", re.IGNORECASE)),
    ("attention", re.compile(r"sdpa|flash|fmha|attention|attn_core|paged_?attn|qk_?matmul|sv_?matmul"
                             r"|^(logit|attend)$", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|gemv|matmul|_proj\b|proj$|linear|lm_head|\bmm\b|\bbmm\b", re.IGNORECASE)),
    ("norm", re.compile(r"norm", re.IGNORECASE)),
    ("softmax", re.compile(r"softmax", re.IGNORECASE)),
    ("embedding", re.compile(r"embed", re.IGNORECASE)),
    ("dma", re.compile(r"^dma\b|memcpy|copy_kernel", re.IGNORECASE)),
    ("mvm", re.compile(r"^omvm\b|mvm", re.IGNORECASE)),
    ("elementwise", re.compile(r"elementwise|vectorized|silu|gelu|relu|swiglu|rotary|rope|\badd\b|\bmul\b"
                               r"|fill|cast|activation|reduce", re.IGNORECASE)),
)
"""(class, pattern) in order: the first pattern found anywhere in the op name (without its
`[...]` shape and a `layerN.` prefix) gives the class; none gives `other`, an empty op `end-to-end`."""


def op_class(op: str) -> str:
    """`gemm[m=64,n=8,k=8]` -> gemm, `attn.sdpa` -> attention, `layer3.mlp.down_proj` -> gemm, "" -> end-to-end."""
    if not op:
        return END_TO_END
    base = _LAYER.sub("", _SHAPE.sub("", op).strip())
    for name, rx in OP_CLASSES:
        if rx.search(base):
            return name
    return OTHER


def decade(x: float | None, unit: str) -> str | None:
    """`1eK-1eK+1 UNIT` with K = floor(log10 x); None for a missing or non-positive x."""
    if x is None or not math.isfinite(x) or x <= 0:
        return None
    k = math.floor(math.log10(x))
    return f"1e{k}-1e{k + 1} {unit}"


def size_bucket(flops: float | None, nbytes: float | None) -> str:
    """Decades of the op's FLOPs; an op without FLOPs (a copy, a DMA) by decades of bytes moved."""
    return decade(flops, "FLOP") or decade(nbytes, "B") or "unknown"


def precision_of(bound_cfg: dict[str, Any], measured_cfg: dict[str, Any], workload: str, known: Any) -> str:
    """The bound's precision, else the measured record's `precision`, else the workload id's last part."""
    for cfg in (bound_cfg, measured_cfg):
        p = cfg.get("precision")
        if isinstance(p, str) and p:
            return p
    last = workload.rsplit("/", 1)[-1]
    return last if last in known else "unknown"
