"""xfid.toml: bundled targets, user overlay, and clear errors naming the file and key."""

from __future__ import annotations

import pytest

from xfid.config import load_config
from xfid.errors import ConfigError


def test_bundled_targets_and_invented_t100():
    c = load_config(None)
    assert {"a100-sxm", "mi210", "h100-sxm", "h200-sxm", "t100-a0"} <= set(c.targets)
    assert c.target("h100-sxm").peak("bf16") == 989e12 and c.target("h200-sxm").mem_bw == 4.8e12
    assert c.target("t100-a0").invented and c.target("a100-sxm").peak("fp16") == 312e12


def test_user_overlay_comes_first(tmp_path):
    f = tmp_path / "xfid.toml"
    f.write_text('[targets.h100-sxm]\nmem_bw = 3.0e12\npeak_flops = { bf16 = 900e12 }\n'
                 '[[tolerance]]\npair = "archmodel->rtl"\nmetric = "cycles"\nrel = 0.02\n')
    c = load_config(f)
    assert c.target("h100-sxm").mem_bw == 3.0e12 and "mi210" in c.targets
    assert c.tolerance_for("archmodel", "rtl", "cycles", "x", "value").rel == 0.02
    assert c.tolerance_for("roofline", "rtl", "cycles", "x", "value").rel == 0.10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tolernce]\nrel = 1\n", "unknown section 'tolernce'"),
        ("[tolerance]\nrel = 0.1\n", "write [[tolerance]], not [tolerance]"),
        ("[[tolerance]]\nmetric = 'x'\n", "tolerance[0] needs rel"),
        ("[[tolerance]]\nrel = 'ten'\n", "tolerance[0].rel must be a number"),
        ("[[tolerance]]\nrel = 0.1\nmetrc = 'x'\n", "unknown key(s) metrc"),
        ("[[op_map]]\nmatch = '('\nop = 'x'\n", "op_map[0].match is not a valid regex"),
        ("[targets.x]\nmem_bw = -1\n", "targets.x.mem_bw must not be negative"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_bad_config_is_named(tmp_path, text, message):
    f = tmp_path / "xfid.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(f) in str(e.value) and message in str(e.value)


def test_missing_target_and_precision():
    c = load_config(None)
    with pytest.raises(ConfigError, match=r"unknown target 'h300'; .*configured targets"):
        c.target("h300")
    with pytest.raises(ConfigError, match="no peak_flops for precision 'fp4'"):
        c.target("h100-sxm").peak("fp4")


def test_cli_reports_bad_config(xfid_cli, tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[tolernce]\n")
    r = xfid_cli("--config", f, "correlate")
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "unknown section 'tolernce'" in r.output
    r = xfid_cli("--config", tmp_path / "missing.toml", "correlate")
    assert r.exit_code == 2 and "does not exist" in r.output


# --- every number and key a user configures is checked (issue 15) ---------------------------

@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[settings]\ndefault_rel_tolerance = -1\n", "[settings] default_rel_tolerance must not be negative"),
        ("[settings]\ndefault_rel_tolerance = nan\n", "default_rel_tolerance must be a finite number, got nan"),
        ("[settings]\nbound_tolerance = inf\n", "bound_tolerance must be a finite number, got inf"),
        ("[settings]\nbound_tolerance = '0.02'\n", "bound_tolerance must be a number, got '0.02'"),
        ("[settings]\nroofline_min_efficiency = -0.5\n", "roofline_min_efficiency must not be negative"),
        ("[settings]\nroofline_tolerance = 'loose'\n", "roofline_tolerance = 'loose' is not known"),
        ("[settings]\nbootstrap_resamples = 0\n", "bootstrap_resamples must be an integer >= 1"),
        ("[settings]\nbootstrap_seed = 1.5\n", "bootstrap_seed must be an integer >= 0"),
        ("[settings]\nvalue_matches = 'median'\n", "value_matches must be a list of names"),
        ("[settings]\nbogus = 1\n", "[settings] has unknown key 'bogus'"),
        ("[settings]\nbound_tolerence = 0.1\n", "did you mean 'bound_tolerance'?"),
        ("settings = 3\n", "settings must be a table"),
        ("[[tolerance]]\nrel = nan\n", "tolerance[0].rel must be a finite number, got nan"),
        ("[[tolerance]]\nrel = -0.1\n", "tolerance[0].rel must not be negative"),
        ("[[tolerance]]\nrel = 0.1\nabs = -inf\n", "tolerance[0].abs must be a finite number"),
        ("[[tolerance]]\nrel = 0.1\nmetric = ['a']\n", "tolerance[0].metric must be a string"),
        ("[drift]\nerror_abs = nan\n", "[drift] error_abs must be a finite number, got nan"),
        ("[drift]\nmape_abs = -1\n", "[drift] mape_abs must not be negative"),
        ("[drift]\nerror_abz = 0.1\n", "did you mean 'error_abs'?"),
        ("[tracker]\nresolve_after = 0\n", "[tracker] resolve_after must be an integer >= 1"),
        ("[store]\npath = 5\n", "[store] path must be a string"),
        ("[report]\ntitle = 'x'\n", "[report] has unknown key 'title'"),
        ("[report]\nours = 't100-a0'\n", "[report] ours must be a list of target names like [\"t100-a0\"], got 't100-a0'"),
        ("[report]\nours = [1]\n", "[report] ours must be a list of target names"),
        ("[report]\nours = ['t100-b0']\n", "[report] ours names 't100-b0', which is not a configured target; "
                                             "did you mean 't100-a0'?"),
        ("[targets.x]\npeak_flops = { bf16 = 0 }\n", "targets.x.peak_flops.bf16 must be greater than 0"),
        ("[targets.x]\npeak_flops = { bf16 = nan }\n", "targets.x.peak_flops.bf16 must be a finite number"),
        ("[targets.x]\nmem_bw = 0\n", "targets.x.mem_bw must be greater than 0"),
        ("[targets.x]\nclock_hz = inf\n", "targets.x.clock_hz must be a finite number"),
        ("[targets.x]\ntdp_w = 'a lot'\n", "targets.x.tdp_w must be a number"),
        ("[targets.x]\nmem_bww = 1e12\n", "[targets.x] has unknown key 'mem_bww'; did you mean 'mem_bw'?"),
        ("[targets.x]\ninvented = 'yes'\n", "targets.x.invented must be true or false"),
        ("[[op_map]]\nmatch = 'a'\nop = 'x'\nsorce = 'y'\n", "op_map[0] has unknown key 'sorce'; did you mean 'source'?"),
        ("[[op_map]]\nmatch = 1\nop = 'x'\n", "op_map[0].match must be a string"),
        ("[[compare]]\ncandidate = 'rtl'\nreference = 'measured'\nbound = 'x'\n", "did you mean 'bounds'?"),
        ("[[compare]]\ncandidate = 1\nreference = 'measured'\n", "compare[0].candidate must be a string"),
        ("[setings]\n", "unknown section 'setings'; did you mean 'settings'?"),
    ],
)
def test_bad_numbers_types_and_keys_are_named(tmp_path, text, message):
    f = tmp_path / "xfid.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert str(e.value).startswith(f"{f}: ") and message in str(e.value)


