"""`xfid store copy` tells the truth (a refused or failed copy changes nothing, table by table and
file by file, on a real PostgreSQL), copies everything (the checks' rows too: `xfid report` works
on the copy); and the library speaks Python while the CLI speaks flags."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.test_team import machine, records, run


def pg_dump(url: str) -> dict[str, Any]:
    """Every table's rows (sorted) and every sequence's position in a PostgreSQL database."""
    import psycopg

    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as c:
        tables = [r[0] for r in c.execute("SELECT tablename FROM pg_tables WHERE schemaname='public' ORDER BY 1")]
        for t in tables:
            out[t] = sorted(repr(r) for r in c.execute(f'SELECT * FROM "{t}"'))
        for (s,) in c.execute("SELECT sequencename FROM pg_sequences WHERE schemaname='public' ORDER BY 1").fetchall():
            out[f"sequence {s}"] = c.execute(f'SELECT last_value, is_called FROM "{s}"').fetchone()
    assert "sources" in out
    return out


def file_hashes(top: Path) -> dict[str, str]:
    """SHA-256 of every file under `top` (temps included: a refused copy leaves none behind)."""
    return {str(f.relative_to(top)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(top.rglob("*")) if f.is_file()}


def team_with_history(tmp_path: Path, url: str) -> tuple[Cli, dict[str, str], Path]:
    """A team store (PostgreSQL + a shared folder) with two sources and a check of its own."""
    shared = tmp_path / "nfs"
    team, env = machine(tmp_path, "team-machine", url, str(shared / "records"))
    run(team, env, "ingest", records(tmp_path / "team-rtl.csv", "rtl", "team-r", (10, 20)))
    run(team, env, "ingest", records(tmp_path / "team-arch.csv", "archmodel", "team-m", (30, 80)))
    run(team, env, "check")
    return team, env, shared


def local_with_history(tmp_path: Path) -> Cli:
    """A store with three sources and two checks (its catalog: the `catalog` fixture's)."""
    local = Cli(tmp_path / "local", tmp_path)
    run(local, {}, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    run(local, {}, "ingest", records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010)))
    run(local, {}, "check")
    run(local, {}, "ingest", records(tmp_path / "arch2.csv", "archmodel", "m2", (1000, 2600)))
    run(local, {}, "check")
    return local


def test_refused_copy_changes_nothing(catalog, pg_server, tmp_path):
    """Into a team store whose tracker holds a different history: exit 2, and every table of its
    database and every file of its records and checks folder are as they were."""
    team_url = pg_server.database()
    team, env, shared = team_with_history(tmp_path, team_url)
    local = local_with_history(tmp_path)
    before, files = pg_dump(team_url), file_hashes(shared)
    r = local("store", "copy", "--to-database", team_url, "--to-records", str(shared / "records"))
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error:") and "different history" in r.output and "nothing was changed" in r.output
    assert "Traceback" not in r.output
    assert pg_dump(team_url) == before
    assert file_hashes(shared) == files
    assert len(json.loads(run(team, env, "sources", "--format", "json"))) == 2


