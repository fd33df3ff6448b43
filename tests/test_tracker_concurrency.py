"""8 processes record checks and change states on one store at once: nothing lost, ids unique."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from datetime import UTC, datetime, timedelta

import pytest

from tests.test_tracker_helpers import corr, row

pytestmark = pytest.mark.usefixtures("catalog")  # each test on SQLite and on PostgreSQL (tests/servers.py)

PROCS = 8
ROUNDS = 4
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SHARED = row(1.5, op="shared.op")


def worker(store: str, i: int, start, errors) -> None:
    """One process: ROUNDS x (a check with a shared and an own key, a note on XF-1, an ack of its own)."""
    try:
        from xfid.store import Store
        from xfid.tracker import Tracker

        start.wait(60)
        with Store(store) as s:
            tr = Tracker(s)
            for r in range(ROUNDS):
                now = T0 + timedelta(minutes=r)
                summ = tr.record_check(corr(SHARED, row(2.0 + r, op=f"p{i}.r{r}")), actor=f"proc{i}", now=now)
                mine = [x for x in summ.new if tr.issue(x, now=now)["op"] == f"p{i}.r{r}"]
                assert len(mine) == 1, summ
                tr.transition("XF-1", "note", actor=f"proc{i}", note=f"{i}/{r}", now=now)
                tr.transition(mine[0], "ack", actor=f"proc{i}", owner=f"owner{i}", now=now)
    except BaseException:
        errors.put(f"proc {i}: {traceback.format_exc()}")


@pytest.mark.slow
def test_eight_processes_checks_and_transitions(tmp_path):
    from xfid.store import Store
    from xfid.tracker import Tracker

    store = tmp_path / "store"
    with Store(store) as s:
        Tracker(s).record_check(corr(SHARED), actor="setup", now=T0)  # XF-1 exists before the race
    ctx = mp.get_context("spawn")
    start, errors = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(str(store), i, start, errors)) for i in range(PROCS)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(240)
    errs = []
    while not errors.empty():
        errs.append(errors.get())
    assert not errs, "\n".join(errs)
    assert [p.exitcode for p in procs] == [0] * PROCS

    with Store(store) as s:
        tr = Tracker(s)
        checks = tr.checks()
        assert [c["id"] for c in checks] == list(range(1, 1 + 1 + PROCS * ROUNDS))
        issues = tr.issues(now=T0)
        assert len(issues) == 1 + PROCS * ROUNDS
        assert [i["id"] for i in issues] == [f"XF-{n}" for n in range(1, 2 + PROCS * ROUNDS)]
        assert len({i["fingerprint"] for i in issues}) == len(issues)
        notes = [h for h in tr.issue("XF-1", now=T0)["history"] if h["action"] == "note"]
        assert sorted(h["note"] for h in notes) == sorted(f"{i}/{r}" for i in range(PROCS) for r in range(ROUNDS))
        acked = [i for i in issues if i["state"] == "acknowledged"]
        assert len(acked) == PROCS * ROUNDS
        assert all(i["owner"] == f"owner{i['op'][1]}" for i in acked)
        # every check saw XF-1 (new in the first, still open in all others) and saved its rows
        assert sum(c["counts"]["still_open"] for c in checks) >= PROCS * ROUNDS
        assert sorted(p.name for p in (store / "checks").iterdir()) == sorted(
            f"check-{c['id']}.parquet" for c in checks)


@pytest.mark.slow
def test_eight_cli_processes_change_states_at_once(tmp_path):
    """`xfid issues note/ack` from 8 processes at once: all succeed, no transition is lost."""
    import os
    import subprocess
    import sys

    from xfid.store import Store
    from xfid.tracker import Tracker

    store = tmp_path / "store"
    with Store(store) as s:
        Tracker(s).record_check(corr(*[row(2.0, op=f"op{i}") for i in range(PROCS)]), actor="setup", now=T0)
    env = {**os.environ, "XFID_STORE": str(store)}
    # each process runs two commands through the real click entry point (one import, two commands)
    script = ("import sys\nfrom xfid.cli import cli\ni = sys.argv[1]\n"
              "cli.main(['issues', 'note', 'XF-1', '--note', 'n' + i, '--actor', 'p' + i], standalone_mode=False)\n"
              "cli.main(['issues', 'ack', 'XF-%d' % (int(i) + 1), '--owner', 'o' + i], standalone_mode=False)\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(PROCS)]
    results = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0] * PROCS, results
    assert all("locked" not in err for _, err in results), results
    with Store(store) as s:
        tr = Tracker(s)
        notes = [h for h in tr.issue("XF-1", now=T0)["history"] if h["action"] == "note"]
        assert sorted((h["actor"], h["note"]) for h in notes) == sorted((f"p{i}", f"n{i}") for i in range(PROCS))
        assert [(i["state"], i["owner"]) for i in tr.issues(now=T0)] == [("acknowledged", f"o{i}") for i in range(PROCS)]
