"""The Python API: open a store, ingest, correlate, check, track issues, report, compare.

Every `xfid` command is one call into this module; notebooks use the same calls::

    import xfid
    with xfid.open_store("work/.xfid") as store:
        store.ingest(["results/"], target="h100-sxm")
        corr = store.correlate(targets=["h100-sxm"])
        store.check(actor="me")
        print(store.issues(state="open"))
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid.errors import ConfigError, TrackerError, XfidError, XfidWarning

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config
    from xfid.correlation import CorrelationResult
    from xfid.doctor import DoctorReport
    from xfid.drift.drift import DriftReport
    from xfid.engine import CalibrationResult, Correlation
    from xfid.engine.engines import EngineChoice
    from xfid.engine.request import Request
    from xfid.ingest import IngestReport
    from xfid.profile import Profile
    from xfid.rebuild import RebuildReport
    from xfid.removal import Removed
    from xfid.report.period import Period
    from xfid.store import Store
    from xfid.tracker import CheckSummary, Tracker
    from xfid.tracker.chunks import RowChunks
    from xfid.tracker.noise import NoiseSettings

PathLike = str | os.PathLike[str]
Runs = str | Sequence[str] | Mapping[str, str] | None
DEFAULT_FAIL_ON = "new,regression,bound,drift"
REPORT_MAX_POINTS = 5000


def names(value: str | Iterable[Any] | None, param: str, *, strings: bool = True) -> list[Any] | None:
    """A list argument as a list: one string is ONE name (never its characters); None or empty: None.

    Every parameter of this module that takes a list of names (targets, pairs, columns, ...) reads it
    through here, so `targets="t100-a0"` means `["t100-a0"]`.

    Raises:
        XfidError: an item that is not a string (`strings`), naming the parameter.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise XfidError(f"{{{param}}} must be a string or a list of strings, got {{kind}}", params=(param,),
                        kind=type(value).__name__)
    out = list(value)
    if strings:
        bad = [v for v in out if not isinstance(v, str)]
        if bad:
            raise XfidError(f"{{{param}}} must be a string or a list of strings; {{bad!r}} is a {{kind}}", params=(param,),
                            bad=bad[0], kind=type(bad[0]).__name__)
    return out or None


def open_store(path: PathLike | None = None, config: PathLike | Config | None = None) -> XfidStore:
    """Open a store (created on the first ingest) with its configuration.

    Args:
        path: the store directory; default env XFID_STORE, then `[store].path` of the config, then `.xfid`.
        config: an xfid.toml path or a loaded Config; default env XFID_CONFIG, then ./xfid.toml,
            then the config the store's last check recorded (said once on stderr:
            xfid.storeconfig), else the bundled targets. Its `[store] database` (a PostgreSQL URL) and `[store] records`
            (a directory or bucket URL) say where a team store keeps its catalog and its parts; env
            XFID_DATABASE_URL and XFID_RECORDS_URL override them (docs/team.md).
    """
    return XfidStore(path, config)


def adapters() -> list[dict[str, Any]]:
    """The registered adapters: name, fidelity (None: from the file), formats."""
    from xfid.adapters import describe

    return describe()


def only_rows_back(req: Request, what: str) -> Request:
    """`req` for a call that reads the discrepancies itself (check, snapshot, calibrate, compare).

    Raises:
        XfidError: the request writes them to a dataset instead (`out`: correlate() only).
    """
    if req.out:
        raise XfidError(f"{what} reads the discrepancies itself: a request with out={req.out!r} (a Parquet "
                        "dataset) is for correlate() only; leave out unset")
    return req


def compare(baseline: PathLike | dict[str, Any], current: PathLike | dict[str, Any] | Correlation | XfidStore, *,
            config: Config | None = None, fail_on: str | Sequence[str] = DEFAULT_FAIL_ON,
            targets: str | Sequence[str] | None = None, run: Runs = None, as_of: Any = None,
            request: Request | None = None) -> DriftReport:
    """Compare `current` with a baseline snapshot: the drift result (its `exit_code` is the CI verdict).

    Args:
        baseline: a snapshot file from `snapshot()` / `xfid snapshot`, or a loaded snapshot.
        current: a snapshot (file or loaded), a Correlation, or a store (correlated now, with
            `run` and `as_of` as for `XfidStore.correlate`).
        config: whose `[drift]` thresholds apply (default: the store's, else the effective xfid.toml).
        fail_on: categories that fail: new, regression, bound, drift, or any.
        targets: only these targets, on both sides.
        request: the selection as one Request instead of targets, run and as_of.

    Raises:
        XfidError: an unreadable snapshot, unknown thresholds or categories.
    """
    from xfid.drift.drift import Thresholds, compare_snapshots, parse_fail_on
    from xfid.drift.snapshot import make_snapshot, read_snapshot
    from xfid.engine import Correlation

    fails = parse_fail_on(",".join(names(fail_on, "fail_on") or []))
    req = only_rows_back(request if request is not None else XfidStore.request(targets, run, as_of), "compare")
    targets = list(req.targets) or None
    base = baseline if isinstance(baseline, dict) else read_snapshot(baseline)
    if config is None:
        if isinstance(current, XfidStore):
            config = current.config
        else:
            from xfid.config import load_config

            config = load_config(None)
    th = Thresholds.from_config(config.section("drift"))
    if isinstance(current, XfidStore):
        cur = make_snapshot(current.correlate(request=req))
    elif isinstance(current, Correlation):
        cur = make_snapshot(current)
    else:
        cur = current if isinstance(current, dict) else read_snapshot(current)
    if targets:
        base, cur = _only_targets(base, targets), _only_targets(cur, targets)
    return compare_snapshots(base, cur, th, fails)


def _only_targets(snap: dict[str, Any], targets: Sequence[str]) -> dict[str, Any]:
    return {**snap, "keys": {k: v for k, v in snap["keys"].items() if v["target"] in targets},
            "comparisons": [c for c in snap["comparisons"] if c["target"] in targets]}


@dataclass
class ReportResult:
    """A written report: where, how many pages (PDF), what it counted."""

    path: Path
    html: bool
    pages: int | None
    active_issues: int  # xfid.counts.active: open, acknowledged or reopened (the report's register)
    pairs: int
    open_issues: int = 0  # of those, in state `open` exactly (as store.issues(state="open"))
    numbers: Path | None = None  # the attachment beside it: every number with its file and row (CSV)


@dataclass
class KeyHistory:
    """One key's error at every recorded check, and the change points in that series."""

    key: str
    series: list[dict[str, Any]]
    change_points: list[Any]
    moves: list[dict[str, Any]] = field(default_factory=list)  # which side moved, where the error jumped

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "series": self.series, "change_points": [c.to_dict() for c in self.change_points],
                "moves": self.moves}