def test_failure_inside_the_transaction_rolls_everything_back(catalog, pg_url, tmp_path, monkeypatch):
    """A failure after the sources, parts and history were inserted: rolled back, the part and check
    temps removed, the destination as it was (an empty catalog, no file)."""
    from xfid import storecopy
    from xfid.errors import StoreError
    from xfid.store import Store
    from xfid.tracker import config_db, triage_db
    from xfid.tracker import db as tracker_db

    local = local_with_history(tmp_path)
    dest = tmp_path / "team"
    with Store(tmp_path / "local", database=pg_url, records=dest / "records") as team:
        tracker_db.setup(team.conn)  # an empty team store, its tables made (as by its first command)
        triage_db.setup(team.conn)
        config_db.setup(team.conn)
    before, files = pg_dump(pg_url), file_hashes(dest)
    real = storecopy._copy_history
    seen: list[int] = []

    def fail_after(src, dst, tables):
        real(src, dst, tables)
        seen.append(dst.execute("SELECT COUNT(*) FROM sources").fetchone()[0])
        raise StoreError("the network went away (injected)")

    monkeypatch.setattr(storecopy, "_copy_history", fail_after)
    r = local("store", "copy", "--to-database", pg_url, "--to-records", str(dest / "records"))
    assert r.exit_code == 2 and "injected" in r.output, r.output
    assert seen == [3]  # it had got as far as inserting everything
    after = pg_dump(pg_url)
    # the commit-attempt journal is insert-only (xfid.committed): the failed copy's attempts stay,
    # naming files that are gone; every other table is as it was
    assert after.pop("commit_attempts", []) and before.pop("commit_attempts", []) == []
    assert after == before
    # the only file is the records location's store id, written when the copy opened the new team
    # store (as its first command would): no part, no check file, no temp
    def no_id(hashes):
        return {k: v for k, v in hashes.items() if not k.endswith(".xfid-store-id")}

    assert no_id(file_hashes(dest)) == no_id(files) == {}
    monkeypatch.setattr(storecopy, "_copy_history", real)  # and run again, it copies all
    out = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", str(dest / "records"))
    assert "sources: 3 copied" in out and "check rows: 2 copied, 2 verified" in out


def test_missing_part_refuses_before_writing(pg_url, tmp_path):
    """A part of the source store that cannot be read refuses the copy before any file is written."""
    local = local_with_history(tmp_path)
    part = sorted((tmp_path / "local" / "records").rglob("part-*.parquet"))[-1]
    part.rename(tmp_path / "away.parquet")
    dest = tmp_path / "team"
    import psycopg

    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname='public'").fetchone()[0] == 0
    r = local("store", "copy", "--to-database", pg_url, "--to-records", str(dest / "records"))
    assert r.exit_code == 2 and "is missing" in r.output and "nothing was changed" in r.output, r.output
    # the brand-new team store is exactly as before: the copy took away what opening it made
    # (the catalog's tables, the records folder and its store id file)
    assert not dest.exists()
    with psycopg.connect(pg_url) as c:
        left = c.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'").fetchall()
        seqs = c.execute("SELECT sequencename FROM pg_sequences WHERE schemaname='public'").fetchall()
    assert left == [] and seqs == []
    (tmp_path / "away.parquet").rename(part)  # and once the part is back, the copy goes through
    out = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", str(dest / "records"))
    assert "sources: 3 copied" in out


def test_refused_copy_into_a_new_store_in_an_existing_folder_keeps_the_folder(pg_url, tmp_path):
    """A brand-new team store whose records folder is already there (empty, or holding other
    files): a refused copy leaves the folder and what it holds, and no id file, no table."""
    import psycopg

    local = local_with_history(tmp_path)
    part = sorted((tmp_path / "local" / "records").rglob("part-*.parquet"))[0]
    part.rename(tmp_path / "away.parquet")
    dest = tmp_path / "team" / "records"
    dest.mkdir(parents=True)
    (dest / "README").write_text("the team's share\n")
    r = local("store", "copy", "--to-database", pg_url, "--to-records", str(dest))
    assert r.exit_code == 2 and "is missing" in r.output, r.output
    assert sorted(p.name for p in (tmp_path / "team").rglob("*")) == ["README", "records"]
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname='public'").fetchone()[0] == 0


@pytest.mark.parametrize("to_s3", [False, True], ids=["dir", "s3"])
def test_copy_carries_the_check_rows(catalog, pg_url, tmp_path, to_s3, request):
    """After a copy, the report on another machine of the team store reads every check's rows;
    the check files are verified like the parts; a second copy finds them there."""
    local = local_with_history(tmp_path)
    dest = request.getfixturevalue("s3_records") if to_s3 else str(tmp_path / "team" / "records")
    out = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", dest)
    assert "check rows: 2 copied, 2 verified (SHA-256)" in out, out
    if not to_s3:
        local_checks = tmp_path / "local" / "checks"
        for name in ("check-1.parquet", "check-2.parquet"):
            assert (tmp_path / "team" / "checks" / name).read_bytes() == (local_checks / name).read_bytes()
        assert not list((tmp_path / "team").rglob(".tmp-*"))
    again = run(local, {}, "store", "copy", "--to-database", pg_url, "--to-records", dest)
    assert "check rows: 0 copied, 2 verified" in again and "tracker: already there, identical" in again
    other, env = machine(tmp_path, "other-machine", pg_url, dest)
    report = tmp_path / "week.html"
    run(other, env, "report", "--html", "-o", str(report), "--since", "2026-01-01")
    assert report.stat().st_size > 0
    assert "rows of check" not in report.read_text()
    import psycopg  # each check's recorded config came along (one config per store)

    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT COUNT(*) FROM check_configs").fetchone()[0] == 2


