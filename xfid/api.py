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

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfid.errors import ConfigError, TrackerError, XfidError

if TYPE_CHECKING:
    import pandas as pd

    from xfid.config import Config
    from xfid.correlation import CorrelationResult
    from xfid.doctor import DoctorReport
    from xfid.drift.drift import DriftReport
    from xfid.engine import CalibrationResult, Correlation
    from xfid.ingest import IngestReport
    from xfid.profile import Profile
    from xfid.rebuild import RebuildReport
    from xfid.report.period import Period
    from xfid.store import Store
    from xfid.tracker import CheckSummary, Tracker

PathLike = str | os.PathLike[str]
Runs = str | Sequence[str] | Mapping[str, str] | None
DEFAULT_FAIL_ON = "new,regression,bound,drift"
REPORT_MAX_POINTS = 5000


def open_store(path: PathLike | None = None, config: PathLike | Config | None = None) -> XfidStore:
    """Open a store (created on the first ingest) with its configuration.

    Args:
        path: the store directory; default env XFID_STORE, then `[store].path` of the config, then `.xfid`.
        config: an xfid.toml path or a loaded Config; default env XFID_CONFIG, then ./xfid.toml,
            else the bundled targets. Its `[store] database` (a PostgreSQL URL) and `[store] records`
            (a directory or bucket URL) say where a team store keeps its catalog and its parts; env
            XFID_DATABASE_URL and XFID_RECORDS_URL override them (docs/team.md).
    """
    return XfidStore(path, config)


def adapters() -> list[dict[str, Any]]:
    """The registered adapters: name, fidelity (None: from the file), formats."""
    from xfid.adapters import all_adapters

    return [{"name": n, "fidelity": c.fidelity, "formats": c.formats} for n, c in all_adapters().items()]


def compare(baseline: PathLike | dict[str, Any], current: PathLike | dict[str, Any] | Correlation | XfidStore, *,
            config: Config | None = None, fail_on: str | Sequence[str] = DEFAULT_FAIL_ON,
            targets: Sequence[str] | None = None, run: Runs = None, as_of: Any = None) -> DriftReport:
    """Compare `current` with a baseline snapshot: the drift result (its `exit_code` is the CI verdict).

    Args:
        baseline: a snapshot file from `snapshot()` / `xfid snapshot`, or a loaded snapshot.
        current: a snapshot (file or loaded), a Correlation, or a store (correlated now, with
            `run` and `as_of` as for `XfidStore.correlate`).
        config: whose `[drift]` thresholds apply (default: the store's, else the effective xfid.toml).
        fail_on: categories that fail: new, regression, bound, drift, or any.
        targets: only these targets, on both sides.

    Raises:
        XfidError: an unreadable snapshot, unknown thresholds or categories.
    """
    from xfid.drift.drift import Thresholds, compare_snapshots, parse_fail_on
    from xfid.drift.snapshot import make_snapshot, read_snapshot
    from xfid.engine import Correlation

    fails = parse_fail_on(fail_on if isinstance(fail_on, str) else ",".join(fail_on))
    base = baseline if isinstance(baseline, dict) else read_snapshot(baseline)
    if config is None:
        if isinstance(current, XfidStore):
            config = current.config
        else:
            from xfid.config import load_config

            config = load_config(None)
    th = Thresholds.from_config(config.section("drift"))
    if isinstance(current, XfidStore):
        cur = make_snapshot(current.correlate(targets=targets, run=run, as_of=as_of))
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
    open_issues: int
    pairs: int


@dataclass
class KeyHistory:
    """One key's error at every recorded check, and the change points in that series."""

    key: str
    series: list[dict[str, Any]]
    change_points: list[Any]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "series": self.series, "change_points": [c.to_dict() for c in self.change_points]}