@dataclass
class Bounds:
    """`XfidStore.roofline()`: the bound records (xfid-records dicts), the target they are for,
    and what ingesting them did (None when not ingested)."""

    target: str
    records: list[dict[str, Any]]
    ingested: IngestReport | None = None


@dataclass
class RtlRun:
    """`run_rtl()`: the run (rtl_hooks.runner.RunResult), its probe records (each with
    `test_failed`), and the rows ingested (None when not ingested)."""

    result: Any
    records: list[dict[str, Any]]
    ingested_rows: int | None = None


class XfidStore:
    """A store and its configuration; every method is one operation of the `xfid` command line."""

    def __init__(self, path: PathLike | None = None, config: PathLike | Config | None = None):
        self._path_arg = path
        self._config_arg = config
        self._backend: Store | None = None
        self._tracker: Tracker | None = None
        self._config_checked = False  # the store's recorded config compared with this one (once)

    # --- what it is -------------------------------------------------------------------
    @cached_property
    def config(self) -> Config:
        """The effective configuration (targets, tolerances, op maps, pairs, settings).

        The config given (`config`, env XFID_CONFIG, ./xfid.toml); with none, the config the
        store's last check recorded (said once on stderr: xfid.storeconfig), else the bundled one."""
        from xfid.config import Config

        cfg = self._given_config
        if isinstance(self._config_arg, Config) or cfg.path is not None:
            return cfg
        return self._store_config(cfg)

    @cached_property
    def _given_config(self) -> Config:
        """The config as given or found, before the store is asked (it says where the store is)."""
        from xfid.config import Config, load_config

        return self._config_arg if isinstance(self._config_arg, Config) else load_config(self._config_arg)

    def _store_config(self, bundled: Config) -> Config:
        """No config given or found: the config of the store's last check, said once on stderr
        (xfid.storeconfig); the bundled one when the store has none recorded (or no store yet)."""
        from xfid import storeconfig
        from xfid.errors import StoreError
        from xfid.store import DB_NAME

        if not (self.path / DB_NAME).is_file() and not self.locations()["database"]:
            return bundled
        try:
            rec = storeconfig.last_recorded(self.backend())
        except StoreError:
            return bundled
        if rec is None or not rec.known or rec.config_hash == bundled.hash():
            return bundled
        cfg = storeconfig.config_of(rec)
        if cfg is None:  # the recorded text no longer loads: keep the bundled config, and say so
            storeconfig.say(storeconfig.mismatch(bundled, rec) or "")
            return bundled
        storeconfig.say(storeconfig.adopted(rec, cfg))
        return cfg

    @cached_property
    def path(self) -> Path:
        """The store directory: the argument, env XFID_STORE, `[store].path`, else `.xfid`."""
        from xfid.store import resolve_store_path

        return resolve_store_path(self._path_arg, self._given_config.store)

    def locations(self) -> dict[str, str | None]:
        """Where the catalog and the records are: env XFID_DATABASE_URL / XFID_RECORDS_URL, else
        `[store] database` / `[store] records` of the config given (None: the store's own SQLite
        file and records/)."""
        cfg = self._given_config
        from xfid.locations import env_database_url, env_records_url

        return {"database": env_database_url() or cfg.database, "records": env_records_url() or cfg.records}

    def backend(self, create: bool = False) -> Store:
        """The underlying `xfid.store.Store` (opened once; `create` makes a missing store).

        Raises:
            StoreError: no store at the path (and not `create`), or it cannot be opened.
        """
        if self._backend is None:
            from xfid.store import Store

            self._backend = Store(self.path, create=create, **self.locations())
        if not self._config_checked:
            self._warn_other_config()
        return self._backend

    def _warn_other_config(self) -> None:
        """Once per store: warn when the config given is not the one of the store's last check
        (with none given, `config` takes the store's own)."""
        from xfid import storeconfig
        from xfid.config import Config

        self._config_checked = True
        assert self._backend is not None
        if not isinstance(self._config_arg, Config) and self._given_config.path is None:
            return
        rec = storeconfig.last_recorded(self._backend)
        msg = None if rec is None else storeconfig.mismatch(self.config, rec)
        if msg:
            storeconfig.say(msg)

    def recorded_config(self) -> dict[str, Any] | None:
        """The config of the store's last check: check_id, config_hash, path, content (None: no check)."""
        from xfid import storeconfig

        rec = storeconfig.last_recorded(self.backend())
        return None if rec is None else {"check_id": rec.check_id, "config_hash": rec.config_hash,
                                         "path": rec.path, "content": rec.content, "recorded": rec.known}

    @property
    def tracker(self) -> Tracker:
        """The discrepancy tracker of this store (its tables are created on first use)."""
        if self._tracker is None:
            from xfid.tracker import Tracker

            self._tracker = Tracker(self.backend())
        return self._tracker

    def close(self) -> None:
        self._tracker = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> XfidStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<xfid store {self.path}>"

    # --- records ----------------------------------------------------------------------
    def ingest(self, paths: PathLike | Iterable[PathLike], adapter: str | None = None, target: str | None = None,
               workload: str | None = None, run: str | None = None, fidelity: str | None = None,
               meta: Mapping[str, str] | None = None, options: Mapping[str, Any] | None = None,
               progress: Callable[[Path, int, int], None] | None = None) -> IngestReport:
        """Ingest files or directories, all or nothing; the same bytes with the same context again are a no-op.

        Args:
            paths: files or directories (a directory: every data file under it).
            adapter: adapter name (`adapters()`); default: sniffed per file.
            target, workload, run, fidelity, meta: what a file does not carry itself.
            options: adapter-specific options.
            progress: called as (path, index, total) before each file.

        Returns:
            The ingest summary (rows, files with their adapter, metrics and warnings, skipped files).

        Raises:
            XfidError: an unreadable file, a bad option; nothing is written then.
        """
        from xfid.ingest import IngestOptions, ingest

        opts = IngestOptions(adapter=adapter or "auto", fidelity=fidelity, target=target, workload=workload, run=run,
                             meta=dict(meta or {}), options=dict(options or {}))
        items = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(p) for p in paths]
        return ingest(self.backend(create=True), items, opts, progress=progress)

    def records(self, columns: str | Sequence[str] | None = None, **filters: str | Sequence[str]) -> pd.DataFrame:
        """Records in the normalized schema, e.g. `records(target="h100-sxm", metric=["latency", "ttft"])`.

        A filter value no record of the store has gives an XfidWarning naming the close ones
        (`target="t100"`: did you mean 't100-a0'?), not a silently empty table."""
        wanted = _filters(filters)
        table = self.backend().read(wanted, names(columns, "columns"))
        _warn_unmatched(self.backend(), self.config, wanted, table)
        return table.to_pandas()

    def export(self, fmt: str, output: PathLike | None = None, **filters: str | Sequence[str]) -> int:
        """Write the filtered records as jsonl, csv or parquet to `output` (default stdout); returns the rows."""
        from xfid.export import export_records

        wanted = _filters(filters)
        n = export_records(self.backend(), fmt, None if output is None else str(output), wanted)
        if not n:  # nothing written: say which filter value matched no record
            _warn_unmatched(self.backend(), self.config, wanted, None)
        return n

    def sources(self, removed: bool = False) -> list[dict[str, Any]]:
        """The ingested sources (the manifest): path, adapter, rows, hash, time, options, summary.

        Args:
            removed: also the removed sources (after the live ones, oldest removal first), each
                with removal_id, removed_at, actor, reason and cause (`xfid sources --all`).
        """
        store = self.backend()
        if not removed:
            return store.sources()
        from xfid.removal import removals

        return [*store.sources(), *removals(store.conn)]

    def remove_source(self, source: str, reason: str | None = None, *, actor: str | None = None) -> list[Removed]:
        """Take a source back out (`xfid sources remove`): its records leave every later read at
        once; the removal (who, when, why) is kept and the file can be ingested again.

        Args:
            source: a source id, a unique prefix of one (6+ characters), or the path it was ingested from.
            reason: why (kept with the removal).
            actor: who removes it (default env XFID_ACTOR, else the login name).

        Returns:
            The removals: the source named first, then the sources derived from it that went with it.

        Raises:
            StoreError: an unknown source (close matches named), one removed already, an ambiguous
                path or prefix, a read-only store; nothing is changed then.
        """
        from xfid.removal import remove_source

        return remove_source(self.backend(), source, actor=who_acts(actor), reason=reason)

    def summary(self) -> dict[str, Any]:
        """Counts: records and sources, records per (fidelity, target), records per metric (most first)."""
        from collections import Counter

        import pyarrow.compute as pc

        store = self.backend()
        t = store.read(columns=["fidelity", "target", "metric"])
        by: Counter[tuple[str, str]] = Counter()
        for r in t.group_by(["fidelity", "target"]).aggregate([([], "count_all")]).to_pylist():
            by[(r["fidelity"], r["target"])] = r["count_all"]
        metrics = sorted(pc.value_counts(t.column("metric")).to_pylist(), key=lambda r: -r["counts"]) if t.num_rows else []
        from xfid import counts

        return {"store": str(store.root), "records": t.num_rows, "sources": counts.sources(store),
                "by_fidelity_target": dict(sorted(by.items())),
                "metrics": [(r["values"], r["counts"]) for r in metrics]}

    # --- correlation ------------------------------------------------------------------
    def correlate(self, targets: str | Sequence[str] | None = None, pairs: str | Sequence[Any] | None = None,
                  run: Runs = None, as_of: Any = None, *, include_missing: bool = False, fingerprints: str = "all",
                  engine: str | EngineChoice | None = None, request: Request | None = None, out: str | os.PathLike[str] | None = None) -> CorrelationResult:
        """Align the fidelities and compute errors, aggregates and discrepancies.

        Args:
            targets: only these targets (one name, or a list).
            pairs: `"cand->ref"` (or `"cand:ref"`) pairs (default `[[compare]]` in xfid.toml, else the built-in pairs).
            run: prefer this run over the latest: `"R"`, `["archmodel=R"]` or `{"archmodel": "R"}`.
            as_of: ignore records newer than this date (the whole day) or ISO date-time.
            include_missing: list keys without a reference among the discrepancies.
            fingerprints: "all" rows, or only "discrepancies" (faster on huge stores).
            engine: "local" or "spark" (default `[engine] name`, else local), or an
                `xfid.engine.engines.EngineChoice` with the engine's options (Spark's master);
                Spark's `.rows` are the discrepancies (and the rows a request's `track` or
                `keep` asks for: what `check` and `calibrate` pass; see Request).
            request: the whole request (xfid.engine.request.Request) instead of the arguments above.
            out: write the discrepancies as a Parquet dataset into this folder (a name ending in
                .parquet; xfid.engine.dataset): Spark's executors write them, nothing of them comes
                back to the driver. Written atomically (a temp folder renamed into place); an
                existing folder is replaced only when xfid wrote it. `settings["output"]` names
                the folder and its row count; Spark's `.discrepancies` is then empty.

        Returns:
            The result: `.rows`, `.comparisons`, `.discrepancies`, `.coverage` DataFrames, `.to_json()`.

        Raises:
            EngineError, ConfigError: a malformed pair, run or date, an unknown target; XfidError:
                an `out` that is not a .parquet name, lies in a store, or is something xfid did not write.
        """
        from xfid.correlation import CorrelationResult
        from xfid.engine.engines import correlate_with

        req = request if request is not None else self.request(targets, run, as_of, pairs=pairs,
                                                               include_missing=include_missing,
                                                               fingerprints=fingerprints)
        target = out if out is not None else req.out
        if target is None:
            return CorrelationResult.of(correlate_with(self.backend(), self.config, engine, request=req))
        from xfid.engine import dataset
        from xfid.outfile import output_folder

        if not dataset.is_dataset_path(os.fspath(target)):
            raise XfidError(f"out: {os.fspath(target)!r} must be a folder name ending in .parquet (the discrepancies "
                            "are written there as a Parquet dataset)")
        with output_folder(target, ours=dataset.is_ours, what="a discrepancy dataset written by xfid",
                           flag="out") as tmp:
            corr = correlate_with(self.backend(), self.config, engine, request=req.but(out=str(tmp)))
            dataset.finish(tmp, corr, os.fspath(target))
        return CorrelationResult.of(corr)

    @staticmethod
    def request(targets: str | Sequence[str] | None = None, run: Runs = None, as_of: Any = None, *,
                pairs: str | Sequence[Any] | None = None, **flags: Any) -> Request:
        """The Request of this module's loose arguments (one string is one name; see `names`);
        `flags` are Request's other fields (include_missing, fingerprints, track, keep, ...)."""
        from xfid.engine.request import Request

        return Request.of(targets=names(targets, "targets"), runs=run, as_of=as_of,
                          pairs=names(pairs, "pairs", strings=False), **flags)

    def calibrate(self, candidate: str, reference: str, target: str, *, label: str | None = None, run: Runs = None,
                  as_of: Any = None, engine: str | EngineChoice | None = None,
                  request: Request | None = None) -> CalibrationResult:
        """Fit `candidate`'s efficiency factors against `reference` on one target (cross-validated).

        With engine "spark" the cluster aligns the pair and brings back only the rows the fit reads.
        `request` gives the runs and as-of time instead of `run` and `as_of`.

        Raises:
            EngineError: a malformed pair or label, nothing to fit.
        """
        from xfid.engine import calibrate
        from xfid.engine.pairs import parse_pair
        from xfid.errors import EngineError
        from xfid.schema import is_valid_fidelity

        parse_pair(f"{candidate}->{reference}", "{candidate}/{reference}", ("candidate", "reference"))
        if label is not None and (not is_valid_fidelity(label) or label == label.split("-", 1)[0]):
            raise EngineError("{label} {value!r} must be a derived label like roofline-cal", params=("label",),
                              value=label)
        from xfid.engine.engines import calibration_rows

        req = only_rows_back(request if request is not None else self.request(None, run, as_of), "calibrate")
        rows = calibration_rows(self.backend(), self.config, engine, req, candidate, reference, target)
        return calibrate(self.backend(), self.config, candidate, reference, target, run=req.runs,
                         as_of=req.as_of, label=label, rows=rows)

    def write_back(self, result: CalibrationResult) -> IngestReport:
        """Ingest a calibration's predictions as their own fidelity label (idempotent)."""
        from xfid.engine.calibration import write_back

        self.backend().require_writable("write back calibrated predictions")
        return write_back(self.backend(), result)

    # --- the tracker ------------------------------------------------------------------
    def check(self, targets: str | Sequence[str] | None = None, run: Runs = None, as_of: Any = None, *,
              actor: str | None = None, label: str | None = None, resolve_after: int | None = None,
              correlation: Correlation | None = None, engine: str | EngineChoice | None = None,
              request: Request | None = None, chunk_rows: int | None = None) -> CheckSummary:
        """Correlate (or take `correlation`) and update the tracker: file, reopen and resolve issues.

        Args:
            targets, run, as_of: as for `correlate()` (ignored when `correlation` is given).
            actor: who runs the check (default env XFID_ACTOR, else the login name).
            label: kept with the check (a commit, "nightly", ...).
            resolve_after: consecutive clean checks that resolve an issue (default `[tracker] resolve_after`, else 2).
            correlation: record this correlation instead of correlating now.
            engine: as for `correlate()`; Spark also brings back the rows of the open issues.
            request: the selection as one Request instead of targets, run and as_of.
            chunk_rows: rows the tracker handles at a time (default xfid.tracker.chunks.CHUNK_ROWS);
                the result is the same whatever the value.

        Returns:
            The check summary: ids new, reopened, resolved, still open, waived; counts.

        Raises:
            ConfigError, TrackerError: a bad resolve_after; the correlation's errors.
        """
        k = self.resolve_after(resolve_after)
        with contextlib.ExitStack() as scratch:
            return self._check(k, targets, run, as_of, actor, label, correlation, engine, request, chunk_rows,
                               scratch)

    def _check(self, k: int, targets: str | Sequence[str] | None, run: Runs, as_of: Any, actor: str | None,
               label: str | None, correlation: Correlation | None, engine: str | EngineChoice | None,
               request: Request | None, chunk_rows: int | None, scratch: contextlib.ExitStack) -> CheckSummary:
        """check()'s body; `scratch` holds the folder of the discrepancies an engine wrote until it returns."""
        from xfid.tracker import scratch as scratch_folders
        from xfid.tracker.checkfiles import checks_dir

        tracker = self.tracker
        source = None
        home = checks_dir(self.backend().checks_root)
        scratch_folders.sweep(home)  # what killed checks left
        if correlation is None:
            from xfid.engine.engines import correlate_with, get_engine, open_fingerprints

            eng = get_engine(self.config, engine)
            req = only_rows_back(request if request is not None else self.request(targets, run, as_of), "check")
            if not eng.all_rows:  # an engine that returns some rows brings back the open issues' too
                req = req.but(track=tuple(open_fingerprints(tracker)))
            # the keys of issues marked invalid leave the statistics until their state changes
            invalid = tracker.invalid_keys()
            if invalid:
                from xfid.engine.request import key_set

                req = req.but(exclude_keys=key_set(invalid))
            if eng.all_rows:
                correlation = self.correlate(request=req, engine=eng)
            else:  # its executors write the discrepancies, the tracker reads them back in chunks
                from xfid.correlation import CorrelationResult
                from xfid.tracker.chunks import dataset_source

                home.mkdir(parents=True, exist_ok=True)
                folder = scratch_folders.folder(home, scratch) / "rows.parquet"
                correlation = CorrelationResult.of(correlate_with(self.backend(), self.config, eng,
                                                                  request=req.but(out=str(folder), out_ordered=True)))
                source = dataset_source(folder, correlation.rows, correlation.settings.get("pairs") or [],
                                        include_missing=req.include_missing, size=chunk_rows)
        corr = correlation
        from xfid.tracker import noise, stack, stale

        quiet = stale.StaleSettings.from_config(self.config)  # a bad value refused before anything is written
        settings = noise.NoiseSettings.from_config(self.config.section("tracker"),
                                                   str(self.config.path or "bundled xfid.toml"))
        stack.factor_of(self.config)  # likewise
        rows = self._check_rows(corr, chunk_rows, settings, source)
        from xfid.storeconfig import record_of

        used = record_of(self.config)
        if corr.config_hash and corr.config_hash != used[0]:  # a correlation made under another config
            used = (corr.config_hash, None, None)  # known by its hash only
        who = who_acts(actor)
        changed: list[dict[str, Any]] = []
        # what the stale summary needs of the rows (a few values per key: the size of the rows'
        # dicts), gathered only when it can look at them (not on the first checks of a store)
        now_seen = stale.Seen({}, {}) if stale.may_look(tracker, quiet) else None

        def look(chunk: pd.DataFrame) -> None:  # what the summary lists of the rows, chunk by chunk
            changed.extend(stack.changed_items(chunk))
            if now_seen is not None:
                stale.add_seen(now_seen, chunk)

        summary = tracker.record_check(corr, actor=who, label=label, clean_checks_to_resolve=k, noise=settings,
                                       config=used, rows=rows, look=look)
        summary.stack_changed = stack.sort_changed(changed)
        summary.stale = stale.find(tracker, summary.check_id, quiet, current=now_seen)
        self._notify(summary, who, label)
        return summary

    def _check_rows(self, corr: Correlation, chunk_rows: int | None, settings: NoiseSettings,
                    source: Callable[[], Iterator[pd.DataFrame]] | None = None) -> RowChunks:
        """The check's rows in chunks of `chunk_rows` (xfid.tracker.chunks), annotated chunk by chunk
        as a check annotates them (noise intervals from the store's repeats with `settings`, then
        stack changes);
        a correlation without rows gives its discrepancies as they are. `source`: the chunks of
        rows (xfid.tracker.chunks.dataset_source), instead of `corr.rows`."""
        from xfid.tracker import noise, stack
        from xfid.tracker.chunks import RowChunks, check_size
        from xfid.tracker.recording import _frame

        config = self.config
        if source is not None:
            plain = RowChunks(source)
        elif corr.rows is None or ("noise" in corr.rows.columns and stack.STACK_CHANGED in corr.rows.columns):
            return RowChunks.of_frame(_frame(corr), chunk_rows)  # as it is (annotated: its discrepancies stay added)
        elif len(corr.rows) <= check_size(chunk_rows):  # one chunk: annotated whole, as a check always did
            if "noise" not in corr.rows.columns:
                noise.attach(corr, self._repeats(RowChunks.of_frame(corr.rows, chunk_rows), keyed=False), settings,
                             self._known_intervals())
            stack.annotate(corr, config)
            return RowChunks.of_frame(_frame(corr), chunk_rows)
        else:
            plain = RowChunks.of_frame(corr.rows, chunk_rows)  # annotating rebuilds the discrepancies from the rows
        columns = corr.rows.columns if corr.rows is not None else ()
        repeats = self._repeats(plain, keyed=source is not None) if "noise" not in columns else None
        known = self._known_intervals() if repeats is not None else None

        def annotate(chunk: pd.DataFrame) -> pd.DataFrame:
            if repeats is not None and len(chunk):
                chunk = noise.attach_rows(chunk, repeats, settings, known)[0]
            return stack.annotate_rows(chunk, config)[0]

        return RowChunks(plain.raw, annotate)

    def _known_intervals(self) -> Any:
        """The noise intervals the last check computed, by the hash of their inputs
        (noise.KnownIntervals), read from its rows file when a row with repeats first looks one
        up: a row whose repeats, error, key and settings are unchanged takes its interval from
        there instead of drawing its resamples again. Empty when no check was recorded, or its
        rows file holds no hashes (an older xfid's) or cannot be read (`xfid doctor` names that;
        this check then computes every interval)."""
        from xfid.tracker import db, noise

        tracker = self.tracker

        def last_checks_rows() -> Iterator[pd.DataFrame]:
            last = db.last_check_id(tracker.conn)
            if last is None:
                return
            try:
                yield from tracker.check_row_chunks(last, columns=(noise.NOISE_KEY, "rel_error_low", "rel_error_high"))
            except (TrackerError, OSError):
                return

        return noise.KnownIntervals(last_checks_rows)

    def _repeats(self, rows: RowChunks, keyed: bool) -> Any:
        """The noise repeats lookup of the rows (xfid.tracker.noise), read once for all chunks;
        `keyed`: of the records of the rows' keys only (the rows an engine wrote are the
        discrepancies, a small part of the store; the local engine's rows are every row, for which
        the keyed lookup measured slower and larger on the 1M benchmark store: 63 s / +258 MB
        against 37 s / +197 MB)."""
        from xfid.tracker import noise

        targets: set[str] = set()
        runs: set[str] = set()
        keys: set[str] = set()
        for chunk in rows.raw():
            t, r = noise.repeats_needed(chunk)
            targets |= t
            runs |= r
            if keyed:
                keys |= noise.repeats_keys(chunk)
        return noise.repeats_of(self.backend(), self.config, targets, runs, keys if keyed else None)

    def _notify(self, summary: CheckSummary, actor: str, label: str | None) -> None:
        """The [[notify.webhook]]s after a check that filed or reopened issues; failures are warnings."""
        from xfid import notify

        hooks = notify.webhooks(self.config.section("notify"), str(self.config.path or "bundled xfid.toml"))
        if hooks:
            notify.send(hooks, summary, store=str(self.path), actor=actor, label=label,
                        warn=lambda m: print(m, file=sys.stderr))

    def resolve_after(self, override: int | None = None) -> int:
        """K for auto-resolve: `override`, else `[tracker] resolve_after`, else 2 (noise.RESOLVE_AFTER).

        Raises:
            TrackerError, ConfigError: a value that is not an integer >= 1.
        """
        if override is not None:
            if isinstance(override, bool) or not isinstance(override, int) or override < 1:
                raise TrackerError("{resolve_after} must be an integer >= 1, got {value}", params=("resolve_after",),
                                   value=override)
            return override
        from xfid.tracker.noise import RESOLVE_AFTER

        k = self.config.section("tracker").get("resolve_after", RESOLVE_AFTER)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            where = str(self.config.path or "bundled xfid.toml")
            raise ConfigError(f"{where}: [tracker] resolve_after must be an integer >= 1, got {k!r}")
        return k

    def issues(self, state: str | None = None, *, target: str | Sequence[str] | None = None,
               kind: str | None = None, severity_min: float | None = None) -> pd.DataFrame:
        """Tracked issues as a DataFrame ordered by id: id (XF-N), fingerprint, state, kind, severity,
        the key, both values, rel_error, owner, first/last seen, and the waiver and check columns.

        `state`: one state (open, acknowledged, resolved, reopened, waived, invalid, duplicate,
        downstream), or "active" for the
        group open + acknowledged + reopened (xfid.counts)."""
        import pandas as pd

        from xfid.tracker.tracker import EXTRA_KEYS, ISSUE_KEYS

        rows = self.issue_list(state, target=target, kind=kind, severity_min=severity_min)
        return pd.DataFrame(rows, columns=[*ISSUE_KEYS, *EXTRA_KEYS, "triage_by", "overdue"])

    def issue_list(self, state: str | None = None, *, target: str | Sequence[str] | None = None,
                   kind: str | None = None, severity_min: float | None = None) -> list[dict[str, Any]]:
        """The same issues as plain dicts (what `xfid issues list --format json` prints)."""
        wanted = names(target, "target") or []
        rows = self.tracker.issues(state=state, kind=kind, severity_min=severity_min,
                                   target=wanted[0] if len(wanted) == 1 else None)
        return [self._due(r) for r in rows if len(wanted) < 2 or r["target"] in wanted]

    def _due(self, issue: dict[str, Any]) -> dict[str, Any]:
        """`triage_by` and `overdue` from `[tracker] triage_days` (xfid.tracker.due)."""
        from datetime import UTC, datetime

        from xfid.tracker.due import TRIAGE_DAYS, annotate

        return annotate(issue, self.config.section("tracker").get("triage_days", TRIAGE_DAYS), datetime.now(UTC).date())

    def issue(self, issue_id: str) -> dict[str, Any]:
        """One issue with its history, every observation (both numbers' provenance) and `moves`:
        where its error jumped between checks, which side moved (see `history`)."""
        from xfid.tracker.stack import issue_entries

        d = self._due(self.tracker.issue(issue_id))
        h = self.history(d["id"])
        d["moves"] = h.moves
        d["stack_changed"] = issue_entries(h.series)
        try:
            summ = self.tracker.summary_of(d["id"], settings=self._summary_settings())
        except TrackerError:  # its check's saved rows are unreadable: the issue is still shown
            summ = None
        d["summary"] = None if summ is None else {"id": summ["id"], "cause": summ["cause"]["text"],
                                                  "issues": summ["n_issues"]}
        return d

    def act(self, issue_id: str, action: str, *, actor: str | None = None, **details: Any) -> dict[str, Any]:
        """A manual action on an issue: ack (owner=), resolve, reopen, waive (reason=, until=, max_error=), note,
        invalid (reason=), duplicate (of="XF-M"), downstream (of="XF-M").

        Raises:
            TrackerError: an unknown id, an action not allowed from the issue's state (the allowed
                ones listed), a missing owner/reason/expiry. Nothing changes then.
        """
        return self.tracker.transition(issue_id, action, actor=who_acts(actor), **details)

    def _summary_settings(self) -> Any:
        from xfid.tracker.summaries import SummarySettings

        return SummarySettings.from_config(self.config.section("tracker"), str(self.config.path or "bundled xfid.toml"))

    def summaries(self, check: int | None = None) -> list[dict[str, Any]]:
        """What one check (default: the latest) filed, grouped by probable common cause (docs/tracker.md):
        [{"id": "S-3-1", "check_id": 3, "cause": {"kind": run|source|workload|op_class|config|single,
        "text": "reference run rtl-r8 (rtl), from ...", ...}, "issues": ["XF-1", ...], "n_issues",
        "rows_with_cause", "share"}], largest first; [] when the check filed nothing.

        Raises:
            TrackerError: an unknown check. ConfigError: bad [tracker] summary_* settings.
        """
        return self.tracker.summaries(check, self._summary_settings())

    def issue_summary(self, summary_id: str) -> dict[str, Any]:
        """One issue summary (S-<check>-<n>), as in `summaries()`.

        Raises:
            TrackerError: a malformed or unknown summary id.
        """
        return self.tracker.summary(summary_id, settings=self._summary_settings())

    def act_summary(self, summary_id: str, action: str, *, actor: str | None = None,
                    **details: Any) -> dict[str, Any]:
        """The manual action `act()` takes, on every issue of a summary at once (one transaction):
        {"summary", "action", "changed": [issue dicts], "skipped": [{"id", "state", "why"}]}.

        Raises:
            TrackerError: as for `act()`, or no issue of the summary takes the action. Nothing changes then.
        """
        return self.tracker.summary_transition(summary_id, action, actor=who_acts(actor),
                                               settings=self._summary_settings(), **details)

    def history(self, key: str, alpha: float | None = None) -> KeyHistory:
        """One key's (XF-N or fingerprint) error at every recorded check, with change points
        (E-divisive means; `alpha` the significance, default `xfid.drift.changepoint.ALPHA`)."""
        from xfid.drift.history import MIN_CHANGE, key_history, moves, series_change_points

        series = key_history(self.backend(), key)
        step = self.config.section("drift").get("error_abs", MIN_CHANGE)
        return KeyHistory(key, series, series_change_points([p["rel_error"] for p in series], alpha),
                          moves(series, step))

    def pair_history(self, alpha: float | None = None) -> list[dict[str, Any]]:
        """Each comparison's MAPE (estimate pairs) at every recorded check, with change points:
        [{target, candidate, reference, metric, stat, series: [{check_id, time, mape, n}], change_points}]."""
        from xfid.drift.history import pair_history

        return pair_history(self.backend(), alpha)

    # --- baselines and reports --------------------------------------------------------
    def snapshot(self, output: PathLike | None = None, targets: str | Sequence[str] | None = None, run: Runs = None,
                 as_of: Any = None, label: str | None = None, engine: str | EngineChoice | None = None, *,
                 request: Request | None = None) -> dict[str, Any]:
        """The current correlation as a baseline snapshot (written to `output` when given).

        With engine "spark" the snapshot holds the aggregates and the discrepancies' keys.
        `request` gives the selection instead of targets, run and as_of."""
        from xfid.drift.snapshot import make_snapshot, write_snapshot
        from xfid.outfile import guard

        if output is not None:
            guard(output)  # before the work: a path into the store is refused first
        req = only_rows_back(request if request is not None else self.request(targets, run, as_of), "snapshot")
        snap = make_snapshot(self.correlate(request=req, engine=engine), label=label)
        if output is not None:
            write_snapshot(snap, output)
        return snap

    def record_snapshot(self, label: str, snap: dict[str, Any] | None = None, *, actor: str | None = None,
                        **select: Any) -> dict[str, Any]:
        """Keep a snapshot in the store under `label` (a branch such as `main`), for
        `compare(against=label)`: `snap`, or the current correlation (`select`: targets, run,
        as_of, engine as for `snapshot()`). Returns id, label, time, actor and the counts.

        Raises:
            XfidError: a label that is not a plain name (letters, digits, . _ / @ + -).
        """
        from xfid.serve import labels

        labels.check_label(label)
        if snap is None:
            snap = self.snapshot(None, label=label, **select)
        backend = self.backend(create=True)
        backend.require_writable(f"record a snapshot under {label!r}")
        out = labels.record(backend.conn, label, snap, who_acts(actor))
        out["keys"] = len(snap["keys"])
        out["discrepancies"] = sum(1 for k in snap["keys"].values() if k["kind"] not in ("ok", "missing_reference"))
        out["comparisons"] = len(snap["comparisons"])
        return out

    def labelled_snapshot(self, label: str) -> dict[str, Any]:
        """The newest snapshot recorded under `label`.

        Raises:
            XfidError: none is (the labels that have one are listed).
        """
        from xfid.serve import labels

        return labels.latest(self.backend().conn, label)

    def link(self, issue_id: str, url: str, *, actor: str | None = None) -> dict[str, Any]:
        """Link an issue to the team's bug tracker (an http(s) URL; stored and shown, never fetched).

        Raises:
            TrackerError: an unknown issue, or a URL that is not absolute http(s).
        """
        from xfid.serve import links

        iid = self.tracker.issue(issue_id)["id"]  # an unknown id is the tracker's clean error
        backend = self.backend()
        backend.require_writable(f"link {iid}")
        return links.add(backend.conn, iid, url, who_acts(actor))

    def links(self, issue_id: str) -> list[dict[str, Any]]:
        """The links of an issue, oldest first: url, actor, time."""
        from xfid.serve import links

        iid = self.tracker.issue(issue_id)["id"]
        conn = self.backend().conn
        if "issue_links" not in conn.tables():  # none linked yet: read without creating tables
            return []
        return links.listing(conn, iid)

    def report(self, period: Period | str | None = None, path: PathLike | None = None, html: bool = False, *,
               targets: str | Sequence[str] | None = None, max_points: int = REPORT_MAX_POINTS) -> ReportResult:
        """Render the discrepancy report of a period as PDF (or one self-contained HTML file).

        Args:
            period: a Period, "YYYY-Www", "YYYY-MM-DD..YYYY-MM-DD", "YYYY-MM-DD" (one day), or None
                for the last complete ISO week.
            path: the file to write (default reports/xfid-<period>.pdf or .html).
            html: write the HTML page to work in instead of the PDF: every table and key, sortable
                and filterable, with each row's provenance (xfid.report.web).
            targets: only these targets.
            max_points: most points drawn per plot (a seeded sample; tables stay complete).

        Raises:
            ReportError: an empty store, a bad period, a file that cannot be written.
        """
        from xfid.errors import ReportError
        from xfid.outfile import guard
        from xfid.report.assemble import build_report_data
        from xfid.report.attach import numbers_csv, numbers_path
        from xfid.report.render import render_html, render_pdf, write_atomic

        if path is not None:
            guard(path, error=ReportError)  # before the work: a path into the store is refused first
            if not Path(path).exists() or Path(path).resolve().is_file():
                guard(numbers_path(Path(path)), error=ReportError)
        p = _period(period)
        data = build_report_data(self.backend(), self.config, p, names(targets, "targets") or [],
                                 max_points=max_points)
        out = Path(path) if path is not None else default_output(p.label, html)
        if path is None:
            out.parent.mkdir(exist_ok=True)  # the default reports/ folder; a folder named by path must exist
        assert data.bound_tolerance is not None  # build_report_data sets it from the check's settings
        # the attachment beside it (never into the store either); none beside a device or pipe
        numbers = numbers_path(out) if not out.exists() or out.resolve().is_file() else None
        if numbers is not None:
            guard(numbers, error=ReportError)
        pages = None
        if html:  # the page to work in: every table, sortable and filterable (xfid.report.web)
            from xfid.report.web import render_web

            payload = render_web(data, bound_tol=data.bound_tolerance).encode("utf-8")
        else:
            text = render_html(data, bound_tol=data.bound_tolerance,
                               numbers_file=numbers.name if numbers else "(not written: the report went to a device)")
            payload, pages = render_pdf(text)
        if numbers is not None:
            write_atomic(numbers, numbers_csv(data))  # first: a report on disk always has its numbers beside it
        write_atomic(out, payload)
        in_open = sum(1 for i in data.open_issues if i.get("state") == "open")
        return ReportResult(out, html, pages, len(data.open_issues), len(data.pairs), in_open, numbers)

    def profile(self, targets: str | Sequence[str]) -> Profile:
        """The capability profile of one target or several side by side (`xfid profile`).

        Returns:
            A `Profile`: `.targets` (one dict per target: classes, transfer, interference,
            conditions), `.to_dict()`, `.to_json()`.

        Raises:
            ConfigError: an unknown target; StoreError: no store.
        """
        from xfid.profile import profile

        return profile(self.backend(), self.config, names(targets, "targets") or [])

    def doctor(self, repair: bool = False) -> DoctorReport:
        """Check the store (database, every part's checksum and rows, orphans); `repair` fixes what it can."""
        from xfid.doctor import examine

        self.close()  # the doctor opens the store itself
        return examine(self.path, repair=repair, **self.locations())

    def rebuild_catalog(self) -> RebuildReport:
        """Rebuild the catalog from the parts' footers (`xfid doctor --rebuild-catalog`); the old
        database is moved into a backup folder. Run it with no other xfid using the store.

        Raises:
            StoreError: no parts, parts of several stores mixed, or the store cannot be written.
        """
        from xfid.rebuild import rebuild_catalog

        self.close()
        where = self.locations()
        return rebuild_catalog(self.path, where["database"], where["records"])

    def reference_spread(self, reference: str, target: str) -> dict[str, Any] | None:
        """The reference fidelity's run-to-run spread on `target` (said next to a calibration's error;
        None when every key was measured once)."""
        from xfid.profile.spread import reference_spread

        return reference_spread(self.backend(), reference, target)

    def roofline(self, target: str, *, workload: str | None = None, model_config: PathLike | None = None,
                 gemms: str | Sequence[str] | None = None, gemm_file: PathLike | None = None, precision: str = "fp16",
                 placement: str | None = None, block: str | None = None, params: Mapping[str, str] | None = None,
                 shapes: str | Sequence[str] | None = None, output: PathLike | None = None, ingest: bool = False,
                 run: str | None = None) -> Bounds:
        """Roofline/limiter bounds (`xfid roofline`): of a T100 RTL `block` (its `shapes` and
        `params`), of GEMM shapes (`gemms` "M,N,K", `gemm_file`), or of an LLM `workload`; written
        to `output` (xfid-records) and ingested (`ingest`, run label `run`) when asked.

        Raises:
            XfidError: no mode or several, a placement with a block, a bad shape, workload or file.
        """
        from xfid.models import blocks, llm, roofline
        from xfid.models.memory import parse_placement
        from xfid.models.output import write_records

        gemms, shapes = names(gemms, "gemms") or [], names(shapes, "shapes") or []
        if block and (gemms or gemm_file):
            raise XfidError("use one mode: {workload} (LLM), {gemms}/{gemm_file}, or {block}",
                            params=("workload", "gemms", "gemm_file", "block"))
        if not (block or gemms or gemm_file or workload):
            raise XfidError("give {workload}, {gemms}, {gemm_file} or {block}",
                            params=("workload", "gemms", "gemm_file", "block"))
        tgt = self.config.target(target)
        places = parse_placement(placement)
        if places and block:
            raise XfidError("{placement} is for a workload (and act=LEVEL for GEMMs), not a block",
                            params=("placement",))
        if block:
            records = blocks.block_bounds(block, tgt, dict(params or {}), list(shapes))
        elif gemms or gemm_file:
            sh = [roofline.parse_triple(g) for g in gemms]
            if gemm_file:
                sh += roofline.read_gemm_file(gemm_file)
            records = roofline.gemm_bounds(sh, tgt, precision, workload or roofline.DEFAULT_GEMM_WORKLOAD,
                                           places).records()
        else:
            assert workload is not None
            w = llm.parse_workload(workload)
            records = roofline.workload_bounds(llm.resolve_model(w.model, model_config), w, tgt, places).records()
        if output:
            write_records(records, output)
        out = Bounds(tgt.name, records)
        if ingest:
            out.ingested = self.ingest_bounds(records, target, output, run)
        return out

    def ingest_bounds(self, records: list[dict[str, Any]], target: str, output: PathLike | None = None,
                      run: str | None = None) -> IngestReport:
        """Ingest bound records (idempotent): from `output` when they were written there, else
        from the store's own `generated/roofline-TARGET-WORKLOAD.csv`."""
        import re

        from xfid.models.output import ingest_records

        def slug(text: str) -> str:
            return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120]

        name = f"roofline-{slug(target)}-{slug(records[0]['workload'])}.csv"
        return ingest_records(self.backend(create=True), records, output, run, name)

    def run_rtl(self, block: str | PathLike, params: Mapping[str, str] | None = None, *, ingest: bool = False,
                run: str | None = None, **options: Any) -> RtlRun:
        """`run_rtl()`, then with `ingest` its probe records and results.xml into this store
        (adapter cocotb, run label `run`, default rtl-BLOCK-<UTC time>)."""
        res = run_rtl(block, params, **options)
        if ingest:
            import time

            r = res.result
            label = run or f"rtl-{r.block}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            paths = [p for p in (r.out, r.results_xml) if p.is_file()]
            opts = {} if r.out.parent == r.results_xml.parent else {"results": str(r.results_xml)}
            res.ingested_rows = self.ingest(paths, adapter="cocotb", target=options.get("target"), run=label,
                                            options=opts).rows
        return res

    def copy_to(self, database: str, records: str | None = None) -> Any:
        """Copy this store (manifest, sources, parts, check rows, tracker) into the team store at
        `database` (postgresql://...), its parts to `records` (default: where they are); see
        xfid.storecopy.copy_store. Returns its CopyReport."""
        from xfid.storecopy import copy_store

        return copy_store(self.backend(create=False), database, records)