# --- the library speaks Python -------------------------------------------------------------
PUBLIC_NAMES = r'''
import importlib, json, pkgutil, sys
import xfid
first = {n: getattr(xfid, n) for n in xfid.__all__}
failed = []
for m in pkgutil.walk_packages(xfid.__path__, "xfid."):
    if m.name.endswith("__main__"):  # runs the command line
        continue
    try:
        importlib.import_module(m.name)
    except ImportError as e:  # an optional extra not installed here
        failed.append(f"{m.name}: {e}")
subpackages = {m.name for m in pkgutil.iter_modules(xfid.__path__)}
out = {"imported": len(sys.modules), "failed": failed, "names": {}}
for n in xfid.__all__:
    now = getattr(xfid, n)
    out["names"][n] = {"same": now is first[n], "callable": callable(now), "module": n in subpackages,
                       "type": type(now).__name__}
out["adapters"] = xfid.adapters()[0]["name"]
print(json.dumps(out))
'''


def test_no_public_name_is_shadowed_by_a_subpackage():
    """Import every module of xfid (as ingest, report, serve... do), then every name xfid.__all__
    promises is the very object it was at `import xfid`; `xfid.adapters()` still lists the adapters."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    r = subprocess.run([sys.executable, "-c", PUBLIC_NAMES], capture_output=True, text=True, cwd=ROOT,
                       timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["imported"] > 100
    for name, seen in out["names"].items():
        assert seen["same"], f"xfid.{name} changed after importing the subpackages: now a {seen['type']}"
        if name[0].islower() and not name.startswith("__"):
            assert seen["callable"], f"xfid.{name} is a {seen['type']}, not the function the API promises"
    assert out["adapters"] == "xfid-records"


def test_adapters_callable_after_an_ingest(tmp_path):
    import xfid

    with xfid.open_store(tmp_path / "s") as store:
        store.ingest([records(tmp_path / "r.csv", "rtl", "r", (1, 2))])
    assert {"name", "fidelity", "formats"} <= set(xfid.adapters()[0]) and callable(xfid.adapters)


def loaded_store(tmp_path: Path):
    """An API store with rtl and archmodel numbers of t100-a0 and one check."""
    import xfid

    store = xfid.open_store(tmp_path / "api-store")
    store.ingest([records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)),
                  records(tmp_path / "arch.csv", "archmodel", "m1", (1250, 2010))])
    store.check(actor="t")
    return store


def test_every_list_parameter_takes_one_string(tmp_path):
    """A string where a list is taken is one name, never its characters: the same answer as the
    one-item list, for every method (and the signatures say so)."""
    import inspect

    import xfid
    from xfid.api import XfidStore

    for fn in [xfid.compare, *(getattr(XfidStore, n) for n in dir(XfidStore) if not n.startswith("_"))]:
        if not callable(fn) or isinstance(fn, property):
            continue
        for p in inspect.signature(fn).parameters.values():
            ann = str(p.annotation)
            if ("Sequence[" in ann or "Iterable[" in ann) and p.kind is not p.VAR_KEYWORD:
                assert "str" in ann.split("Sequence[")[0].split("Iterable[")[0] or ann.startswith("Runs") \
                    or "PathLike |" in ann, f"{fn.__qualname__}({p.name}: {ann}) does not take one string"
    with loaded_store(tmp_path) as store:
        one, listed = store.correlate(targets="t100-a0"), store.correlate(targets=["t100-a0"])
        assert one.to_json() == listed.to_json() and len(one.rows)
        assert store.correlate(pairs="rtl->archmodel").to_json() == store.correlate(pairs=["rtl:archmodel"]).to_json()
        assert store.records(columns="op").columns.tolist() == ["op"]
        assert store.records(target="t100-a0").equals(store.records(target=["t100-a0"]))
        assert store.issues(target="t100-a0").equals(store.issues(target=["t100-a0"]))
        snap = store.snapshot(targets="t100-a0")
        assert store.snapshot(targets=["t100-a0"])["keys"] == snap["keys"] and snap["keys"]
        assert xfid.compare(snap, store, targets="t100-a0").exit_code == 0
        with pytest.raises(Exception, match="unknown target 't100'"):  # one name, never 't', '1', ...
            store.correlate(targets="t100")
        from xfid.errors import XfidError

        with pytest.raises(XfidError, match="targets must be a string or a list of strings"):
            store.correlate(targets=[1])


def test_a_filter_that_matches_nothing_warns_with_the_close_names(tmp_path, xfid_cli):
    from xfid.errors import XfidWarning

    with loaded_store(tmp_path) as store:
        with pytest.warns(XfidWarning, match=r"no record has target 't100'; did you mean 't100-a0'\?"):
            assert store.records(target="t100").empty
        with pytest.warns(XfidWarning, match="no record has workload 'gemm-swep'; did you mean 'gemm-sweep'"):
            assert len(store.records(workload=["gemm-sweep", "gemm-swep"])) == 4
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert len(store.records(target="t100-a0")) == 4  # a filter that matches: no warning
    cli = Cli(tmp_path / "api-store", tmp_path)
    r = cli("export", "--target", "t100")
    assert r.exit_code == 0 and "warning: no record has target 't100'; did you mean 't100-a0'?" in r.output


@pytest.mark.parametrize(("call", "python", "cli_args", "flag"), [
    (lambda s: s.report("last week"), "period 'last week'", ("report", "last week"), "Error: PERIOD 'last week'"),
    (lambda s: s.report("2026-12-09..2026-12-01"), "period '2026-12-09..2026-12-01': the first day 2026-12-09 is after",
     ("report", "--since", "2026-12-09", "--until", "2026-12-01"), "Error: --since 2026-12-09 is after --until"),
    (None, None, ("report", "--until", "last week"), "Error: --until 'last week' is not a date"),
    (lambda s: s.correlate(as_of="soon"), "as_of expects a date", ("correlate", "--as-of", "soon"),
     "Error: --as-of expects a date"),
    (lambda s: s.correlate(run=["bogus=1"]), "run 'bogus=1'", ("correlate", "--run", "bogus=1"), "Error: --run 'bogus=1'"),
    (lambda s: s.correlate(pairs="roofline-"), "pairs expects CANDIDATE->REFERENCE", ("correlate", "--pair", "roofline-"),
     "Error: --pair expects"),
    (lambda s: s.act("XF-1", "waive", reason="r", until="2026-13-01"), "until: bad date '2026-13-01'",
     ("issues", "waive", "XF-1", "--reason", "r", "--until", "2026-13-01"), "Error: --until: bad date"),
    (lambda s: s.act("XF-1", "ack"), "needs an owner (owner NAME)", ("issues", "ack", "XF-1"), "Missing option '--owner'"),
    (lambda s: s.check(resolve_after=0), "resolve_after must be an integer", None, None),
    (lambda s: s.export("parquet"), "fmt parquet needs output FILE", ("export", "--format", "parquet"),
     "Error: --format parquet needs -o FILE"),
])
def test_library_errors_name_the_parameter_the_cli_its_flag(tmp_path, call, python, cli_args, flag):
    from xfid.errors import XfidError

    with loaded_store(tmp_path) as store:
        if call is not None:
            with pytest.raises(XfidError) as e:
                call(store)
            assert python in str(e.value) and "--" not in str(e.value), str(e.value)
    if cli_args is not None:
        r = Cli(tmp_path / "api-store", tmp_path)(*cli_args)
        assert r.exit_code == 2 and flag in r.output and "Traceback" not in r.output, r.output


def test_no_library_error_names_a_flag():
    """The class: no `raise` outside the command layer spells a `--flag` in its message (a flag is
    named through a `{param}` placeholder, xfid.errors); a whole `xfid ...` command in backticks is
    advice, not a flag. xfid/models/ parses the `xfid roofline` options and has no Python API;
    xfid/client.py is the command line's transport for `--server` (its errors are about the flags
    and the env XFID_SERVER/XFID_TOKEN it was given)."""
    import ast
    import re

    from tests.conftest import ROOT

    found = []
    for path in sorted((ROOT / "xfid").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("xfid/commands/", "xfid/cli.py", "xfid/app.py", "xfid/models/", "xfid/client.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            arg = node.exc.args[0]
            parts = [arg] if isinstance(arg, ast.Constant) else arg.values if isinstance(arg, ast.JoinedStr) else []
            text = "".join(str(p.value) for p in parts if isinstance(p, ast.Constant))
            text = re.sub(r"`[^`]*`", "", text)
            if re.search(r"(^|[\s(])--[a-z]", text):
                found.append(f"{rel}:{node.lineno}: {text[:80]}")
    assert not found, "\n".join(found)


def test_pair_colon_form_and_the_shell_hint(tmp_path):
    """`--pair roofline:measured` is `'roofline->measured'`; an unquoted `->` reaches xfid as `roofline-`
    (the shell made a file `measured`): refused, saying so."""
    with loaded_store(tmp_path):
        pass
    cli = Cli(tmp_path / "api-store", tmp_path)
    a = cli("correlate", "--format", "json", "--pair", "rtl:archmodel")
    b = cli("correlate", "--format", "json", "--pair", "rtl->archmodel")
    assert a.exit_code == b.exit_code == 0 and a.output == b.output
    r = cli("correlate", "--pair", "rtl-")
    assert r.exit_code == 2 and "ends in '-': the shell probably took the '>'" in r.output and "rtl:archmodel" not in r.output
    assert "roofline:measured" in r.output
    helptext = cli("correlate", "--help").output
    assert "'roofline->measured'" in helptext and "roofline:measured" in helptext


def test_docs_and_help_quote_every_arrow_pair():
    """Wherever a command line with `->` is shown (docs, README, help), the pair is quoted."""
    import re

    from tests.conftest import ROOT

    bad = []
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "xfid" / "commands").glob("*.py"))]:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            for m in re.finditer(r"--pair[ =]([^\s`'\"]\S*->)", line):
                bad.append(f"{f.name}:{i}: {m.group(0)}")
    assert not bad, bad


# --- smaller things a newcomer met ---------------------------------------------------------
def test_report_takes_the_period_positional_as_the_api_does(tmp_path):
    with loaded_store(tmp_path):
        pass
    cli = Cli(tmp_path / "api-store", tmp_path)
    out = tmp_path / "w.html"
    r = cli("report", "2026-W49", "--html", "-o", out)
    assert r.exit_code == 0 and "2026-W49" in out.read_text(), r.output
    r = cli("report", "2026-11-01..2026-12-31", "--html", "-o", out)
    assert r.exit_code == 0, r.output
    r = cli("report", "2026-W49", "--week", "2026-W48", "--html", "-o", out)
    assert r.exit_code == 2 and "Error: give the period either as PERIOD or as --week or --since/--until" in r.output


def test_help_never_cuts_a_command_description():
    """Every command's first sentence appears whole in `xfid --help`; nothing is cut with '...'."""
    from click.testing import CliRunner

    from xfid.cli import COMMANDS, cli

    text = CliRunner().invoke(cli, ["--help"]).output
    assert "..." not in text.split("Commands:")[1] and "…" not in text
    flat = " ".join(text.split())
    import importlib

    for name, mod in COMMANDS.items():
        first = importlib.import_module(mod).cli.get_short_help_str(10_000)
        assert " ".join(first.split()) in flat, name