def test_report_ours_comes_from_config(tmp_path):
    from xfid.config import config_from_text, report_ours

    assert report_ours(config_from_text(None, None)) == ["t100-a0"]  # the bundled default: the invented example target
    f = tmp_path / "xfid.toml"
    f.write_text("[targets.x]\nmem_bw = 1e12\n[report]\nours = ['x', 'h100-sxm']\n")
    assert report_ours(load_config(f)) == ["x", "h100-sxm"]
    f.write_text("[report]\nours = []\n")
    assert report_ours(load_config(f)) == []


def test_good_values_still_load(tmp_path):
    f = tmp_path / "xfid.toml"
    f.write_text("[settings]\ndefault_rel_tolerance = 0\nbound_tolerance = 0.05\nroofline_min_efficiency = 0.3\n"
                 "bootstrap_resamples = 200\nvalue_matches = []\n[drift]\nerror_abs = 0\n[tracker]\nresolve_after = 2\n"
                 "[targets.x]\nmem_bw = 1e12\npeak_flops = { bf16 = 1e14 }\ninvented = true\nnote = 'mine'\n"
                 "[targets.x.blocks.gemm_tile]\nROWS = 4\n")
    c = load_config(f)
    assert c.tolerance_for("a", "b", "m", "o", "s").rel == 0.0
    assert c.target("x").extra["blocks"] == {"gemm_tile": {"ROWS": 4}} and c.target("x").invented


