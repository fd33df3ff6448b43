"""The engine contract without Java: one Request from the options to the engine, engines
registered by name, Spark's settings as its own object (no environment side channel)."""

from __future__ import annotations

import os

import pytest

from tests.test_engine_helpers import config
from xfid.config import ENGINES as CONFIG_ENGINES
from xfid.engine import engines
from xfid.engine.engines import ENGINES, EngineChoice, LocalEngine, SparkEngine, get_engine
from xfid.engine.request import Request
from xfid.errors import ConfigError
from xfid.store import Store


def test_engines_registered_by_name():
    assert tuple(ENGINES) == CONFIG_ENGINES  # the config's accepted names are the registry's
    for name, cls in ENGINES.items():
        assert cls.name == name
    assert isinstance(get_engine(config()), LocalEngine)
    assert isinstance(get_engine(config({"engine": {"name": "spark"}})), SparkEngine)
    assert isinstance(get_engine(config({"engine": {"name": "spark"}}), "local"), LocalEngine)
    with pytest.raises(ConfigError, match="unknown engine 'dask'"):
        get_engine(config(), "dask")


def test_spark_settings_are_the_engines_own():
    eng = get_engine(config(), EngineChoice("spark", {"master": "local[3]"}))
    assert isinstance(eng, SparkEngine) and eng.settings.master == "local[3]"
    assert get_engine(config(), EngineChoice(None, {"master": "local[3]"})).settings.available is None  # local


def test_request_of_normalises_without_renaming():
    r = Request.of(targets=["a"], runs=["archmodel=r1"], as_of="2026-11-01", pairs=["roofline->measured"],
                   keep={"metric": ["latency"]})
    assert r == Request(targets=("a",), runs=("archmodel=r1",), as_of="2026-11-01", pairs=("roofline->measured",),
                        keep={"metric": ("latency",)})
    assert Request.of(runs=[]).runs is None and Request.of(runs="r").runs == "r"
    assert r.but(track=("fp",)).track == ("fp",) and r.track == ()
    with pytest.raises(AttributeError):
        r.runs = None  # type: ignore[misc]  # frozen


def _capture(monkeypatch):
    seen: list[tuple[object, Request]] = []

    def fake(self, store, config, request):
        seen.append((self, request))
        from xfid.engine.pipeline import correlate

        return correlate(store, config, request)

    monkeypatch.setattr(LocalEngine, "correlate", fake)
    monkeypatch.setattr(SparkEngine, "correlate", fake)
    return seen


def test_the_cli_passes_one_request_and_master_without_the_environment(xfid_cli, monkeypatch):
    Store(xfid_cli.store).close()
    monkeypatch.delenv("XFID_SPARK_MASTER", raising=False)
    seen = _capture(monkeypatch)
    r = xfid_cli("correlate", "--format", "json", "--target", "t100-a0", "--run", "archmodel=r1", "--as-of",
                 "2026-11-01", "--pair", "roofline:measured", "--include-missing", "--engine", "spark",
                 "--master", "local[3]")
    assert r.exit_code == 0, r.output
    eng, req = seen[-1]
    assert isinstance(eng, SparkEngine) and eng.settings.master == "local[3]"
    assert "XFID_SPARK_MASTER" not in os.environ
    assert req == Request(targets=("t100-a0",), runs=("archmodel=r1",), as_of="2026-11-01",
                          pairs=("roofline:measured",), include_missing=True, fingerprints="discrepancies")


def test_check_asks_a_partial_engine_for_the_open_issues(xfid_cli, monkeypatch):
    Store(xfid_cli.store).close()
    seen = _capture(monkeypatch)
    monkeypatch.setattr(engines, "open_fingerprints", lambda tracker: ["fp1", "fp2"])
    assert xfid_cli("check", "--engine", "spark").exit_code == 0
    assert seen[-1][1].track == ("fp1", "fp2")
    assert xfid_cli("check", "--engine", "local").exit_code == 0
    assert seen[-1][1].track == ()  # the local engine returns every row anyway


def test_commands_are_one_api_call(xfid_cli, monkeypatch, tmp_path):
    """doctor, roofline, store copy and calibrate's spread go through the API (the CLI parses and formats)."""
    import json
    from dataclasses import asdict

    import xfid
    from xfid.api import XfidStore

    r = xfid_cli("roofline", "--target", "t100-a0", "--block", "omvm", "--shape", "1", "--format", "json", "--ingest")
    assert r.exit_code == 0, r.output
    with xfid.open_store(xfid_cli.store) as store:
        bounds = store.roofline("t100-a0", block="omvm", shapes="1")
        assert json.loads(r.stdout) == bounds.records and bounds.target == "t100-a0"
        rep = store.doctor()
    d = json.loads(xfid_cli("doctor", "--format", "json").stdout)
    assert d == {**asdict(rep), "ok": rep.ok}
    calls = []
    for name in ("doctor", "rebuild_catalog", "copy_to"):
        def fake(self, *a, _name=name, **k):
            calls.append(_name)
            raise xfid.errors.XfidError(f"stand-in {_name}")
        monkeypatch.setattr(XfidStore, name, fake)
    xfid_cli("doctor")
    xfid_cli("doctor", "--rebuild-catalog")
    xfid_cli("store", "copy", "--to-database", "postgresql://u@h/db")
    assert calls == ["doctor", "rebuild_catalog", "copy_to"]
