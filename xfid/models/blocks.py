"""Block mode: cycle lower bounds for T100 RTL blocks (the formulas agreed with the RTL owners)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from xfid.config import Target
from xfid.errors import XfidError
from xfid.models.energy import PREFIX, block_events_energy
from xfid.models.roofline import _rec
from xfid.schema import canonical_json


class BlockError(XfidError):
    """An unknown block, parameter or shape."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class BlockModel:
    """One block: its parameters, its shape fields, the op name and the cycle bound."""

    params: tuple[str, ...]
    shape: tuple[str, ...]
    op: Callable[[tuple[int, ...]], str]
    cycles: Callable[[Mapping[str, int], tuple[int, ...]], int]
    formula: str


def _gemm_tile(p: Mapping[str, int], s: tuple[int, ...]) -> int:
    m, n, k = s
    return _cdiv(m, p["ROWS"]) * _cdiv(n, p["COLS"]) * k


def _dma(p: Mapping[str, int], s: tuple[int, ...]) -> int:
    (nbytes,) = s
    bpc, lat = p["BYTES_PER_CYCLE"], p["LATENCY"]
    streaming = lat + _cdiv(nbytes, bpc)
    bursts = _cdiv(nbytes, bpc * p["BURST_LEN"])
    return max(streaming, _cdiv(bursts, p["MAX_OUTSTANDING"]) * lat)


def _omvm(p: Mapping[str, int], s: tuple[int, ...]) -> int:
    (vectors,) = s
    return (p["ROWS"] * p["PROGRAM_CYCLES_PER_ROW"] + p["DAC_CYCLES"] + p["ADC_CYCLES"]
            + vectors * p["VECTOR_II"])


BLOCKS: dict[str, BlockModel] = {
    "gemm_tile": BlockModel(("ROWS", "COLS", "DATA_W", "ACC_W"), ("M", "N", "K"),
                            lambda s: f"gemm_tile[m={s[0]},n={s[1]},k={s[2]}]", _gemm_tile,
                            "ceil(M/ROWS)*ceil(N/COLS)*K"),
    "dma": BlockModel(("BYTES_PER_CYCLE", "LATENCY", "BURST_LEN", "MAX_OUTSTANDING"), ("BYTES",),
                      lambda s: f"dma[bytes={s[0]}]", _dma,
                      "max(LATENCY + ceil(B/BYTES_PER_CYCLE), "
                      "ceil(ceil(B/(BYTES_PER_CYCLE*BURST_LEN))/MAX_OUTSTANDING)*LATENCY)"),
    "omvm": BlockModel(("ROWS", "COLS", "DAC_CYCLES", "ADC_CYCLES", "PROGRAM_CYCLES_PER_ROW", "VECTOR_II"),
                       ("VECTORS",), lambda s: f"omvm[vectors={s[0]}]", _omvm,
                       "ROWS*PROGRAM_CYCLES_PER_ROW + DAC_CYCLES + ADC_CYCLES + V*VECTOR_II"),
}


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool):
        raise BlockError(f"{what} must be a positive integer, got {v!r}")
    try:
        i = int(str(v).strip())
    except ValueError:
        raise BlockError(f"{what} must be a positive integer, got {v!r}") from None
    if i < 1:
        raise BlockError(f"{what} must be a positive integer, got {v!r}")
    return i


def resolve_params(block: str, target: Target, overrides: Mapping[str, str]) -> dict[str, int]:
    """Block parameters: the target's `blocks.<block>` table, overridden by --param.

    Raises:
        BlockError: unknown block or parameter (valid ones listed), a missing or non-integer value.
    """
    if block not in BLOCKS:
        raise BlockError(f"unknown block {block!r}; valid blocks: {', '.join(BLOCKS)}")
    model = BLOCKS[block]
    table = target.extra.get("blocks", {})
    base = table.get(block, {}) if isinstance(table, dict) else {}
    params: dict[str, int] = {}
    for src, vals in ((f"xfid.toml targets.{target.name}.blocks.{block}", base), ("--param", overrides)):
        for k, v in vals.items():
            if k == "energy" and src.startswith("xfid.toml"):
                continue  # the block's energy table (pj_per_EVENT), not a parameter
            if k not in model.params:
                raise BlockError(f"unknown parameter {k!r} for block {block!r} (from {src}); "
                                 f"valid parameters: {', '.join(model.params)}")
            params[k] = _int(v, f"parameter {k} of block {block!r}")
    missing = [p for p in model.params if p not in params]
    if missing:
        raise BlockError(f"block {block!r} on target {target.name!r} has no value for {', '.join(missing)}; "
                         f"pass --param {missing[0]}=N or add it under [targets.{target.name}.blocks.{block}]")
    return params


