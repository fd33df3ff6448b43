"""Transformer model configs and the per-layer decomposition of a workload into canonical ops."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfid.errors import InputError, XfidError

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5,
}

WORKLOAD_RE = re.compile(
    r"^(?P<model>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<phase>prefill|decode)/bs(?P<bs>\d+)/ctx(?P<ctx>\d+)"
    r"/(?P<precision>[a-z0-9]+)(?:/tp(?P<tp>\d+))?$"
)
WORKLOAD_SHAPE = "MODEL/PHASE/bsB/ctxC/PRECISION[/tpN], e.g. llama3-8b/decode/bs8/ctx2048/bf16"


class ModelError(XfidError):
    """An unknown model, a bad workload id or a bad model config."""


@dataclass(frozen=True)
class ModelConfig:
    """The architecture numbers of a decoder-only transformer (Hugging Face config names)."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    num_local_experts: int = 0
    num_experts_per_tok: int = 0
    head_dim: int | None = None

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.hd

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.hd

    @property
    def moe(self) -> bool:
        return self.num_local_experts > 1


# Public Hugging Face config.json values (meta-llama/Meta-Llama-3-8B, -70B; mistralai/Mixtral-8x7B-v0.1).
BUILTIN_MODELS: dict[str, ModelConfig] = {
    "llama3-8b": ModelConfig("llama3-8b", 4096, 32, 32, 8, 14336, 128256),
    "llama3-70b": ModelConfig("llama3-70b", 8192, 80, 64, 8, 28672, 128256),
    "mixtral-8x7b": ModelConfig("mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 8, 2),
}
HF_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
           "intermediate_size", "vocab_size")