def test_drift_keys_follow_the_thresholds():
    from xfid.config import DRIFT_KEYS
    from xfid.drift.drift import Thresholds

    assert set(DRIFT_KEYS) == set(Thresholds.__dataclass_fields__)


@pytest.mark.parametrize("pair", ["roofline->measured", "roofline->*", "roofline*"])
def test_a_rule_for_a_bound_pair_is_refused_in_bound_mode(tmp_path, pair):
    f = tmp_path / "xfid.toml"
    f.write_text(f'[[tolerance]]\npair = "{pair}"\nrel = 0.5\n')
    with pytest.raises(ConfigError, match=r'tolerance\[0\] pair = .* names a bound pair.*roofline_tolerance = "tolerance"'):
        load_config(f)


@pytest.mark.parametrize("extra", [
    '[settings]\nroofline_tolerance = "tolerance"\n',
    '[[compare]]\ncandidate = "roofline"\nreference = "measured"\nbounds = "tolerance"\n',
])
def test_a_rule_for_a_bound_pair_holds_in_tolerance_mode(tmp_path, extra):
    f = tmp_path / "xfid.toml"
    f.write_text(f'[[tolerance]]\npair = "roofline->measured"\nrel = 0.5\n{extra}')
    c = load_config(f)
    assert c.tolerance_for("roofline", "measured", "latency", "", "p50").rel == 0.5


def test_wildcard_rules_do_not_aim_at_bound_pairs(tmp_path):
    f = tmp_path / "xfid.toml"
    f.write_text('[[tolerance]]\npair = "*->measured"\nrel = 0.3\n[[tolerance]]\nrel = 0.2\n')
    assert load_config(f).tolerance_for("archmodel", "measured", "m", "o", "s").rel == 0.3


def test_unknown_target_is_named_with_close_names():
    c = load_config(None)
    with pytest.raises(ConfigError, match="unknown target 'h100-sxm5'; did you mean h100-sxm"):
        c.target("h100-sxm5")
    assert c.close_targets("h100-sxm5")[0] == "h100-sxm" and c.close_targets("zzzz") == []


def test_block_tables_must_be_tables(tmp_path):
    f = tmp_path / "xfid.toml"
    f.write_text("[targets.t100-a0.blocks]\ngemm_tile = 5\n")
    with pytest.raises(ConfigError, match=r"targets.t100-a0.blocks must be a table of \[targets.t100-a0.blocks.NAME\]"):
        load_config(f)


def test_an_oversized_config_is_refused_before_it_is_parsed(xfid_cli, tmp_path, monkeypatch):
    """Found by benchmarks/fuzz.py --kind config: a 280 MB mutated xfid.toml hung the parser
    past the fuzzer's alarm. A config over MAX_CONFIG_BYTES is an Error naming the file and size."""
    import xfid.config as config

    monkeypatch.setattr(config, "MAX_CONFIG_BYTES", 1 << 10)
    p = tmp_path / "xfid.toml"
    p.write_text("[settings]\n" + "# padding\n" * 200)
    with pytest.raises(ConfigError, match=r"xfid\.toml: 2,011 bytes is more than an xfid\.toml may hold \(1,024 bytes\)"):
        load_config(p)
    monkeypatch.undo()
    big = tmp_path / "big.toml"
    big.write_text("[settings]\n#" + "x" * config.MAX_CONFIG_BYTES + "\n")
    r = xfid_cli("--config", str(big), "summary")
    assert r.exit_code == 2, r.output
    assert "Error:" in r.output and "big.toml" in r.output and "Traceback" not in r.output
