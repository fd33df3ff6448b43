"""Nonsense refused, not stored or printed: rates too small to divide by, bounds that overflow,
owners, notes and labels the size of a document."""

from __future__ import annotations

import json

import pytest

from tests.test_engine_helpers import rec, write_csv
from xfid.config import load_config
from xfid.errors import ConfigError
from xfid.models import roofline
from xfid.tracker.lifecycle import MAX_NAME, MAX_TEXT


def _target(tmp_path, **numbers):
    body = "\n".join(f"{k} = {v}" for k, v in numbers.items())
    p = tmp_path / "xfid.toml"
    p.write_text(f"[targets.tiny]\npeak_flops = {{ fp16 = 1e15 }}\n{body}\n")
    return p


@pytest.mark.parametrize("key", ["mem_bw", "clock_hz", "tdp_w", "interconnect_bw", "sram_bw"])
def test_a_subnormal_rate_is_refused_at_load(tmp_path, key):
    with pytest.raises(ConfigError, match=rf"targets\.tiny\.{key} = 5e-324 is too small to divide by"):
        load_config(_target(tmp_path, **{"mem_bw": 1e12, key: "5e-324"}))


def test_a_bound_that_overflows_is_an_error_naming_the_rate(tmp_path):
    cfg = load_config(_target(tmp_path, mem_bw="1e-300"))
    with pytest.raises(ConfigError, match=r"memory time of op .* is not a finite number.*mem_bw is too small"):
        roofline.gemm_bounds([(65536, 65536, 65536)], cfg.target("tiny"), "fp16")


def test_roofline_cli_never_prints_inf(xfid_cli, tmp_path):
    cfg = _target(tmp_path, mem_bw="1e-300")
    r = xfid_cli("--config", cfg, "roofline", "--target", "tiny", "--gemm", "65536,65536,65536")
    assert r.exit_code == 2 and r.output.startswith("Error:") and "inf" not in r.output, r.output


@pytest.fixture
def filed(xfid_cli, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_csv(d / "m.csv", [rec("measured", "a", 1.0)])
    write_csv(d / "r.csv", [rec("archmodel", "a", 3.0)])
    assert xfid_cli("ingest", "--adapter", "xfid-records", d).exit_code == 0
    assert xfid_cli("check").exit_code in (0, 1)
    ids = [i["id"] for i in json.loads(xfid_cli("issues", "list", "--format", "json").output)]
    assert ids
    return xfid_cli, ids[0]


@pytest.mark.parametrize("args,field,limit", [
    (("ack", "--owner", "o" * (MAX_NAME + 1)), "owner", MAX_NAME),
    (("note", "--note", "n" * (MAX_TEXT + 1)), "note", MAX_TEXT),
    (("ack", "--owner", "ann", "--actor", "a" * (MAX_NAME + 1)), "actor", MAX_NAME),
])
def test_document_sized_owner_note_or_actor_is_refused(filed, args, field, limit):
    cli, iid = filed
    before = cli("issues", "show", iid, "--format", "json").output
    r = cli("issues", args[0], iid, *args[1:])
    assert r.exit_code == 2 and f"the {field} is {limit + 1:,} characters; at most {limit:,}" in r.output, r.output
    assert len(r.output) < 400  # the text itself is not echoed back
    assert cli("issues", "show", iid, "--format", "json").output == before  # nothing changed


def test_at_the_limit_is_accepted(filed):
    cli, iid = filed
    r = cli("issues", "ack", iid, "--owner", "o" * MAX_NAME, "--note", "n" * MAX_TEXT)
    assert r.exit_code == 0, r.output


def test_a_document_sized_check_label_is_refused(filed):
    cli, _ = filed
    r = cli("check", "--label", "L" * (MAX_NAME + 1))
    assert r.exit_code == 2 and "the label is" in r.output, r.output
