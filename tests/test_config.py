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
    with pytest.raises(ConfigError, match="unknown target 'h300'; configured targets"):
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