def run_rtl(block: str | PathLike, params: Mapping[str, str] | None = None, *, sim: str | None = None,
            out: PathLike | None = None, build_root: PathLike | None = None, seed: int | None = None,
            target: str | None = None) -> RtlRun:
    """Build (cached) and run a T100 RTL block's cocotb testbench (`xfid rtl run`): the run and its
    probe records, each marked `test_failed` when its cocotb test failed."""
    import json

    from rtl_hooks.runner import run_block
    from xfid.adapters.cocotb import read_results

    res = run_block(block, dict(params or {}), sim=sim, out=out, build_root=build_root, seed=seed, target=target)
    records = ([json.loads(line) for line in res.out.read_text().splitlines() if line.strip()]
               if res.out.is_file() else [])
    failed = {c.name for c in read_results(res.results_xml) if c.status in ("failed", "error")}
    for r in records:
        r["test_failed"] = r.get("test") in failed
    return RtlRun(res, records)


def rtl_inspect(file: PathLike, top: str | None = None) -> Any:
    """A Verilog module's parameters and ports (`xfid rtl inspect`): rtl_hooks.inspect's module."""
    from rtl_hooks.inspect import get_module

    return get_module(file, top)


def who_acts(explicit: str | None = None) -> str:
    """Who is acting: `explicit` (--actor), then env XFID_ACTOR, then the login name."""
    if explicit:
        return explicit
    if os.environ.get("XFID_ACTOR"):
        return os.environ["XFID_ACTOR"]
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def default_output(label: str, html: bool) -> Path:
    """reports/xfid-<period>.pdf|html (a range label `a..b` becomes `a_b`)."""
    return Path("reports") / f"xfid-{label.replace('..', '_')}.{'html' if html else 'pdf'}"


