"""Helpers for the `xfid serve` tests: a small store with issues, tokens, a real server on 127.0.0.1.

The data is the normalized xfid-records CSV (the schema itself): two GEMM-tile cycle counts per
fidelity, an architecture model 25% off RTL on one of them, so one check files one issue; a
hostile workload name (HTML, script, a bidi override, a control character) files a second.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
HEAD = "fidelity,target,workload,op,metric,stat,value,unit,run,timestamp\n"
OPS = ('"gemm_tile[m=128,n=128,k=256]"', '"gemm_tile[m=256,n=128,k=256]"')
HOSTILE = '<img src=x onerror=alert(1)><script>alert(2)</script>\u202egpj.exe\x07'


def records_csv(fidelity: str, run: str, values: tuple[float, float], workload: str = "gemm-sweep",
                stamp: str = "2026-11-01T00:00:00Z") -> str:
    quoted = '"' + workload.replace('"', '""') + '"'
    return HEAD + "".join(f"{fidelity},t100-a0,{quoted},{op},cycles,value,{v},cycles,{run},{stamp}\n"
                          for op, v in zip(OPS, values, strict=True))


def make_store(store: Path, work: Path) -> None:
    """Ingest RTL and a 25%-off model (plain and hostile workload) and run one check (XF-1, XF-2),
    through the Python API (the catalog: env XFID_DATABASE_URL when set)."""
    import xfid

    work.mkdir(parents=True, exist_ok=True)
    files = []
    for name, fid, run, vals, wl in (("rtl.csv", "rtl", "rtl-a", (1000, 2000), "gemm-sweep"),
                                     ("arch.csv", "archmodel", "model-v1", (1250, 2010), "gemm-sweep"),
                                     ("rtl-h.csv", "rtl", "rtl-a", (1000, 2000), HOSTILE),
                                     ("arch-h.csv", "archmodel", "model-v1", (1400, 2010), HOSTILE)):
        (work / name).write_text(records_csv(fid, run, vals, wl))
        files.append(str(work / name))
    with xfid.open_store(store) as api:
        api.ingest(files)
        api.check(actor="setup")


def token(store: Path, name: str, role: str) -> str:
    """A new token (through the library, as `xfid token create` does)."""
    import xfid
    from xfid.serve import tokens

    with xfid.open_store(store) as api:
        return tokens.create(api.backend(create=True).conn, name, role, "test")


def xfid(env: dict[str, str], store: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "xfid", "--store", str(store), *args], capture_output=True,
                       text=True, env=env, timeout=300)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    env.pop("XFID_SERVER", None)
    env.pop("XFID_TOKEN", None)
    return env


@contextlib.contextmanager
def running_server(env: dict[str, str], store: Path) -> Iterator[str]:
    """`xfid serve` on 127.0.0.1 and a free port, as a real process; yields its base URL."""
    port = free_port()
    log = store.parent / f"serve-{port}.log"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "xfid", "--store", str(store), "serve", "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/login", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"xfid serve did not start: {log.read_text()}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
