"""plan_bounds names the targets it cannot bound once, in one note, however many workloads they have."""

from __future__ import annotations

import pyarrow as pa

from xfid.config import load_config
from xfid.models.auto import plan_bounds, unconfigured_note


def _records(rows: list[tuple[str, str, str]]) -> pa.Table:
    return pa.table({"fidelity": [f for f, _, _ in rows], "target": [t for _, t, _ in rows],
                     "workload": [w for _, _, w in rows], "op": [""] * len(rows), "config": [None] * len(rows)})


def test_demo_like_store_gives_one_note_for_all_unconfigured_targets():
    # Like the demo's store: an unconfigured target with several workloads (one a decode, which
    # also plans its first-token prefill), several unconfigured targets, and a configured one.
    recs = _records([
        ("measured", "unknown-gpu", "llama3-8b/decode/bs8/ctx2048/bf16"),  # a file that does not name its GPU
        ("measured", "unknown-gpu", "llama3-8b/prefill/bs8/ctx2048/bf16"),
        ("measured", "unknown-gpu", "llama3-70b/decode/bs64/ctx4096/bf16/tp8"),
        ("measured", "unknown-gpu", "gemm[m=4096,n=4096,k=4096]"),
        ("measured", "a6000", "llama3-8b/decode/bs1/ctx2048/bf16"),
        ("measured", "a6000", "llama3-8b/decode/bs4/ctx2048/bf16"),
        ("archmodel", "gh200", "llama3-8b/decode/bs8/ctx2048/bf16"),
        ("measured", "gh200", "llama3-8b/decode/bs8/ctx2048/bf16"),
        ("measured", "arm64-cpu", "llama3-8b/prefill/bs1/ctx512/bf16"),
        ("measured", "t100-a0", "llama3-8b/decode/bs8/ctx2048/bf16"),
        ("roofline", "zz-old", "llama3-8b/decode/bs8/ctx2048/bf16"),  # a bound already: not planned
    ])
    plans, notes = plan_bounds(recs, load_config(None))
    assert notes == ["3 targets are not configured, so they have no roofline: a6000, arm64-cpu, gh200 "
                     "(add [targets.NAME] to xfid.toml to model one); and 1 target(s) of unknown hardware "
                     "(unknown-…) have none"]
    assert [n for n, _ in plans] == ["roofline-t100-a0-llama3-8b_decode_bs8_ctx2048_bf16.csv",
                                     "roofline-t100-a0-llama3-8b_prefill_bs1_ctx2048_bf16.csv"]


def test_one_unconfigured_target_with_several_workloads_is_named_once():
    recs = _records([("measured", "a6000", f"llama3-8b/decode/bs{b}/ctx2048/bf16") for b in (1, 2, 4, 8)])
    plans, notes = plan_bounds(recs, load_config(None))
    assert plans == []
    assert notes == ["a6000 is not a configured target, so it has no roofline "
                     "(add [targets.a6000] to xfid.toml to model it)"]


def test_the_hint_matches_the_config_a_target_table_under_that_name_makes_it_configured(tmp_path):
    cfg = tmp_path / "xfid.toml"
    cfg.write_text("[targets.a6000]\npeak_flops = { bf16 = 155e12 }\nmem_bw = 768e9\n")
    recs = _records([("measured", "a6000", "llama3-8b/decode/bs1/ctx2048/bf16"),
                     ("measured", "t4", "llama3-8b/decode/bs1/ctx2048/bf16")])
    plans, notes = plan_bounds(recs, load_config(cfg))
    assert notes == ["t4 is not a configured target, so it has no roofline (add [targets.t4] to xfid.toml to model it)"]
    assert sorted(n for n, _ in plans) == ["roofline-a6000-llama3-8b_decode_bs1_ctx2048_bf16.csv",
                                           "roofline-a6000-llama3-8b_prefill_bs1_ctx2048_bf16.csv"]


def test_names_are_sorted_deduplicated_and_escaped_for_the_terminal():
    note = unconfigured_note(["gpu\x1b]0;pwned\x07", "b200", "a100x", "b200"])
    assert note == ("3 targets are not configured, so they have no roofline: a100x, b200, gpu\\x1b]0;pwned\\x07 "
                    "(add [targets.NAME] to xfid.toml to model one)")
    assert "\x1b" not in note and "\x07" not in note


def test_unknown_hardware_is_counted_not_listed_and_no_fixture_invents_a_target():
    """A target `unknown-…` is counted (nothing could configure it); every target a fixture's sidecar
    gives is a real hardware name (configured, or a known product) or says it is unknown."""
    import re

    from tests.conftest import FIXTURES

    assert unconfigured_note(["unknown-gpu", "unknown-gpu-sm80"]) == \
        "2 target(s) of unknown hardware (unknown-…) have no roofline"
    invented = re.compile(r"unstated|gate|virtualclient|itu-hpc|example|fake|dummy|test")
    for side in FIXTURES.rglob("xfid-source.toml"):
        for name in re.findall(r'^target = "([^"]+)"', side.read_text(), re.M):
            assert not invented.search(name) or name.startswith("unknown-"), f"{side}: target {name!r}"