def parse_shape(block: str, text: str) -> tuple[int, ...]:
    """A --shape value for `block` (gemm_tile: M,N,K; dma: BYTES; omvm: VECTORS)."""
    fields = BLOCKS[block].shape
    parts = text.split(",")
    if len(parts) != len(fields):
        raise BlockError(f"--shape for block {block!r} is {','.join(fields)}, got {text!r}")
    return tuple(_int(p, f"--shape {f}") for p, f in zip(parts, fields, strict=True))


SHAPE_EVENTS: dict[str, Callable[[tuple[int, ...]], dict[str, int]]] = {
    "gemm_tile": lambda s: {"macs": s[0] * s[1] * s[2]},
    "dma": lambda s: {"bytes": s[0]},
    "omvm": lambda s: {"vectors": s[0]},
}
"""Event counts a block's shape fixes exactly (the probe's counter names)."""


def block_energy_table(target: Target, block: str) -> dict[str, float] | None:
    """`[targets.NAME.blocks.BLOCK.energy]` (pj_per_EVENT), or None."""
    table = target.extra.get("blocks", {})
    spec = table.get(block, {}) if isinstance(table, dict) else {}
    e = spec.get("energy") if isinstance(spec, dict) else None
    return e if isinstance(e, dict) else None


def _energy_bound(table: dict[str, float], shape_events: dict[str, int], cycles: int) -> tuple[float, dict[str, Any]]:
    """Least energy of one block op: events the shape fixes and the cycle bound priced at pj_per_EVENT;
    events the model cannot bound from below (e.g. stall cycles) count 0."""
    events: dict[str, int] = {"cycles": cycles, **shape_events}
    known = {k: v for k, v in table.items() if k[len(PREFIX):] in events}
    joules, prov = block_events_energy(known, events)
    zero = sorted(k[len(PREFIX):] for k in table if k not in known)
    if zero:
        prov["counted_as_zero"] = zero
    return joules or 0.0, prov


def block_bounds(block: str, target: Target, overrides: Mapping[str, str], shapes: list[str]) -> list[dict[str, Any]]:
    """Cycle bounds of `block` for each shape: one `cycles` record per shape (fidelity roofline,
    workload block/<block>, op e.g. `gemm_tile[m=8,n=8,k=16]`, config with `block` and `params`)."""
    params = resolve_params(block, target, overrides)
    if not shapes:
        raise BlockError(f"block {block!r} needs --shape {','.join(BLOCKS[block].shape)}")
    model = BLOCKS[block]
    out = []
    for s in dict.fromkeys(parse_shape(block, x) for x in shapes):
        cfg = {"model": "xfid-roofline", "block": block, "params": params, "formula": model.formula,
               "shape": dict(zip(model.shape, s, strict=True)), "limiter": "cycles"}
        cycles = model.cycles(params, s)
        out.append(_rec(target.name, f"block/{block}", model.op(s), "cycles", float(cycles),
                        "cycles", canonical_json(cfg)))
        table = block_energy_table(target, block)
        if table is not None:
            joules, ecfg = _energy_bound(table, SHAPE_EVENTS[block](s), cycles)
            out.append(_rec(target.name, f"block/{block}", model.op(s), "energy", joules, "J",
                            canonical_json({**cfg, "limiter": "energy", "lower_bound": True, "energy": ecfg})))
    return out