def load_hf_config(path: str | Path, name: str) -> ModelConfig:
    """A ModelConfig from a Hugging Face `config.json`.

    Raises:
        InputError: unreadable JSON or a missing / non-integer key (named).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError(p, None, "no such file", "pass the model's config.json to --model-config") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(p, None, f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InputError(p, None, "expected a JSON object (a Hugging Face config.json)")
    vals: dict[str, Any] = {}
    for key in (*HF_KEYS, "num_local_experts", "num_experts_per_tok", "head_dim"):
        v = doc.get(key)
        if key == "num_key_value_heads" and v is None:
            v = doc.get("num_attention_heads")  # HF default: multi-head attention
        if v is None:
            if key in HF_KEYS:
                raise InputError(p, f"key {key!r}", "missing", f"a config.json needs {', '.join(HF_KEYS)}")
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise InputError(p, f"key {key!r}", f"must be a positive integer, got {v!r}")
        vals[key] = v
    if vals["hidden_size"] % vals["num_attention_heads"] and "head_dim" not in vals:
        raise InputError(p, "key 'num_attention_heads'",
                         f"hidden_size {vals['hidden_size']} is not divisible by {vals['num_attention_heads']} heads",
                         "add head_dim")
    return ModelConfig(name=name, **vals)


@dataclass(frozen=True)
class Workload:
    """A parsed workload id."""

    id: str
    model: str
    phase: str
    bs: int
    ctx: int
    precision: str
    tp: int = 1


def parse_workload(wid: str) -> Workload:
    """Parse `MODEL/PHASE/bsB/ctxC/PRECISION[/tpN]`.

    Raises:
        ModelError: the id does not have that shape, or a size is zero.
    """
    m = WORKLOAD_RE.match(wid.strip())
    if not m:
        raise ModelError(f"bad workload id {wid!r}; expected {WORKLOAD_SHAPE} (PHASE is prefill or decode)")
    bs, ctx, tp = int(m["bs"]), int(m["ctx"]), int(m["tp"] or 1)
    if min(bs, ctx, tp) < 1:
        raise ModelError(f"bad workload id {wid!r}: bs, ctx and tp must be at least 1")
    if m["precision"] not in BYTES_PER_ELEMENT:
        raise ModelError(f"workload {wid!r}: unknown precision {m['precision']!r}; "
                         f"known: {', '.join(BYTES_PER_ELEMENT)}")
    return Workload(wid.strip(), m["model"], m["phase"], bs, ctx, m["precision"], tp)


def resolve_model(name: str, config_path: str | Path | None = None) -> ModelConfig:
    """The built-in model `name`, or the architecture in `config_path` (named `name`)."""
    if config_path is not None:
        return load_hf_config(config_path, name)
    if name not in BUILTIN_MODELS:
        raise ModelError(f"unknown model {name!r}; built-in models: {', '.join(BUILTIN_MODELS)} "
                         "(or pass --model-config config.json in Hugging Face format)")
    return BUILTIN_MODELS[name]


@dataclass
class OpCost:
    """The work of one instance of an op on one device: FLOPs, memory bytes, interconnect bytes."""

    op: str
    count: int
    flops: float
    bytes: float
    comm_bytes: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)
    comm_steps: int = 0
    """Latency-bound steps of its collective: 2(N-1) for a ring all-reduce, N-1 for an all-gather."""


def _linear(op: str, count: int, tokens: int, k: int, n: int, b: float, tp: int, *, split_k: bool,
            comm: float = 0.0) -> OpCost:
    """A linear layer [tokens x k] @ [k x n]; column-parallel (split n) or row-parallel (split k)."""
    w = k * n * b / tp
    act_in = tokens * k * b / (tp if split_k else 1)
    act_out = tokens * n * b / (1 if split_k else tp)
    return OpCost(op, count, 2.0 * tokens * k * n / tp, w + act_in + act_out, comm,
                  {"weights_bytes": w, "act_in_bytes": act_in, "act_out_bytes": act_out,
                   "gemm": {"m": tokens, "n": n, "k": k}}, 2 * (tp - 1) if comm else 0)


def all_reduce_bytes(tokens: int, width: int, b: float, tp: int) -> float:
    """Bytes each device sends in a ring all-reduce of a [tokens x width] tensor."""
    return 0.0 if tp == 1 else 2.0 * (tp - 1) / tp * tokens * width * b


def decompose(model: ModelConfig, w: Workload) -> list[OpCost]:
    """One OpCost per op class (one instance = one layer; `count` = instances per step)."""
    b = BYTES_PER_ELEMENT[w.precision]
    tp, h, L = w.tp, model.hidden_size, model.num_hidden_layers
    tokens = w.bs * w.ctx if w.phase == "prefill" else w.bs
    ar = all_reduce_bytes(tokens, h, b, tp)
    q, kv = model.q_dim, model.kv_dim
    ops = [_linear("attn.qkv_proj", L, tokens, h, q + 2 * kv, b, tp, split_k=False)]
    kv_write = tokens * 2 * kv * b / tp
    if w.phase == "prefill":
        pairs = w.bs * w.ctx * (w.ctx + 1) / 2  # causal: query i sees keys 0..i
        flops = 4.0 * model.num_attention_heads * model.hd * pairs / tp
        kv_read = tokens * 2 * kv * b / tp
    else:
        flops = 4.0 * w.bs * model.num_attention_heads * model.hd * w.ctx / tp
        kv_read = w.bs * w.ctx * 2 * kv * b / tp
    qo = 2 * tokens * q * b / tp
    ops.append(OpCost("attn.sdpa", L, flops, kv_read + kv_write + qo, 0.0,
                      {"kv_read_bytes": kv_read, "kv_write_bytes": kv_write, "q_o_bytes": qo}))
    ops.append(_linear("attn.o_proj", L, tokens, q, h, b, tp, split_k=True, comm=ar))
    I = model.intermediate_size  # noqa: E741 - the standard name
    if model.moe:
        E, k = model.num_local_experts, model.num_experts_per_tok
        router = _linear("moe.router", L, tokens, h, E, b, 1, split_k=False)
        ops.append(router)
        touched = E * (1.0 - (1.0 - k / E) ** tokens)  # expected distinct experts, uniform routing
        wbytes = touched * 3 * h * I * b / tp
        act = tokens * k * (h + h) * b
        ops.append(OpCost("moe.experts", L, tokens * k * 6.0 * h * I / tp, wbytes + act, ar,
                          {"experts_touched": touched, "weights_bytes": wbytes, "act_bytes": act,
                           "routing": "uniform (expected distinct experts)"}, 2 * (tp - 1) if ar else 0))
    else:
        ops.append(_linear("mlp.gate_up_proj", L, tokens, h, 2 * I, b, tp, split_k=False))
        ops.append(_linear("mlp.down_proj", L, tokens, I, h, b, tp, split_k=True, comm=ar))
    norm_bytes = 2 * tokens * h * b + h * b
    ops.append(OpCost("norm", 2 * L + 1, 4.0 * tokens * h, norm_bytes, 0.0, {"kind": "rmsnorm"}))
    last = w.bs  # logits are needed for the last position of each sequence only
    head = _linear("lm_head", 1, last, h, model.vocab_size, b, tp, split_k=False)
    head.comm_bytes = 0.0 if tp == 1 else (tp - 1) / tp * last * model.vocab_size * b  # all-gather
    head.comm_steps = tp - 1
    ops.append(head)
    for o in ops:
        o.detail["instances"] = "one per layer" if o.count == L else (
            "two per layer + final" if o.op == "norm" else "once per step")
    return ops


def footprint(model: ModelConfig, w: Workload) -> dict[str, float]:
    """Bytes each device holds: `weights` (every layer's projections, all experts and the router
    of an MoE, the norms, lm_head and the embedding table) and `kv` (the KV cache of bs x ctx tokens)."""
    b = BYTES_PER_ELEMENT[w.precision]
    tp, h, L, V = w.tp, model.hidden_size, model.num_hidden_layers, model.vocab_size
    q, kv, I = model.q_dim, model.kv_dim, model.intermediate_size  # noqa: E741 - the standard name
    attn = (h * (q + 2 * kv) + q * h) / tp
    if model.moe:
        mlp = model.num_local_experts * 3 * h * I / tp + h * model.num_local_experts  # experts + router (not split)
    else:
        mlp = 3 * h * I / tp
    weights = (L * (attn + mlp) + (2 * L + 1) * h + 2 * V * h / tp) * b
    return {"weights": weights, "kv": L * w.bs * w.ctx * 2 * kv * b / tp}


def tokens_per_step(w: Workload) -> int:
    """Tokens one step produces or processes: bs x ctx (prefill), bs (decode)."""
    return w.bs * w.ctx if w.phase == "prefill" else w.bs


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP/byte (inf-safe: 0 bytes -> 0)."""
    return flops / nbytes if nbytes else 0.0
