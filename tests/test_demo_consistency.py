"""One config per store: `xfid demo`'s printed next commands, run as printed, reproduce its numbers;
a check records its config; a command with another config warns once, naming both."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import xfid
from tests.conftest import FIXTURES
from tests.demo_run import Demo, run_demo
from tests.demo_run import xfid as run
from xfid.config import load_config

DEMO_CONFIG = FIXTURES / "demo" / "xfid.toml"
SMALL = [FIXTURES / "records" / "archmodel.csv", FIXTURES / "records" / "measured.csv"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    return run_demo(tmp_path_factory)


def _command(demo: Demo, word: str) -> str:
    """The one printed next command whose subcommand (after `xfid --store DIR`) starts with `word`."""
    hits = [c for c in demo.next_commands if " ".join(shlex.split(c)[3:]).startswith(word)]
    assert len(hits) == 1, (word, demo.next_commands)
    return hits[0]


def _discrepancies(table: str) -> set[tuple[str, ...]]:
    """(kind, target, workload, op, metric/stat, pair) of each row of `xfid correlate`'s table."""
    lines = table.split("\ndiscrepancies: ", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    rows = [ln.split() for ln in lines if not ln.startswith(" ")]  # the legend line is indented
    return {(f[0], *f[2:7]) for f in rows}  # kind, factor, target, workload, op, metric/stat, pair


def _issues(table: str) -> dict[str, tuple[str, ...]]:
    """XF id -> (kind, target, workload, op, metric/stat, pair) of `xfid issues list`'s table."""
    out = {}
    for ln in table.splitlines()[1:]:
        f = ln.split()
        if f and f[0].startswith("XF-"):
            out[f[0]] = (f[2], *f[4:9])
    return out


def test_the_demo_prints_next_commands_for_its_own_store_baseline_and_period(demo):
    words = [shlex.split(c)[3] for c in demo.next_commands]  # xfid --store DIR <command> ...
    assert words[:1] == ["issues"] and {"correlate", "compare", "report"} <= set(words)
    assert all(shlex.split(c)[1:3] == ["--store", str(demo.store)] for c in demo.next_commands)
    assert "store's config" in demo.out and str(DEMO_CONFIG) in demo.out


def test_correlate_as_printed_shows_the_demos_discrepancies(demo):
    active = int(demo.line(r"check #\d+: \d+ new, \d+ reopened.*?(\d+) active issues").group(1))  # the last check
    r = run(demo.cwd, _command(demo, "correlate"))
    assert r.returncode == 0, r.stderr
    found = _discrepancies(r.stdout)
    assert int(re.search(r"^discrepancies: (\d+)", r.stdout, re.M).group(1)) == len(found) == active == 13
    listed = run(demo.cwd, _command(demo, "issues list"))
    assert listed.returncode == 0, listed.stderr
    assert set(_issues(listed.stdout).values()) == found  # the same keys the tracker holds
    shown = run(demo.cwd, _command(demo, "issues show"))
    first = shlex.split(_command(demo, "issues show"))[-1]  # the first issue the last check filed (XF-8: the re-measure's)
    assert shown.returncode == 0 and shown.stdout.startswith(first + " "), shown.stdout + shown.stderr
    assert "moved: reference — measured run nsys-2026-11-27 -> nsys-2026-12-01" in shown.stdout  # which side moved
    assert "summary S-2-1: reference run nsys-2026-12-01 (measured)" in shown.stdout


def test_compare_as_printed_says_no_drift_like_the_demo(demo):
    assert "no drift" in demo.line(r"compare vs .*").group(0)
    r = run(demo.cwd, _command(demo, "compare"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: no drift" in r.stdout


def test_report_as_printed_covers_the_demos_checks_with_their_xf_ids(demo):
    cmd = _command(demo, "report")
    r = run(demo.cwd, cmd)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"wrote (\S+) \((\d+) pages, (\d+) active issues, (\d+) pairs\) and its numbers, each with its "
                     r"file and row, to \S+-numbers\.csv", r.stdout.strip())
    assert m, r.stdout
    assert (demo.cwd / m[1]).read_bytes().startswith(b"%PDF")
    ids = sorted(_issues(run(demo.cwd, _command(demo, "issues list")).stdout), key=lambda s: int(s[3:]))
    assert int(m[3]) == len(ids) == 13
    html = run(demo.cwd, [*shlex.split(cmd), "--html", "-o", "same.html"])
    assert html.returncode == 0, html.stderr
    text = (demo.cwd / "same.html").read_text()
    assert "no check was recorded" not in text and "no `xfid check` has been recorded" not in text
    register = text.split("<h2>Discrepancy register")[1].split("<h2>")[0]
    assert sorted(set(re.findall(r'<tr id="(XF-\d+)"', register)), key=lambda s: int(s[3:])) == ids
    since, until = shlex.split(cmd)[-3], shlex.split(cmd)[-1]
    assert f"{since}..{until}" in text  # the demo's period, not the last complete week


def test_commands_without_config_say_once_that_they_use_the_stores(demo):
    r = run(demo.cwd, _command(demo, "correlate"))
    notes = [ln for ln in r.stderr.splitlines() if "using the config of the store's last check" in ln]
    assert len(notes) == 1, r.stderr
    assert str(DEMO_CONFIG) in notes[0] and load_config(DEMO_CONFIG).hash() in notes[0]
    assert "warning" not in r.stderr


def test_another_config_warns_once_naming_both(demo, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text("[settings]\ndefault_rel_tolerance = 0.2\n")
    r = run(demo.cwd, ["xfid", "--store", str(demo.store), "--config", str(other), "correlate"])
    assert r.returncode == 0, r.stderr
    warns = [ln for ln in r.stderr.splitlines() if "warning:" in ln]
    assert len(warns) == 1, r.stderr
    w = warns[0]
    assert str(other) in w and load_config(other).hash() in w
    assert str(DEMO_CONFIG) in w and load_config(DEMO_CONFIG).hash() in w
    assert f"--config {DEMO_CONFIG}" in w


# --- the mechanism, in-process and small --------------------------------------------------
def _checked(tmp_path: Path, config: Path) -> Path:
    with xfid.open_store(tmp_path / "s", config=config) as s:
        s.ingest(SMALL)
        s.check(actor="ci")
    return tmp_path / "s"


def test_a_check_records_its_config_hash_path_and_text(tmp_path):
    cfg = tmp_path / "team.toml"
    cfg.write_text(DEMO_CONFIG.read_text() + "\n[drift]\nerror_abs = 0.07\n")
    store = _checked(tmp_path, cfg)
    with xfid.open_store(store, config=cfg) as s:
        rec = s.recorded_config()
        assert rec is not None and rec["recorded"]
        assert (rec["config_hash"], rec["path"], rec["content"]) == (s.config.hash(), str(cfg.resolve()),
                                                                     cfg.read_text())
        assert s.tracker.checks()[-1]["config_hash"] == rec["config_hash"]


def test_without_config_the_store_uses_what_its_last_check_recorded_not_the_file_now(tmp_path, monkeypatch,
                                                                                     capsys):
    cfg = tmp_path / "team.toml"
    cfg.write_text(DEMO_CONFIG.read_text())
    store = _checked(tmp_path, cfg)
    recorded = load_config(cfg).hash()
    cfg.write_text(DEMO_CONFIG.read_text() + "\n[drift]\nerror_abs = 0.5\n")  # edited after the check
    monkeypatch.chdir(tmp_path)  # no ./xfid.toml here
    monkeypatch.delenv("XFID_CONFIG", raising=False)
    capsys.readouterr()
    with xfid.open_store(store) as s:
        assert s.config.hash() == recorded != xfid.open_store(store, config=cfg).config.hash()
        s.correlate()
        s.backend()
    err = capsys.readouterr().err
    assert err.count("using the config of the store's last check") == 1, err
    assert recorded in err and str(cfg.resolve()) in err


def test_the_bundled_config_on_a_store_checked_with_it_says_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XFID_CONFIG", raising=False)
    with xfid.open_store(tmp_path / "s") as s:
        s.ingest(SMALL)
        s.check(actor="ci")
        assert s.recorded_config()["path"] is None
    capsys.readouterr()
    with xfid.open_store(tmp_path / "s") as s:
        s.correlate()
    assert capsys.readouterr().err == ""


def test_a_different_config_warns_once_per_store_opened(tmp_path, capsys):
    store = _checked(tmp_path, DEMO_CONFIG)
    other = tmp_path / "other.toml"
    other.write_text("[settings]\ndefault_rel_tolerance = 0.3\n")
    capsys.readouterr()
    with xfid.open_store(store, config=other) as s:
        s.correlate()
        s.issues()
        s.close()
        s.backend()
    err = capsys.readouterr().err
    assert err.count("warning:") == 1, err
    assert load_config(other).hash() in err and load_config(DEMO_CONFIG).hash() in err
    with xfid.open_store(store, config=DEMO_CONFIG) as s:
        s.correlate()
    assert capsys.readouterr().err == ""


def test_a_config_built_in_code_is_recorded_by_hash_only_and_never_adopted(tmp_path, monkeypatch, capsys):
    from xfid.config import _bundled, build_config

    cfg = build_config(_bundled(), {"settings": {"default_rel_tolerance": 0.25}}, None)  # no file, no text
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XFID_CONFIG", raising=False)
    with xfid.open_store(tmp_path / "s", config=cfg) as s:
        s.ingest(SMALL)
        s.check(actor="ci")
        rec = s.recorded_config()
        assert (rec["config_hash"], rec["recorded"], rec["content"]) == (cfg.hash(), False, None)
    capsys.readouterr()
    with xfid.open_store(tmp_path / "s") as s:
        assert s.config.hash() == load_config(None).hash()  # the bundled config: nothing to rebuild from
    assert capsys.readouterr().err == ""


def test_the_stores_config_on_each_catalog(catalog, tmp_path, monkeypatch, capsys):
    """SQLite and a team store's PostgreSQL catalog keep the check's config alike."""
    cfg = tmp_path / "team.toml"
    cfg.write_text(DEMO_CONFIG.read_text())
    _checked(tmp_path, cfg)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XFID_CONFIG", raising=False)
    capsys.readouterr()
    with xfid.open_store(tmp_path / "s") as s:
        assert s.config.hash() == load_config(cfg).hash() == s.recorded_config()["config_hash"]
        assert s.recorded_config()["content"] == cfg.read_text()
    assert "using the config of the store's last check (#1)" in capsys.readouterr().err


def test_a_config_that_differs_only_in_where_the_store_is_is_not_another_config(tmp_path, capsys):
    here = tmp_path / "laptop.toml"
    here.write_text(DEMO_CONFIG.read_text() + '\n[store]\npath = "/mnt/laptop/.xfid"\n')
    store = _checked(tmp_path, here)
    there = tmp_path / "ci.toml"
    there.write_text(DEMO_CONFIG.read_text() + '\n[store]\npath = "/srv/ci/.xfid"\n')
    capsys.readouterr()
    with xfid.open_store(store, config=there) as s:
        s.correlate()
    assert capsys.readouterr().err == ""
