"""Roofline model: op decomposition and bounds checked against hand calculations."""

from __future__ import annotations

import json

import pytest

from xfid.config import load_config
from xfid.errors import ConfigError, InputError, XfidError
from xfid.models import blocks, llm, roofline

H100_BW = 3.35e12
H100_PEAK = 989e12


@pytest.fixture(scope="module")
def cfg():
    return load_config(None)


def _ops(workload: str, target: str, cfg, model_config=None):
    w = llm.parse_workload(workload)
    res = roofline.workload_bounds(llm.resolve_model(w.model, model_config), w, cfg.target(target))
    return {b.op: b for b in res.bounds}, res


def test_llama3_8b_decode_bs1_hand_calculation(cfg):
    ops, res = _ops("llama3-8b/decode/bs1/ctx2048/bf16", "h100-sxm", cfg)
    qkv = ops["attn.qkv_proj"]
    weights = 4096 * (4096 + 2 * 1024) * 2
    assert qkv.provenance["weights_bytes"] == weights == 50_331_648
    assert qkv.bytes == weights + 4096 * 2 + 6144 * 2
    assert qkv.flops == 2 * 4096 * 6144
    assert qkv.limiter == "memory"
    assert qkv.latency == pytest.approx(50_352_128 / H100_BW, rel=1e-12)
    assert qkv.count == 32
    sdpa = ops["attn.sdpa"]
    assert sdpa.flops == 4 * 32 * 128 * 2048
    assert sdpa.provenance["kv_read_bytes"] == 2048 * 2 * 1024 * 2
    assert sdpa.bytes == 8_388_608 + 4096 + 16384
    assert ops["attn.o_proj"].bytes == 4096 * 4096 * 2 + 8192 + 8192
    assert ops["mlp.gate_up_proj"].bytes == 4096 * 28672 * 2 + 8192 + 28672 * 2
    assert ops["mlp.down_proj"].bytes == 14336 * 4096 * 2 + 14336 * 2 + 8192
    assert ops["norm"].count == 65 and ops["norm"].bytes == 3 * 4096 * 2
    head = ops["lm_head"]
    assert head.count == 1 and head.flops == 2 * 4096 * 128256
    assert head.bytes == 4096 * 128256 * 2 + 8192 + 128256 * 2
    # every op is memory-bound at bs1, so the step bound is all bytes over the HBM bandwidth
    per_layer = 50_352_128 + 8_409_088 + 33_570_816 + 234_946_560 + 117_477_376
    total = 32 * per_layer + 65 * 24_576 + 1_050_937_856
    assert {b.limiter for b in res.bounds} == {"memory"}
    totals = {m: v for m, v, _, _ in res.totals}
    assert totals["tpot"] == pytest.approx(total / H100_BW, rel=1e-12)
    assert totals["itl"] == totals["tpot"]
    assert totals["throughput_tokens"] == pytest.approx(1 / totals["tpot"])
    assert total == 15_284_726_272 and totals["tpot"] == pytest.approx(4.5626e-3, rel=1e-4)


def test_llama3_8b_prefill_causal_attention_and_compute_bound(cfg):
    ops, res = _ops("llama3-8b/prefill/bs1/ctx2048/bf16", "h100-sxm", cfg)
    assert ops["attn.sdpa"].flops == 4 * 32 * 128 * (2048 * 2049 / 2)
    qkv = ops["attn.qkv_proj"]
    assert qkv.flops == 2 * 2048 * 4096 * 6144
    assert qkv.limiter == "compute"
    assert qkv.latency == pytest.approx(103_079_215_104 / H100_PEAK)
    assert ops["lm_head"].flops == 2 * 4096 * 128256  # last position only
    totals = {m: v for m, v, _, _ in res.totals}
    assert set(totals) == {"ttft", "throughput_tokens", "energy", "energy_per_token", "tokens_per_joule", "power"}
    assert totals["energy_per_token"] == pytest.approx(totals["energy"] / 2048)  # prefill: bs x ctx tokens
    assert totals["throughput_tokens"] == pytest.approx(2048 / totals["ttft"])
    step = sum(b.latency * b.count for b in res.bounds)
    assert totals["ttft"] == pytest.approx(step)


def test_tensor_parallel_divides_work_and_adds_all_reduce(cfg):
    one, _ = _ops("llama3-70b/decode/bs8/ctx2048/bf16", "h100-sxm", cfg)
    four, _ = _ops("llama3-70b/decode/bs8/ctx2048/bf16/tp4", "h100-sxm", cfg)
    assert four["attn.qkv_proj"].flops == one["attn.qkv_proj"].flops / 4
    assert four["attn.qkv_proj"].provenance["weights_bytes"] == 8192 * (8192 + 2 * 1024) * 2 / 4
    o = four["attn.o_proj"]
    assert o.comm_bytes == 2 * 3 / 4 * 8 * 8192 * 2
    assert o.times["interconnect"] == pytest.approx(o.comm_bytes / 450e9)
    assert o.provenance["interconnect_bw"] == 450e9
    assert one["attn.o_proj"].comm_bytes == 0 and "interconnect" not in one["attn.o_proj"].times


def test_interconnect_limiter(cfg):
    ops, _ = _ops("mixtral-8x7b/prefill/bs1/ctx2048/bf16/tp2", "h100-sxm", cfg)
    assert ops["attn.o_proj"].limiter == "interconnect"
    assert ops["attn.o_proj"].latency == pytest.approx(2048 * 4096 * 2 / 450e9)


