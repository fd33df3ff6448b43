"""A bucket that does not answer never hangs a command (issue 30: no hang, every network call
bounded): a server that accepts connections and never replies, as a stalled endpoint or a
black-holed network does. Each command ends with `Error:` naming the location (credentials
masked) within a bounded time, XFID_OBJECT_TIMEOUT_S setting the limit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from xfid.records import object_timeout_s


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts every connection and never sends a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        srv.close()


def _run(store: Path, url: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "XFID_RECORDS_URL": url, "XFID_OBJECT_TIMEOUT_S": "6", "AWS_ACCESS_KEY_ID": "AKIAXFIDTEST",
           "AWS_SECRET_ACCESS_KEY": "xfid-secret-key", "AWS_EC2_METADATA_DISABLED": "true"}
    env.pop("XFID_DATABASE_URL", None)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), *args], capture_output=True, text=True,
                       timeout=120, env=env)
    return r, time.monotonic() - t


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_bucket_that_never_answers_is_an_error_within_bounded_time(tmp_path, silent_port, scheme):
    src = tmp_path / "a.csv"
    src.write_text("fidelity,target,workload,op,metric,value\nmeasured,h100,w,op0,latency,1\n")
    who = "AKIAXFIDTEST:Secret%2Fpw@" if scheme == "s3" else ""
    url = f"{scheme}://{who}xfid-bkt/records?endpoint_override=127.0.0.1:{silent_port}&scheme=http"
    if scheme == "s3":
        url += "&region=us-east-1"
    for args in (("ingest", str(src)), ("export",), ("doctor",)):
        r, took = _run(tmp_path / "s", url, *args)
        out = r.stdout + r.stderr
        assert took < 30, (args, took, out)
        assert r.returncode == 2, (args, out)
        assert out.startswith("Error: ") and "Traceback" not in out, (args, out)
        assert "xfid-bkt" in out and "Secret" not in out, (args, out)


def test_the_limit_is_bounded_and_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("XFID_OBJECT_TIMEOUT_S", "12")
    assert object_timeout_s() == 12
    for bad, want in (("0", 1.0), ("1e400", 3600.0), ("nan", 60.0), ("x", 60.0)):
        monkeypatch.setenv("XFID_OBJECT_TIMEOUT_S", bad)
        assert object_timeout_s() == want


def test_a_call_that_blocks_is_given_up_with_an_error_naming_the_location(monkeypatch):
    """The watchdog behind every listing, lookup and small write (a GCS client waiting on a silent
    server is not bounded by pyarrow's options alone)."""
    from xfid.errors import StoreError
    from xfid.records import bounded

    monkeypatch.setenv("XFID_OBJECT_TIMEOUT_S", "1")
    t = time.monotonic()
    with pytest.raises(StoreError, match=r"^gs://b/records: no answer within 1 s when asked to list the records"):
        bounded("gs://b/records", "list the records", threading.Event().wait)
    assert time.monotonic() - t < 10
    assert bounded("x", "y", lambda a: a + 1, 1) == 2
    with pytest.raises(OSError, match="boom"):
        bounded("x", "y", lambda: (_ for _ in ()).throw(OSError("boom")))


def test_a_read_of_parts_from_a_bucket_that_never_answers_is_an_error(tmp_path, silent_port, monkeypatch):
    """The engine's read (selection.load → Store.open_parts) starts with a bounded request: a GCS
    client alone would wait for its ~120 s stall timeout per request (measured), whatever the retry limit."""
    from pathlib import PurePosixPath

    import pyarrow.fs as pafs

    from xfid import partfiles
    from xfid import records as recloc
    from xfid.engine import selection
    from xfid.errors import StoreError
    from xfid.store import Store

    monkeypatch.setenv("XFID_OBJECT_TIMEOUT_S", "2")
    monkeypatch.delenv("XFID_DATABASE_URL", raising=False)
    monkeypatch.delenv("XFID_RECORDS_URL", raising=False)
    with Store(tmp_path / "s") as store:
        gcs = pafs.GcsFileSystem(anonymous=True, endpoint_override=f"127.0.0.1:{silent_port}", scheme="http")
        store.location = recloc.Location(PurePosixPath("xfid-bkt/records"), recloc.with_timeouts(gcs),
                                         "gs://xfid-bkt/records")
        store.fs, store.records = store.location.fs, store.location.base
        store.parts = partfiles.for_store(store)  # the bucket's way of reading parts (xfid.partfiles)
        part = PurePosixPath("xfid-bkt/records/fidelity=measured/part-0.parquet")
        t = time.monotonic()
        with pytest.raises(StoreError, match=r"^gs://xfid-bkt/records: no answer within 2 s when asked to read "):
            selection.load(store, files=[part])
        assert time.monotonic() - t < 15