def test_profile_output_help_names_only_real_formats():
    from click.testing import CliRunner

    from xfid.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["profile", "--help"]).output.split())
    formats = text.split("--format [")[1].split("]")[0].split("|")
    assert formats == ["table", "json", "markdown"]
    said = text.split("-o, --output FILE")[1].split("-h, --help")[0]
    for word in ("text", "csv", "txt"):
        assert word not in said.lower(), said


def test_summary_of_a_team_store_names_its_catalog_and_records(pg_url, tmp_path):
    from tests.servers import password_of

    team, env = machine(tmp_path, "laptop", pg_url, str(tmp_path / "nfs" / "records"))
    run(team, env, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1, 2)))
    out = run(team, env, "summary")
    assert out.startswith("team store (catalog postgresql://") and str(tmp_path / "nfs" / "records") in out
    assert str(tmp_path / "laptop") not in out and password_of(pg_url) not in out
    assert "2 records from 1 sources" in out


@pytest.mark.parametrize(("name", "text", "where", "missing"), [
    ("r.json", None, "r.json: missing 'target' and 'workload'", "$.duration"),  # JSON: not the first value's key
    ("m.csv", "fidelity,target,workload,op,metric,value\nmeasured,,,op,latency,1\n",
     "m.csv, line 2: missing 'target' and 'workload'", "column"),
    ("n.csv", "fidelity,target,workload,op,metric,value\nmeasured,,w,op,latency,1\nmeasured,t,,op,latency,2\n",
     "n.csv: missing 'target' (line 2) and 'workload' (line 3)", "column"),
])
def test_every_missing_field_at_once_at_its_record(xfid_cli, fixtures, tmp_path, name, text, where, missing):
    f = tmp_path / name
    f.write_text(text if text is not None else (fixtures / "measured/vllm/h100_llama3-8b_decode_bs8.json").read_text())
    r = xfid_cli("ingest", f)
    assert r.exit_code == 2 and where in r.output and missing not in r.output, r.output
    assert "(pass --target and --workload or set them in xfid-source.toml beside the file)" in r.output
    import xfid
    from xfid.errors import SchemaError

    with pytest.raises(SchemaError) as e:
        xfid.open_store(tmp_path / "py").ingest(f)
    assert "pass target and workload" in str(e.value) and "--" not in str(e.value)