def test_mixtral_moe_ops(cfg):
    ops, _ = _ops("mixtral-8x7b/decode/bs1/ctx2048/bf16", "h100-sxm", cfg)
    assert "mlp.gate_up_proj" not in ops
    assert ops["moe.router"].flops == 2 * 4096 * 8
    ex = ops["moe.experts"]
    assert ex.provenance["experts_touched"] == pytest.approx(2.0)  # one token picks 2 of 8
    assert ex.bytes == pytest.approx(2 * 3 * 4096 * 14336 * 2 + 2 * 8192 * 2)
    assert ex.flops == 2 * 6 * 4096 * 14336
    assert ops["lm_head"].flops == 2 * 4096 * 32000


def test_model_config_json_matches_builtin(cfg, tmp_path):
    hf = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
          "intermediate_size": 14336, "vocab_size": 128256, "model_type": "llama"}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(hf))
    a, _ = _ops("my-llama/decode/bs4/ctx512/bf16", "h100-sxm", cfg, p)
    b, _ = _ops("llama3-8b/decode/bs4/ctx512/bf16", "h100-sxm", cfg)
    assert {k: v.bytes for k, v in a.items()} == {k: v.bytes for k, v in b.items()}
    del hf["vocab_size"]
    p.write_text(json.dumps(hf))
    with pytest.raises(InputError, match=r"key 'vocab_size'.*missing"):
        llm.resolve_model("x", p)


@pytest.mark.parametrize("wid", ["llama3-8b/decode/bs8/bf16", "llama3-8b/train/bs8/ctx2/bf16",
                                 "llama3-8b/decode/bs0/ctx2/bf16", "llama3-8b/decode/bs1/ctx2/bf17"])
def test_bad_workload_ids(wid):
    with pytest.raises(XfidError, match="workload"):
        llm.parse_workload(wid)


def test_missing_target_fields(cfg):
    from xfid.config import Target

    t = Target("bare", {"bf16": 1e12})
    w = llm.parse_workload("llama3-8b/decode/bs1/ctx8/bf16")
    with pytest.raises(ConfigError, match="no 'mem_bw'"):
        roofline.workload_bounds(llm.BUILTIN_MODELS["llama3-8b"], w, t)
    t2 = Target("nolink", {"bf16": 1e12}, mem_bw=1e12)
    w2 = llm.parse_workload("llama3-8b/decode/bs1/ctx8/bf16/tp2")
    with pytest.raises(ConfigError, match="no 'interconnect_bw'"):
        roofline.workload_bounds(llm.BUILTIN_MODELS["llama3-8b"], w2, t2)


def test_gemm_bounds(cfg):
    res = roofline.gemm_bounds([(1024, 1024, 1024), (8192, 64, 64), (1024, 1024, 1024)],
                               cfg.target("a100-sxm"), "fp16")
    assert [b.op for b in res.bounds] == ["gemm[m=1024,n=1024,k=1024]", "gemm[m=8192,n=64,k=64]"]
    big, thin = res.bounds
    assert big.flops == 2 * 1024**3 and big.bytes == 3 * 1024**2 * 2
    assert big.limiter == "compute" and big.latency == pytest.approx(2 * 1024**3 / 312e12)
    assert thin.limiter == "memory"
    assert thin.latency == pytest.approx((8192 * 64 * 2 + 64 * 64) * 2 / 2.039e12)
    recs = res.records()
    assert {r["metric"] for r in recs} == {"latency", "flops", "bytes", "energy"}  # a100-sxm has [energy]
    e = {r["op"]: r["value"] for r in recs if r["metric"] == "energy"}
    assert e["gemm[m=1024,n=1024,k=1024]"] == pytest.approx((2 * 1024**3 * 0.4 + 3 * 1024**2 * 2 * 30.0) * 1e-12)
    assert all(r["workload"] == "gemm-sweep" and r["fidelity"] == "roofline" for r in recs)


@pytest.mark.parametrize("block,shape,params,cycles", [
    ("gemm_tile", "5,9,7", {}, 2 * 3 * 7),
    ("gemm_tile", "8,8,16", {"ROWS": "2"}, 4 * 2 * 16),
    ("dma", "1000", {}, 83),                      # max(20 + 63, ceil(16/4) * 20 = 80)
    ("dma", "64", {"MAX_OUTSTANDING": "1", "BURST_LEN": "1"}, 80),   # max(24, 4 * 20)
    ("omvm", "10", {}, 8 * 4 + 2 + 3 + 10),
])
def test_block_bounds(cfg, block, shape, params, cycles):
    rec, energy = blocks.block_bounds(block, cfg.target("t100-a0"), params, [shape])
    assert energy["metric"] == "energy" and energy["op"] == rec["op"]  # t100-a0 prices every block's cycles
    assert rec["value"] == cycles and rec["metric"] == "cycles" and rec["workload"] == f"block/{block}"
    c = json.loads(rec["config"])
    assert c["block"] == block and set(c["params"]) == set(blocks.BLOCKS[block].params)
    for k, v in params.items():
        assert c["params"][k] == int(v)


def test_block_errors(cfg):
    t = cfg.target("t100-a0")
    with pytest.raises(XfidError, match="valid blocks: gemm_tile, dma, omvm"):
        blocks.block_bounds("fifo", t, {}, ["1"])
    with pytest.raises(XfidError, match="valid parameters: ROWS, COLS, DATA_W, ACC_W"):
        blocks.block_bounds("gemm_tile", t, {"DEPTH": "2"}, ["1,1,1"])
    with pytest.raises(XfidError, match="no value for BYTES_PER_CYCLE"):
        blocks.block_bounds("dma", cfg.target("h100-sxm"), {}, ["1"])
    with pytest.raises(XfidError, match="M,N,K"):
        blocks.block_bounds("gemm_tile", t, {}, ["4,4"])
    assert blocks.block_bounds("gemm_tile", t, {}, ["4,4,4"])[0]["op"] == "gemm_tile[m=4,n=4,k=4]"