class XfidStore:
    """A store and its configuration; every method is one operation of the `xfid` command line."""

    def __init__(self, path: PathLike | None = None, config: PathLike | Config | None = None):
        self._path_arg = path
        self._config_arg = config
        self._backend: Store | None = None
        self._tracker: Tracker | None = None

    # --- what it is -------------------------------------------------------------------
    @cached_property
    def config(self) -> Config:
        """The effective configuration (targets, tolerances, op maps, pairs, settings)."""
        from xfid.config import Config, load_config

        if isinstance(self._config_arg, Config):
            return self._config_arg
        return load_config(self._config_arg)

    @cached_property
    def path(self) -> Path:
        """The store directory: the argument, env XFID_STORE, `[store].path`, else `.xfid`."""
        from xfid.store import resolve_store_path

        return resolve_store_path(self._path_arg, self.config.store)

    def locations(self) -> dict[str, str | None]:
        """Where the catalog and the records are: env XFID_DATABASE_URL / XFID_RECORDS_URL, else
        `[store] database` / `[store] records` (None: the store's own SQLite file and records/)."""
        cfg = self.config
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
        return self._backend

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

    def records(self, columns: Sequence[str] | None = None, **filters: str | Sequence[str]) -> pd.DataFrame:
        """Records in the normalized schema, e.g. `records(target="h100-sxm", metric=["latency", "ttft"])`."""
        return self.backend().read(_filters(filters), columns).to_pandas()

    def export(self, fmt: str, output: PathLike | None = None, **filters: str | Sequence[str]) -> int:
        """Write the filtered records as jsonl, csv or parquet to `output` (default stdout); returns the rows."""
        from xfid.export import export_records

        return export_records(self.backend(), fmt, None if output is None else str(output), _filters(filters))

    def sources(self) -> list[dict[str, Any]]:
        """The ingested sources (the manifest): path, adapter, rows, hash, time, options, summary."""
        return self.backend().sources()

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
        return {"store": str(store.root), "records": t.num_rows, "sources": len(store.sources()),
                "by_fidelity_target": dict(sorted(by.items())),
                "metrics": [(r["values"], r["counts"]) for r in metrics]}

    # --- correlation ------------------------------------------------------------------
    def correlate(self, targets: Sequence[str] | None = None, pairs: Sequence[str] | None = None, run: Runs = None,
                  as_of: Any = None, *, include_missing: bool = False, fingerprints: str = "all",
                  engine: str | None = None, track: Sequence[str] | None = None) -> CorrelationResult:
        """Align the fidelities and compute errors, aggregates and discrepancies.

        Args:
            targets: only these targets.
            pairs: `"cand->ref"` pairs (default `[[compare]]` in xfid.toml, else the built-in pairs).
            run: prefer this run over the latest: `"R"`, `["archmodel=R"]` or `{"archmodel": "R"}`.
            as_of: ignore records newer than this date (the whole day) or ISO date-time.
            include_missing: list keys without a reference among the discrepancies.
            fingerprints: "all" rows, or only "discrepancies" (faster on huge stores).
            engine: "local" or "spark" (default `[engine] name`, else local); Spark's rows are the
                discrepancies and the rows of the fingerprints in `track`.

        Returns:
            The result: `.rows`, `.comparisons`, `.discrepancies`, `.coverage` DataFrames, `.to_json()`.

        Raises:
            EngineError, ConfigError: a malformed pair, run or date, an unknown target.
        """
        from xfid.engine.engines import correlate_with

        corr = correlate_with(self.backend(), self.config, engine, track=track, run=_runs(run), as_of=as_of,
                              targets=list(targets or []) or None, pairs=list(pairs or []) or None,
                              include_missing=include_missing, fingerprints=fingerprints)
        from xfid.correlation import CorrelationResult

        return CorrelationResult.of(corr)

    def calibrate(self, candidate: str, reference: str, target: str, *, label: str | None = None, run: Runs = None,
                  as_of: Any = None, engine: str | None = None) -> CalibrationResult:
        """Fit `candidate`'s efficiency factors against `reference` on one target (cross-validated).

        With engine "spark" the cluster aligns the pair and brings back only the rows the fit reads.

        Raises:
            EngineError: a malformed pair or label, nothing to fit.
        """
        from xfid.engine import calibrate
        from xfid.engine.pairs import parse_pair
        from xfid.errors import EngineError
        from xfid.schema import is_valid_fidelity

        parse_pair(f"{candidate}->{reference}", "--candidate/--reference")
        if label is not None and (not is_valid_fidelity(label) or label == label.split("-", 1)[0]):
            raise EngineError(f"--label {label!r} must be a derived label like roofline-cal")
        from xfid.engine.engines import calibration_rows

        rows = calibration_rows(self.backend(), self.config, engine, candidate, reference, target, _runs(run), as_of)
        return calibrate(self.backend(), self.config, candidate, reference, target, run=_runs(run),
                         as_of=as_of, label=label, rows=rows)

    def write_back(self, result: CalibrationResult) -> IngestReport:
        """Ingest a calibration's predictions as their own fidelity label (idempotent)."""
        from xfid.engine.calibration import write_back

        self.backend().require_writable("write back calibrated predictions")
        return write_back(self.backend(), result)

    # --- the tracker ------------------------------------------------------------------
    def check(self, targets: Sequence[str] | None = None, run: Runs = None, as_of: Any = None, *,
              actor: str | None = None, label: str | None = None, resolve_after: int | None = None,
              correlation: Correlation | None = None, engine: str | None = None) -> CheckSummary:
        """Correlate (or take `correlation`) and update the tracker: file, reopen and resolve issues.

        Args:
            targets, run, as_of: as for `correlate()` (ignored when `correlation` is given).
            actor: who runs the check (default env XFID_ACTOR, else the login name).
            label: kept with the check (a commit, "nightly", ...).
            resolve_after: consecutive clean checks that resolve an issue (default `[tracker] resolve_after`, else 2).
            correlation: record this correlation instead of correlating now.
            engine: as for `correlate()`; Spark also brings back the rows of the open issues.

        Returns:
            The check summary: ids new, reopened, resolved, still open, waived; counts.

        Raises:
            ConfigError, TrackerError: a bad resolve_after; the correlation's errors.
        """
        k = self.resolve_after(resolve_after)
        tracker = self.tracker
        if correlation is None:
            from xfid.engine.engines import engine_name, open_fingerprints

            spark = engine_name(self.config, engine) == "spark"
            correlation = self.correlate(targets, None, run, as_of, engine=engine,
                                         track=open_fingerprints(tracker) if spark else None)
        corr = correlation
        from xfid.tracker import noise

        settings = noise.NoiseSettings.from_config(self.config.section("tracker"),
                                                   str(self.config.path or "bundled xfid.toml"))
        if corr.rows is not None and "noise" not in corr.rows.columns:
            noise.annotate(corr, self.backend(), self.config)
        return tracker.record_check(corr, actor=who_acts(actor), label=label, clean_checks_to_resolve=k,
                                    noise=settings)

    def resolve_after(self, override: int | None = None) -> int:
        """K for auto-resolve: `override`, else `[tracker] resolve_after`, else 2 (noise.RESOLVE_AFTER).

        Raises:
            TrackerError, ConfigError: a value that is not an integer >= 1.
        """
        if override is not None:
            if isinstance(override, bool) or not isinstance(override, int) or override < 1:
                raise TrackerError(f"--resolve-after must be an integer >= 1, got {override}")
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
        the key, both values, rel_error, owner, first/last seen, and the waiver and check columns."""
        import pandas as pd

        from xfid.tracker.tracker import EXTRA_KEYS, ISSUE_KEYS

        rows = self.issue_list(state, target=target, kind=kind, severity_min=severity_min)
        return pd.DataFrame(rows, columns=[*ISSUE_KEYS, *EXTRA_KEYS])

    def issue_list(self, state: str | None = None, *, target: str | Sequence[str] | None = None,
                   kind: str | None = None, severity_min: float | None = None) -> list[dict[str, Any]]:
        """The same issues as plain dicts (what `xfid issues list --format json` prints)."""
        wanted = [target] if isinstance(target, str) else list(target or [])
        rows = self.tracker.issues(state=state, kind=kind, severity_min=severity_min,
                                   target=wanted[0] if len(wanted) == 1 else None)
        return [r for r in rows if len(wanted) < 2 or r["target"] in wanted]

    def issue(self, issue_id: str) -> dict[str, Any]:
        """One issue with its history and every observation (both numbers' provenance)."""
        return self.tracker.issue(issue_id)

    def act(self, issue_id: str, action: str, *, actor: str | None = None, **details: Any) -> dict[str, Any]:
        """A manual action on an issue: ack (owner=), resolve, reopen, waive (reason=, until=, max_error=), note.

        Raises:
            TrackerError: an unknown id, an action not allowed from the issue's state (the allowed
                ones listed), a missing owner/reason/expiry. Nothing changes then.
        """
        return self.tracker.transition(issue_id, action, actor=who_acts(actor), **details)

    def history(self, key: str, alpha: float = 0.01) -> KeyHistory:
        """One key's (XF-N or fingerprint) error at every recorded check, with change points."""
        from xfid.drift.changepoint import change_points
        from xfid.drift.history import key_history

        series = key_history(self.backend(), key)
        cps = change_points([p["rel_error"] for p in series if p["rel_error"] is not None], alpha=alpha)
        return KeyHistory(key, series, cps)

    # --- baselines and reports --------------------------------------------------------
    def snapshot(self, output: PathLike | None = None, targets: Sequence[str] | None = None, run: Runs = None,
                 as_of: Any = None, label: str | None = None, engine: str | None = None) -> dict[str, Any]:
        """The current correlation as a baseline snapshot (written to `output` when given).

        With engine "spark" the snapshot holds the aggregates and the discrepancies' keys."""
        from xfid.drift.snapshot import make_snapshot, write_snapshot

        snap = make_snapshot(self.correlate(targets, None, run, as_of, engine=engine), label=label)
        if output is not None:
            write_snapshot(snap, output)
        return snap

    def report(self, period: Period | str | None = None, path: PathLike | None = None, html: bool = False, *,
               targets: Sequence[str] | None = None, max_points: int = REPORT_MAX_POINTS) -> ReportResult:
        """Render the discrepancy report of a period as PDF (or one self-contained HTML file).

        Args:
            period: a Period, "YYYY-Www", "YYYY-MM-DD..YYYY-MM-DD", "YYYY-MM-DD" (one day), or None
                for the last complete ISO week.
            path: the file to write (default reports/xfid-<period>.pdf or .html).
            html: write HTML instead of PDF.
            targets: only these targets.
            max_points: most points drawn per plot (a seeded sample; tables stay complete).

        Raises:
            ReportError: an empty store, a bad period, a file that cannot be written.
        """
        from xfid.report.assemble import build_report_data
        from xfid.report.render import render_html, render_pdf, write_atomic

        p = _period(period)
        data = build_report_data(self.backend(), self.config, p, list(targets or []), max_points=max_points)
        out = Path(path) if path is not None else default_output(p.label, html)
        if path is None:
            out.parent.mkdir(exist_ok=True)  # the default reports/ folder; a folder named by path must exist
        assert data.bound_tolerance is not None  # build_report_data sets it from the check's settings
        text = render_html(data, bound_tol=data.bound_tolerance)
        pages = None
        if html:
            write_atomic(out, text.encode("utf-8"))
        else:
            pdf, pages = render_pdf(text)
            write_atomic(out, pdf)
        return ReportResult(out, html, pages, len(data.open_issues), len(data.pairs))

    def profile(self, targets: str | Sequence[str]) -> Profile:
        """The capability profile of one target or several side by side (`xfid profile`).

        Returns:
            A `Profile`: `.targets` (one dict per target: classes, transfer, interference,
            conditions), `.to_dict()`, `.to_json()`.

        Raises:
            ConfigError: an unknown target; StoreError: no store.
        """
        from xfid.profile import profile

        return profile(self.backend(), self.config, [targets] if isinstance(targets, str) else list(targets))

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
        return rebuild_catalog(self.path, self.locations()["database"])


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


def _period(period: Period | str | None) -> Period:
    from xfid.report.period import Period, resolve_period

    if isinstance(period, Period):
        return period
    if period is None:
        return resolve_period(None, None, None)
    text = str(period).strip()
    if "-W" in text.upper():
        return resolve_period(text, None, None)
    since, sep, until = text.partition("..")
    return resolve_period(None, since, until if sep else since)


def _runs(run: Runs) -> Any:
    if run is None or isinstance(run, (str, Mapping)):
        return run
    return list(run) or None


def _filters(filters: Mapping[str, str | Sequence[str]]) -> dict[str, Sequence[str]]:
    from xfid.schema import SCHEMA

    out: dict[str, Sequence[str]] = {}
    for k, v in filters.items():
        if k not in SCHEMA.names:
            raise XfidError(f"records(): unknown column {k!r}; columns: {', '.join(SCHEMA.names)}")
        if v is not None and v != ():
            out[k] = [v] if isinstance(v, str) else list(v)
    return out