def test_copy_to_other_records_than_the_team_stores_is_refused(pg_server, tmp_path):
    """A team store's parts live where its catalog says; a copy naming another place is refused
    before anything is written (the parts would be registered where no machine looks)."""
    team_url = pg_server.database()
    team_with_history(tmp_path, team_url)
    local = Cli(tmp_path / "local", tmp_path)
    run(local, {}, "ingest", records(tmp_path / "rtl.csv", "rtl", "r", (1000, 2000)))
    before, files = pg_dump(team_url), file_hashes(tmp_path)
    r = local("store", "copy", "--to-database", team_url, "--to-records", str(tmp_path / "elsewhere"))
    assert r.exit_code == 2 and "keeps its records at" in r.output and "nothing was changed" in r.output, r.output
    assert pg_dump(team_url) == before
    after = file_hashes(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("local/")} == \
        {k: v for k, v in files.items() if not k.startswith("local/")}


def test_copy_without_to_records_registers_the_parts_where_they_are(pg_url, tmp_path):
    """No --to-records: the catalog moves, the parts and check rows stay (nothing is rewritten), and
    another machine naming this records folder reads the copy, report included."""
    local = local_with_history(tmp_path)
    files = file_hashes(tmp_path / "local" / "records")
    out = run(local, {}, "store", "copy", "--to-database", pg_url)
    assert "sources: 3 copied" in out and "parts: 3 copied, 3 verified" in out, out
    assert "check rows: 0 copied, 2 verified" in out, out
    assert file_hashes(tmp_path / "local" / "records") == files
    other, env = machine(tmp_path, "other", pg_url, str(tmp_path / "local" / "records"))
    assert run(other, env, "export") == run(local, {}, "export")
    run(other, env, "report", "--html", "-o", str(tmp_path / "w.html"), "--since", "2026-01-01")