PERIOD_PARTS = {"week": "the week", "since": "the first day", "until": "the last day"}


def _period(period: Period | str | None) -> Period:
    """A Period from what `report()` takes; a bad string is an error about `period` (not a flag)."""
    from xfid.errors import ReportError
    from xfid.report.period import Period, resolve_period

    if isinstance(period, Period):
        return period
    if period is None:
        return resolve_period(None, None, None)
    text = str(period).strip()
    try:
        if "-W" in text.upper():
            return resolve_period(text, None, None)
        since, sep, until = text.partition("..")
        return resolve_period(None, since, until if sep else since)
    except ReportError as e:
        why = e.render(lambda p: PERIOD_PARTS.get(p, p))
        raise ReportError('{period} {text!r}: {why} (a period is "YYYY-Www", "YYYY-MM-DD..YYYY-MM-DD" or '
                          '"YYYY-MM-DD")', params=("period",), text=text, why=why) from None


def _warn_unmatched(store: Store, config: Config, filters: Mapping[str, Sequence[str]], got: Any) -> None:
    """An XfidWarning for each filter value that no record of the store has, with the close names
    (of the store's values of that column; for targets, the configured ones too)."""
    import warnings

    import pyarrow as pa
    import pyarrow.compute as pc

    for col, vals in filters.items():
        if isinstance(got, pa.Table) and col in got.column_names and got.num_rows:
            found = set(pc.unique(got.column(col)).to_pylist())
            if all(v in found for v in vals):
                continue
        have = [v for v in pc.unique(store.read(columns=[col]).column(col)).to_pylist() if v is not None]
        for v in vals:
            if v in have:
                continue
            pool = sorted({str(h) for h in have} | (set(config.targets) if col == "target" else set()))
            close = [c for c in difflib.get_close_matches(str(v), pool, n=3, cutoff=0.6) if c != v]
            close += [c for c in pool if str(v) and c.startswith(str(v)) and c not in close][:3 - len(close)]
            hint = (f"did you mean {' or '.join(repr(c) for c in close)}?" if close
                    else f"the store's values: {', '.join(map(repr, sorted(map(str, have))[:10]))}" if have
                    else "the store holds no records")
            warnings.warn(f"no record has {col} {v!r}; {hint}", XfidWarning, stacklevel=3)


def _filters(filters: Mapping[str, str | Sequence[str]]) -> dict[str, Sequence[str]]:
    from xfid.schema import SCHEMA

    out: dict[str, Sequence[str]] = {}
    for k, v in filters.items():
        if k not in SCHEMA.names:
            raise XfidError(f"records(): unknown column {k!r}; columns: {', '.join(SCHEMA.names)}")
        vals = names(v, k)
        if vals:
            out[k] = vals
    return out
