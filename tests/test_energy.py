"""Energy at every fidelity and memory levels: roofline energy by hand, placement, config errors,
RTL energy from probe counts, and energy through correlation, calibration and the competitive view."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from xfid.config import load_config
from xfid.errors import ConfigError, XfidError
from xfid.models import blocks, llm, roofline
from xfid.models.llm import ModelConfig

PJ = 1e-12
TINY = ModelConfig("tiny", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128, vocab_size=100)
TINY_JSON = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "intermediate_size": 128, "vocab_size": 100}
TINY_TARGET = """
[targets.tiny]
peak_flops = { bf16 = 1e12 }
mem_bw = 1e9
[targets.tiny.energy]
pj_per_flop = { bf16 = 0.5 }
pj_per_byte = { hbm = 10.0 }
static_w = 2.0
"""


def _cfg(tmp_path, text: str, bundled: bool = False):
    p = tmp_path / "xfid.toml"
    p.write_text(text)
    return load_config(p, bundled=bundled)


def _bounds(target, wid="tiny/decode/bs2/ctx8/bf16", placement=None, model=TINY):
    w = llm.parse_workload(wid)
    res = roofline.workload_bounds(model, w, target, placement)
    return {b.op: b for b in res.bounds}, {m: (v, c) for m, v, _, c in res.totals}, res


# --- the roofline energy, every term by hand -------------------------------------------------
def test_energy_sums_by_hand_on_a_tiny_model(tmp_path):
    """tiny: h 64, L 2, 4 heads of d 16 (q 64), 2 KV heads (kv 32), I 128, V 100; decode bs2 ctx8 bf16 (b 2)."""
    ops, totals, res = _bounds(_cfg(tmp_path, TINY_TARGET).target("tiny"))
    # op: (count, flops, bytes) of one instance, each written out
    hand = {
        "attn.qkv_proj": (2, 2 * 2 * 64 * (64 + 2 * 32), 64 * 128 * 2 + 2 * 64 * 2 + 2 * 128 * 2),     # 32768, 17152
        "attn.sdpa": (2, 4 * 2 * 4 * 16 * 8, 2 * 8 * 2 * 32 * 2 + 2 * 2 * 32 * 2 + 2 * 2 * 64 * 2),    # 4096, 2816
        "attn.o_proj": (2, 2 * 2 * 64 * 64, 64 * 64 * 2 + 2 * 64 * 2 + 2 * 64 * 2),                    # 16384, 8704
        "mlp.gate_up_proj": (2, 2 * 2 * 64 * 256, 64 * 256 * 2 + 2 * 64 * 2 + 2 * 256 * 2),            # 65536, 34048
        "mlp.down_proj": (2, 2 * 2 * 128 * 64, 128 * 64 * 2 + 2 * 128 * 2 + 2 * 64 * 2),               # 32768, 17152
        "norm": (5, 4 * 2 * 64, 2 * 2 * 64 * 2 + 64 * 2),                                               # 512, 640
        "lm_head": (1, 2 * 2 * 64 * 100, 64 * 100 * 2 + 2 * 64 * 2 + 2 * 100 * 2),                     # 25600, 13456
    }
    assert hand["attn.qkv_proj"][1:] == (32768, 17152) and hand["lm_head"][1:] == (25600, 13456)
    for op, (count, flops, nbytes) in hand.items():
        b = ops[op]
        assert (b.count, b.flops, b.bytes) == (count, flops, nbytes), op
        # E_op = flops x 0.5 pJ (bf16) + bytes x 10 pJ (all in hbm)
        assert b.energy == pytest.approx(flops * 0.5 * PJ + nbytes * 10.0 * PJ, rel=1e-12), op
        assert b.limiter == "memory" and b.latency == pytest.approx(nbytes / 1e9, rel=1e-12)
    assert ops["attn.qkv_proj"].energy == pytest.approx((16384 + 171520) * PJ, rel=1e-12)
    # the step: every op memory-bound, so t_bound = all bytes x count / 1e9 B/s
    step_bytes = 2 * (17152 + 2816 + 8704 + 34048 + 17152) + 5 * 640 + 1 * 13456
    step_flops = 2 * (32768 + 4096 + 16384 + 65536 + 32768) + 5 * 512 + 1 * 25600
    assert (step_bytes, step_flops) == (176_400, 331_264)
    t_bound = 176_400 / 1e9                                   # 176.4 us
    dynamic = 331_264 * 0.5 * PJ + 176_400 * 10.0 * PJ        # 165,632 pJ + 1,764,000 pJ
    static = 2.0 * t_bound                                    # static_w x t_bound = 352.8 uJ
    energy = dynamic + static                                 # 354.729632 uJ
    assert energy == pytest.approx(354.729632e-6, rel=1e-12)
    assert totals["tpot"][0] == pytest.approx(t_bound, rel=1e-12)
    assert totals["energy"][0] == pytest.approx(energy, rel=1e-12)
    assert totals["energy"][1]["dynamic_j"] == pytest.approx(dynamic, rel=1e-12)
    assert totals["energy"][1]["static_j"] == pytest.approx(static, rel=1e-12)
    assert totals["energy_per_token"][0] == pytest.approx(energy / 2, rel=1e-12)   # decode: bs tokens per step
    assert totals["tokens_per_joule"][0] == pytest.approx(2 / energy, rel=1e-12)
    assert totals["power"][0] == pytest.approx(energy / t_bound, rel=1e-12)         # 2.0109 W
    units = {r["metric"]: r["unit"] for r in res.records() if r["op"] == ""}
    assert units["energy"] == "J" and units["energy_per_token"] == "J/token" and units["tokens_per_joule"] == "tokens/J"
    assert units["power"] == "W"
    assert sum(1 for r in res.records() if r["metric"] == "energy" and r["op"]) == 7


def test_prefill_tokens_and_interconnect_energy(tmp_path):
    text = TINY_TARGET.replace("pj_per_byte = { hbm = 10.0 }", "pj_per_byte = { hbm = 10.0, interconnect = 4.0 }")
    text = text.replace("mem_bw = 1e9", "mem_bw = 1e9\ninterconnect_bw = 1e8\ninterconnect_latency_s = 1e-6")
    ops, totals, _ = _bounds(_cfg(tmp_path, text).target("tiny"), "tiny/prefill/bs1/ctx4/bf16/tp2")
    o = ops["attn.o_proj"]
    comm = 2 * (2 - 1) / 2 * 4 * 64 * 2                   # ring all-reduce of [T=4 x h=64] bf16: 512 B
    assert o.comm_bytes == comm
    assert o.times["interconnect"] == pytest.approx(comm / 1e8 + 2 * (2 - 1) * 1e-6, rel=1e-12)  # + 2(N-1) steps
    assert o.limiter == "interconnect"
    assert o.energy == pytest.approx(o.flops * 0.5 * PJ + o.bytes * 10.0 * PJ + comm * 4.0 * PJ, rel=1e-12)
    assert ops["lm_head"].times["interconnect"] == pytest.approx(ops["lm_head"].comm_bytes / 1e8 + 1e-6, rel=1e-12)
    assert totals["energy_per_token"][0] == pytest.approx(totals["energy"][0] / 4, rel=1e-12)  # prefill: bs x ctx


def test_target_without_energy_has_no_energy_rows(tmp_path):
    t = _cfg(tmp_path, "[targets.plain]\npeak_flops = { bf16 = 1e12 }\nmem_bw = 1e9\n").target("plain")
    _, totals, res = _bounds(t)
    assert set(totals) == {"tpot", "itl", "throughput_tokens"}
    assert {r["metric"] for r in res.records()} == {"latency", "flops", "bytes", "tpot", "itl", "throughput_tokens"}
    assert all("energy" not in json.loads(r["config"]) for r in res.records())
    assert all(b.energy is None for b in res.bounds)


def test_energy_table_missing_a_precision_or_level_used(tmp_path):
    t = _cfg(tmp_path, TINY_TARGET.replace("pj_per_flop = { bf16 = 0.5 }", "pj_per_flop = { fp8 = 0.5 }")
             .replace("peak_flops = { bf16 = 1e12 }", "peak_flops = { bf16 = 1e12, fp8 = 1e12 }")).target("tiny")
    with pytest.raises(ConfigError, match=r"no energy pj_per_flop for precision 'bf16'; it has fp8 "
                                          r"\(add pj_per_flop.bf16 under \[targets.tiny.energy\]\)"):
        _bounds(t)
    t = _cfg(tmp_path, TINY_TARGET.replace("mem_bw = 1e9", "mem_bw = 1e9\nsram_bw = 1e10")).target("tiny")
    with pytest.raises(ConfigError, match="moves bytes from memory level 'sram' but its energy table has no "
                                          "pj_per_byte for it"):
        _bounds(t, placement={"act": "sram"})


# --- memory levels and placement --------------------------------------------------------------
LEVELS = """
[targets.tiny]
peak_flops = { bf16 = 1e12 }
[targets.tiny.memory.hbm]
bw = 1e9
capacity = 100000
[targets.tiny.memory.cxl]
bw = 1e8
capacity = 1e6
latency_s = 1e-6
[targets.tiny.energy]
pj_per_flop = { bf16 = 0.5 }
pj_per_byte = { hbm = 10.0, cxl = 30.0 }
"""
TINY_WEIGHTS = (2 * (64 * 128 + 64 * 64 + 3 * 64 * 128) + 5 * 64 + 2 * 100 * 64) * 2  # layers, norms, head + embedding
TINY_KV = 2 * 2 * 8 * 2 * 32 * 2                                                        # L x bs x ctx x 2kv x b


def test_placement_by_capacity_spills_weights_to_the_next_level(tmp_path):
    assert (TINY_WEIGHTS, TINY_KV) == (173_696, 4096)
    assert llm.footprint(TINY, llm.parse_workload("tiny/decode/bs2/ctx8/bf16")) == {"weights": 173_696, "kv": 4096}
    ops, totals, _ = _bounds(_cfg(tmp_path, LEVELS).target("tiny"))
    f_hbm = 100_000 / 173_696                       # hbm holds 100 kB of the weights, cxl the rest and the KV cache
    qkv = ops["attn.qkv_proj"]
    w, act = 64 * 128 * 2, 2 * 64 * 2 + 2 * 128 * 2
    lv = qkv.provenance["bytes_by_level"]
    assert lv["hbm"] == pytest.approx(w * f_hbm + act, rel=1e-12)
    assert lv["cxl"] == pytest.approx(w * (1 - f_hbm), rel=1e-12)
    assert qkv.times["memory:cxl"] == pytest.approx(1e-6 + w * (1 - f_hbm) / 1e8, rel=1e-12)
    assert qkv.limiter == "memory:cxl" and qkv.latency == qkv.times["memory:cxl"]
    assert qkv.energy == pytest.approx(qkv.flops * 0.5 * PJ + lv["hbm"] * 10 * PJ + lv["cxl"] * 30 * PJ, rel=1e-12)
    sdpa = ops["attn.sdpa"].provenance["bytes_by_level"]
    assert sdpa == {"cxl": 2048 + 256, "hbm": 512}   # KV read + write in cxl, Q and O in hbm
    place = ops["norm"].provenance["placement"]
    assert place["fractions"]["kv"] == {"cxl": 1.0} and place["how"]["kv"] == "by capacity"
    assert totals["tpot"][1]["limiter"] == "memory:cxl"


def test_explicit_placement_and_overlap_false(tmp_path):
    t = _cfg(tmp_path, LEVELS.replace("capacity = 100000", "capacity = 1e6")).target("tiny")
    ops, _, _ = _bounds(t)
    assert set(ops["attn.sdpa"].provenance["bytes_by_level"]) == {"hbm"}   # everything fits in hbm
    ops, _, _ = _bounds(t, placement={"kv": "cxl"})
    sdpa = ops["attn.sdpa"]
    assert sdpa.provenance["bytes_by_level"] == {"hbm": 512, "cxl": 2304}
    assert sdpa.times["memory:cxl"] == pytest.approx(1e-6 + 2304 / 1e8, rel=1e-12)
    assert sdpa.limiter == "memory:cxl" and sdpa.provenance["placement"]["how"]["kv"] == "--placement"
    serial = _cfg(tmp_path, LEVELS.replace("capacity = 100000", "capacity = 1e6")
                  .replace("[targets.tiny.memory.hbm]", "[targets.tiny.memory]\noverlap = false\n[targets.tiny.memory.hbm]"))
    ops, _, _ = _bounds(serial.target("tiny"), placement={"kv": "cxl"})
    s = ops["attn.sdpa"]
    assert s.latency == pytest.approx(s.times["compute"] + 512 / 1e9 + 1e-6 + 2304 / 1e8, rel=1e-12)
    assert s.limiter == "memory:cxl" and s.provenance["overlap"] is False


def test_placement_that_does_not_fit_names_the_capacities(tmp_path):
    t = _cfg(tmp_path, LEVELS).target("tiny")
    with pytest.raises(XfidError, match=r"placement does not fit on target 'tiny': weights 173.7 kB placed in hbm, "
                                        r"whose capacity is 100 kB \(capacities: hbm 100 kB, cxl 1 MB\)"):
        _bounds(t, placement={"weights": "hbm"})
    small = _cfg(tmp_path, LEVELS.replace("capacity = 1e6", "capacity = 50000")).target("tiny")
    with pytest.raises(XfidError, match=r"weights 173.7 kB \+ kv 4.096 kB per device, and its capacities are "
                                        r"hbm 100 kB, cxl 50 kB \(23.7 kB of weights left over\)"):
        _bounds(small)
    with pytest.raises(XfidError, match="has no memory level 'ddr'; its levels: hbm, cxl"):
        _bounds(t, placement={"kv": "ddr"})


@pytest.mark.parametrize("args,message", [
    (("--placement", "kv"), "--placement expects CLASS=LEVEL pairs like weights=hbm,kv=cxl"),
    (("--placement", "cache=hbm"), "unknown class 'cache'; classes: weights, kv, act"),
    (("--placement", "kv=hbm,kv=cxl"), "names 'kv' twice"),
    (("--placement", "kv=hbm"), "placement does not fit on target 't100-a0': kv 687.2 GB placed in hbm, whose "
                                "capacity is 144 GB (capacities: hbm 144 GB, cxl 1 TB, sram unlimited (only by --placement))"),
])
def test_placement_cli_errors(xfid_cli, args, message):
    r = xfid_cli("roofline", "--target", "t100-a0", "--workload", "llama3-70b/decode/bs64/ctx32768/bf16", *args)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and message in r.output, r.output


def test_what_if_table_kv_in_hbm_or_cxl(xfid_cli):
    """The docs/roofline.md what-if: llama3-70b decode bs64 ctx32768 bf16 tp8 on t100-a0, KV in HBM vs CXL."""
    cfg = load_config(None)
    t = cfg.target("t100-a0")
    wid = "llama3-70b/decode/bs64/ctx32768/bf16/tp8"
    hbm_ops, hbm, _ = _bounds(t, wid, {"kv": "hbm"}, llm.BUILTIN_MODELS["llama3-70b"])
    cxl_ops, cxl, _ = _bounds(t, wid, {"kv": "cxl"}, llm.BUILTIN_MODELS["llama3-70b"])
    kv_read = 64 * 32768 * 2 * 1024 * 2 / 8            # bs x ctx x 2kv x b / N = 1,073,741,824 B per layer
    kv = kv_read + 64 * 2 * 1024 * 2 / 8               # + this step's K,V write
    qo = 2 * 64 * 8192 * 2 / 8
    assert hbm_ops["attn.sdpa"].latency == pytest.approx((kv + qo) / 2.0e12, rel=1e-12)          # 537.0 us
    assert cxl_ops["attn.sdpa"].latency == pytest.approx(6e-7 + kv / 2.56e11, rel=1e-12)         # 4.195 ms
    assert cxl_ops["attn.sdpa"].limiter == "memory:cxl"
    others = sum(b.latency * b.count for op, b in hbm_ops.items() if op != "attn.sdpa")
    assert hbm["tpot"][0] == pytest.approx(others + 80 * (kv + qo) / 2.0e12, rel=1e-12)
    assert cxl["tpot"][0] == pytest.approx(others + 80 * (6e-7 + kv / 2.56e11), rel=1e-12)
    assert round(hbm["tpot"][0] * 1e3, 2) == 53.19 and round(cxl["tpot"][0] * 1e3, 1) == 345.8
    assert round(hbm["throughput_tokens"][0]) == 1203 and round(cxl["throughput_tokens"][0]) == 185
    e_sdpa_hbm = hbm_ops["attn.sdpa"].flops * 0.35 * PJ + (kv + qo) * 6.0 * PJ
    e_sdpa_cxl = cxl_ops["attn.sdpa"].flops * 0.35 * PJ + qo * 6.0 * PJ + kv * 20.0 * PJ
    assert hbm_ops["attn.sdpa"].energy == pytest.approx(e_sdpa_hbm, rel=1e-12)
    assert cxl_ops["attn.sdpa"].energy == pytest.approx(e_sdpa_cxl, rel=1e-12)
    assert round(hbm["energy_per_token"][0], 4) == 0.0528 and round(cxl["energy_per_token"][0], 3) == 0.255
    r = xfid_cli("roofline", "--target", "t100-a0", "--workload", wid, "--placement", "weights=hbm,kv=cxl")
    assert r.exit_code == 0 and "memory:cxl" in r.output and "tpot (bound): 345.8 ms" in r.output


# --- config validation ---------------------------------------------------------------------------
@pytest.mark.parametrize("text,message", [
    ("[targets.x.energy]\npj_per_flop = { bf61 = 0.3 }\n",
     "targets.x.energy.pj_per_flop has unknown precision 'bf61'; did you mean 'bf16'? known: fp32, tf32, bf16"),
    ("[targets.x.energy]\npj_per_byte = { dram = 20.0 }\n",
     "targets.x.energy.pj_per_byte has unknown level 'dram'; known: hbm, interconnect (declare "
     "[targets.x.memory.LEVEL] to add a level)"),
    ("[targets.x]\nsram_bw = 1e12\n[targets.x.memory.hbm]\nbw = 1e12\n[targets.x.memory.cxl]\nbw = 1e11\n"
     "[targets.x.energy]\npj_per_byte = { ddr = 20.0 }\n", "known: hbm, cxl, sram, interconnect"),
    ("[targets.x.energy]\npj_per_byte = { hbm = -6.0 }\n", "targets.x.energy.pj_per_byte.hbm must not be negative"),
    ("[targets.x.energy]\npj_per_flop = { bf16 = nan }\n",
     "targets.x.energy.pj_per_flop.bf16 must be a finite number, got nan"),
    ("[targets.x.energy]\nstatic_w = -40\n", "targets.x.energy.static_w must not be negative, got -40"),
    ("[targets.x.energy]\nstatic_w = inf\n", "targets.x.energy.static_w must be a finite number"),
    ("[targets.x.energy]\npj_per_flop = 0.3\n", "targets.x.energy.pj_per_flop must be a table"),
    ("[targets.x.energy]\npj_per_bit = { hbm = 1 }\n", "[targets.x.energy] has unknown key 'pj_per_bit'"),
    ("[targets.x]\nenergy = 3\n", "targets.x.energy must be a table"),
    ("[targets.x.memory.cxl]\ncapacity = 1e12\n", "targets.x.memory.cxl needs bw"),
    ("[targets.x.memory.cxl]\nbw = 1e11\ncapacity = 0\n", "targets.x.memory.cxl.capacity must be greater than 0"),
    ("[targets.x.memory.cxl]\nbw = nan\n", "targets.x.memory.cxl.bw must be a finite number, got nan"),
    ("[targets.x.memory.cxl]\nbw = 1e11\nlatency_s = -1e-7\n", "targets.x.memory.cxl.latency_s must not be negative"),
    ("[targets.x.memory.cxl]\nbw = 1e11\nlatncy_s = 1e-7\n", "did you mean 'latency_s'?"),
    ("[targets.x.memory]\noverlap = 1\n[targets.x.memory.hbm]\nbw = 1e12\n", "targets.x.memory.overlap must be true or false"),
    ("[targets.x]\nmem_bw = 2e12\n[targets.x.memory.hbm]\nbw = 4e12\n", "mem_bw = 2000000000000.0 and "
     "targets.x.memory.hbm.bw = 4000000000000.0 disagree"),
    ("[targets.x]\ninterconnect_latency_s = -1\n", "targets.x.interconnect_latency_s must not be negative"),
    ("[targets.x.blocks.dma.energy]\nbytes = 2.0\n", "targets.x.blocks.dma.energy has key 'bytes'; every key is pj_per_EVENT"),
    ("[targets.x.blocks.dma.energy]\npj_per_bytes = -2.0\n", "targets.x.blocks.dma.energy.pj_per_bytes must not be negative"),
    ("[targets.x.blocks.dma.energy]\npj_per_bytes = nan\n", "targets.x.blocks.dma.energy.pj_per_bytes must be a finite number"),
])
def test_config_energy_and_memory_errors(tmp_path, text, message):
    with pytest.raises(ConfigError) as e:
        _cfg(tmp_path, text)
    assert message in str(e.value) and str(tmp_path / "xfid.toml") in str(e.value)


def test_config_errors_exit_2_from_the_cli(xfid_cli, tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[targets.x.energy]\npj_per_byte = { dram = 20.0 }\n")
    r = xfid_cli("--config", p, "roofline", "--target", "x", "--gemm", "8,8,8")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "unknown level 'dram'" in r.output


def test_bundled_targets_have_energy_and_block_energy_tables():
    cfg = load_config(None)
    for name in ("a100-sxm", "mi210", "h100-sxm", "h200-sxm", "mi300x", "t100-a0"):
        assert cfg.target(name).extra["energy"]["pj_per_byte"]["hbm"] > 0, name
    t = cfg.target("t100-a0")
    assert set(t.extra["memory"]["levels"]) == {"hbm", "cxl"} and t.extra["memory"]["levels"]["hbm"]["bw"] == t.mem_bw
    assert blocks.block_energy_table(t, "dma") == {"pj_per_bytes": 2.0, "pj_per_cycles": 1.5}
    assert blocks.resolve_params("dma", t, {})["LATENCY"] == 20  # the energy table is not a parameter


# --- RTL energy from probe counts, and energy through the engine --------------------------------
RTL_CONFIG = """
[targets.t100-a0]
invented = true
clock_hz = 1.0e9
mem_bw = 2.0e12
peak_flops = { bf16 = 400e12 }
[targets.t100-a0.blocks.dma]
BYTES_PER_CYCLE = 16
LATENCY = 20
BURST_LEN = 4
MAX_OUTSTANDING = 4
[targets.t100-a0.blocks.dma.energy]
pj_per_bytes = 3.0
pj_per_cycles = 1.0
pj_per_stall_cycles = 0.5
"""


def _engine_rows(store_path, config):
    from xfid.engine.pipeline import correlate
    from xfid.store import Store

    return correlate(Store(store_path, create=False), config).rows


def test_rtl_energy_from_probe_counts_correlates_and_calibrates(xfid_cli, tmp_path, fixtures):
    from xfid.engine.calibration import calibrate
    from xfid.store import Store

    probe = fixtures / "rtl" / "probe_output"
    for f in ("xfid_rtl.jsonl", "results.xml"):
        shutil.copy(probe / f, tmp_path / f)
    cfg_path = tmp_path / "rtl.toml"
    cfg_path.write_text(RTL_CONFIG)
    r = xfid_cli("--config", cfg_path, "ingest", "--adapter", "cocotb", tmp_path / "xfid_rtl.jsonl")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in (probe / "xfid_rtl.jsonl").read_text().splitlines()]
    recs = [json.loads(x) for x in xfid_cli("export", "--format", "jsonl").output.splitlines()]
    energy = {x["op"]: x for x in recs if x["metric"] == "energy"}
    assert len(energy) == len(lines) == 6
    for rec in lines:
        c = rec["counters"]
        e = energy[rec["op"]]
        # bytes x 3 pJ + cycles x 1 pJ + stall_cycles x 0.5 pJ, from the probe line's own counts
        assert e["value"] == pytest.approx((c["bytes"] * 3.0 + rec["cycles"] * 1.0 + c["stall_cycles"] * 0.5) * PJ)
        assert e["fidelity"] == "rtl" and e["unit"] == "J"
        ev = json.loads(e["config"])["energy"]["events"]
        assert ev == {"bytes": {"count": c["bytes"], "pj_each": 3.0}, "cycles": {"count": rec["cycles"], "pj_each": 1.0},
                      "stall_cycles": {"count": c["stall_cycles"], "pj_each": 0.5}}
    ops = sorted(energy, key=lambda o: int(o.split("=")[1].rstrip("]")))
    failed = {op for op, x in energy.items() if "failed_test" in (x["flags"] or "")}
    assert failed == {"dma[bytes=512]"}  # results.xml says that test failed: its records are not references
    off = "dma[bytes=1024]"
    # an architecture model's energies for the same ops: within 10% of the RTL estimate, but one 40% low
    rows = ["fidelity,target,workload,op,metric,stat,value,unit,run,timestamp,config"]
    for op in ops:
        v = energy[op]["value"] * (0.6 if op == off else 1.05)
        rows.append(f'archmodel,t100-a0,block/dma,"{op}",energy,value,{v!r},J,em-1,2026-11-27T09:00:00Z,'
                    '"{""limiter"":""memory""}"')
    (tmp_path / "arch.csv").write_text("\n".join(rows) + "\n")
    assert xfid_cli("--config", cfg_path, "ingest", tmp_path / "arch.csv").exit_code == 0
    # the roofline's least energy of the same dma ops: shape bytes and the cycle bound priced, stalls as 0
    args = [a for op in ops for a in ("--shape", op.split("=")[1].rstrip("]"))]
    r = xfid_cli("--config", cfg_path, "roofline", "--target", "t100-a0", "--block", "dma", *args, "--ingest")
    assert r.exit_code == 0, r.output
    config = load_config(cfg_path)
    rows_df = _engine_rows(xfid_cli.store, config)
    e = rows_df[rows_df["metric"] == "energy"]
    arch = e[(e["candidate"] == "archmodel") & (e["reference"] == "rtl")]
    assert len(arch) == 6
    kinds = dict(zip(arch["op"], arch["kind"], strict=True))
    assert kinds.pop(off) == "over_tolerance" and kinds.pop("dma[bytes=512]") == "missing_reference"
    assert set(kinds.values()) == {"ok"}
    bound = e[(e["candidate"] == "roofline") & (e["reference"] == "rtl")]
    bound_kinds = dict(zip(bound["op"], bound["kind"], strict=True))
    assert bound_kinds.pop("dma[bytes=512]") == "missing_reference"
    assert len(bound_kinds) == 5 and set(bound_kinds.values()) == {"ok"}  # the RTL never spends less than the bound
    cal = calibrate(Store(xfid_cli.store, create=False), config, "archmodel", "rtl", "t100-a0", metrics=("energy",))
    assert len(cal.factors) and cal.summary["metrics"] == ["energy"]


def test_energy_bound_direction_in_the_engine(xfid_cli, tmp_path):
    """A measured J/token below the least energy, or tokens/J above its bound, is a bound violation;
    the power at the bound is shown, never flagged."""
    cfg_path = tmp_path / "tiny.toml"
    cfg_path.write_text(TINY_TARGET)
    mc = tmp_path / "tiny.json"
    mc.write_text(json.dumps(TINY_JSON))
    wid = "tiny/decode/bs2/ctx8/bf16"
    r = xfid_cli("--config", cfg_path, "roofline", "--target", "tiny", "--workload", wid, "--model-config", mc,
                 "--ingest")
    assert r.exit_code == 0, r.output
    bound_jpt, bound_tpj = 354.729632e-6 / 2, 2 / 354.729632e-6
    rows = ["fidelity,target,workload,op,metric,stat,value,unit,run,timestamp"]
    for metric, value, unit in (("energy_per_token", bound_jpt * 0.5, "J/token"),   # below the least energy
                                ("tokens_per_joule", bound_tpj * 2.0, "tokens/J"),  # above the most tokens/J
                                ("power", 50.0, "W"),                               # 25x the power at the bound
                                ("energy", 1.0, "J")):                              # far above: fine
        rows.append(f"measured,tiny,{wid},,{metric},mean,{value!r},{unit},m-1,2026-11-27T09:00:00Z")
    rows.append(f"measured,tiny,{wid},attn.qkv_proj,energy,mean,{1.5 * 187904e-12!r},J,m-1,2026-11-27T09:00:00Z")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    assert xfid_cli("--config", cfg_path, "ingest", tmp_path / "m.csv").exit_code == 0
    df = _engine_rows(xfid_cli.store, load_config(cfg_path))
    df = df[(df["candidate"] == "roofline") & (df["reference"] == "measured")]
    kind = {(o, m): k for o, m, k in zip(df["op"], df["metric"], df["kind"], strict=True)}
    assert kind[("", "energy_per_token")] == "bound_violation"
    assert kind[("", "tokens_per_joule")] == "bound_violation"
    assert kind[("", "power")] == "ok" and kind[("", "energy")] == "ok"
    assert kind[("attn.qkv_proj", "energy")] == "ok"


def test_competitive_view_t100_energy_cells_name_their_fidelity():
    from xfid.report.views import competitive_view

    ts = pd.Timestamp("2026-11-25", tz="UTC")
    w = "llama3-8b/decode/bs8/ctx2048/bf16"
    recs = pd.DataFrame([
        ("roofline", "t100-a0", w, "", "throughput_tokens", "value", 929.75),
        ("roofline", "t100-a0", w, "", "tokens_per_joule", "value", 16.24),
        ("roofline", "t100-a0", w, "", "energy_per_token", "value", 0.0616),
        ("roofline", "t100-a0", w, "", "itl", "value", 0.0086),
        ("archmodel", "t100-a0", w, "", "itl", "value", 0.0102),
        ("measured", "h100-sxm", w, "", "throughput_tokens", "mean", 700.0),
        ("measured", "h100-sxm", w, "", "tokens_per_joule", "value", 1.808),
        ("measured", "h100-sxm", w, "", "energy_per_token", "value", 0.5531),
        ("measured", "h100-sxm", w, "", "itl", "mean", 0.0110),
        ("measured", "mi300x", w, "", "tokens_per_joule", "value", 2.0),  # J/token derived: 1 / (tokens/J)
        ("measured", "h100-sxm", w, "", "ttft", "median", 0.143),
        ("roofline", "t100-a0", "llama3-8b/prefill/bs1/ctx2048/bf16", "", "ttft", "value", 0.0412),
    ], columns=["fidelity", "target", "workload", "op", "metric", "stat", "value"]).assign(unit="", timestamp=ts)
    v = competitive_view(recs, "t100-a0")
    for r in v["rows"]:  # these records carry no provenance: the cells' source_path/source_loc are empty
        for c in [r["ours"], *r["by_target"].values()]:
            assert c.pop("source_path").strip(" +") == "" and c.pop("source_loc").strip(" +") == ""
    by = {r["metric"]: r for r in v["rows"]}
    assert [r["label"] for r in v["rows"]] == ["tokens/s", "tokens/s/W", "J/token", "TTFT", "ITL"]
    # a decode workload's TTFT: the prefill of one of its prompts alone bounds every request's first token
    assert by["ttft"]["ours"] == {"value": 0.0412, "fidelity": "roofline", "stat": "value of prefill/bs1/ctx2048/bf16",
                                  "derived": False}
    assert by["ttft"]["advantage"] == pytest.approx(0.143 / 0.0412)
    assert by["tokens_per_joule"]["ours"] == {"value": 16.24, "fidelity": "roofline", "stat": "value", "derived": False}
    assert by["energy_per_token"]["ours"]["fidelity"] == "roofline"
    assert by["itl"]["ours"]["fidelity"] == "archmodel"  # the highest fidelity that has it
    assert by["energy_per_token"]["by_target"]["mi300x"] == {"value": 0.5, "fidelity": "measured", "stat": "derived",
                                                             "derived": True}
    assert by["energy_per_token"]["advantage"] == pytest.approx(0.5 / 0.0616)  # lower is better, best rival 0.5
    assert by["tokens_per_joule"]["advantage"] == pytest.approx(16.24 / 2.0)
    assert math.isclose(by["itl"]["advantage"], 0.0110 / 0.0102)


def test_plan_bounds_adds_the_first_token_prefill_of_a_decode_workload():
    import pyarrow as pa

    from xfid.models.auto import first_token_workload, plan_bounds

    assert first_token_workload("llama3-70b/decode/bs64/ctx32768/bf16/tp8") == "llama3-70b/prefill/bs1/ctx32768/bf16/tp8"
    assert first_token_workload("llama3-8b/prefill/bs8/ctx2048/bf16") is None
    assert first_token_workload("llama3-8b/serve/in2048/out256/bf16") is None
    recs = pa.table({"fidelity": ["measured"], "target": ["t100-a0"], "workload": ["llama3-8b/decode/bs8/ctx2048/bf16"],
                     "op": [""], "config": [None]})
    plans, notes = plan_bounds(recs, load_config(None))
    assert [n for n, _ in plans] == ["roofline-t100-a0-llama3-8b_decode_bs8_ctx2048_bf16.csv",
                                     "roofline-t100-a0-llama3-8b_prefill_bs1_ctx2048_bf16.csv"] and not notes
    ttft = [r for r in plans[1][1] if r["metric"] == "ttft"]
    assert len(ttft) == 1 and ttft[0]["workload"] == "llama3-8b/prefill/bs1/ctx2048/bf16"
