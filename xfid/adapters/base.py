"""The adapter base class: a name, a fidelity, a cheap sniff, and `read` into normalized columns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeAlias

import pyarrow as pa

from xfid.errors import InputError

HEAD_BYTES = 8192
MAX_SKIPPED_KEYS = 1000


@dataclass
class ReadContext:
    """What ingest knows about a file beyond its bytes: flags, sidecar, options.

    Attributes:
        path: the file being read.
        target, workload, run, fidelity: context the file may not carry (flags or sidecar).
        meta: free `--meta k=v` pairs, merged into `config`.
        options: adapter-specific options (e.g. `clock_hz`, `window`).
        warnings: messages the adapter wants shown in the ingest summary.
        skipped: (location, reason) pairs for rows the adapter skipped on purpose.
        skipped_keys: keys of the file the adapter does not read, as key paths like `$.rtfx`
            (first seen first) -> how often seen; listed in the ingest summary, so that no key
            is dropped unseen. At most MAX_SKIPPED_KEYS names are kept.
        roots: the trees being ingested (the folders named, and the folder of each file
            named; default: this file's folder); `inside` confines to them every other file
            the adapter reads.
    """

    path: Path
    target: str | None = None
    workload: str | None = None
    run: str | None = None
    fidelity: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skipped_keys: dict[str, int] = field(default_factory=dict)
    roots: tuple[Path, ...] = ()

    def inside(self, value: Any, key: str) -> Path:
        """The file `value` names (relative to this file's folder), refused unless it lies in
        the trees being ingested; `key` names where the value came from (e.g. "option results")."""
        from xfid.ingest_tree import resolve_inside

        roots = self.roots or (self.path.absolute().parent.resolve(),)
        return resolve_inside(value, self.path.parent, roots, self.path, key)

    def beside(self, name: str) -> Path | None:
        """The file `name` beside this one when it is inside the tree (a link out is not followed)."""
        try:
            return self.inside(name, name)
        except InputError:
            return None

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def skip(self, loc: str, reason: str) -> None:
        self.skipped.append((loc, reason))

    def skip_keys(self, keys: Iterable[str], prefix: str = "$.") -> None:
        """Note keys the adapter does not read (e.g. a newer tool's field, a typo)."""
        seen = self.skipped_keys
        for k in keys:
            name = f"{prefix}{k if len(k) <= 100 else k[:100] + '...'}"
            if name in seen:
                seen[name] += 1
            elif len(seen) < MAX_SKIPPED_KEYS:
                seen[name] = 1

    def error(self, loc: str | None, what: str, fix: str | None = None) -> InputError:
        """An InputError naming this file; `raise ctx.error("line 3", "...")`."""
        return InputError(self.path, loc, what, fix)

    def require(self, name: str, why: str) -> str:
        """A context value the file does not carry; a clear error when absent."""
        v = getattr(self, name)
        if not v:
            raise InputError(
                self.path, None, f"no {name}: {why}",
                f"pass --{name} or set {name} = \"...\" in xfid-source.toml beside the file",
            )
        return str(v)


Batch: TypeAlias = pa.Table | Mapping[str, Any] | Any  # a Table, a dict of columns, or a DataFrame


class Adapter(ABC):
    """One source format. Subclasses set the class attributes and implement `sniff` and `read`.

    `read` returns records in the normalized columns (see `xfid.schema.COLUMNS`): at least
    fidelity/target/workload/op/metric/value and `source_loc` (the row, line or key path).
    Units may be any the metric allows; the one normalizer converts them. Provenance columns
    (`source`, `source_id`, `source_path`) are filled by ingest. A large file may be returned as
    an iterator of batches, so it is never held in memory whole.
    """

    name: ClassVar[str]
    fidelity: ClassVar[str | None]
    """The fidelity of every record, or None when the file says (xfid-records)."""
    formats: ClassVar[str]
    """One line for `xfid adapters`: what files this reads."""
    extensions: ClassVar[tuple[str, ...]] = ()

    @classmethod
    @abstractmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        """True when the first bytes of the file look like this format. Must be cheap."""

    @abstractmethod
    def read(self, ctx: ReadContext) -> Batch | Iterable[Batch]:
        """Read `ctx.path` into normalized columns.

        Raises:
            InputError: the file is not in this format, or a row is malformed (name the line).
        """


FIELDS = ("target", "workload", "op", "metric", "stat", "value", "unit", "n_samples", "source_loc",
          "null_reason", "flags", "config", "hardware", "software", "run", "timestamp")
"""The columns an adapter fills (ingest adds fidelity defaults and provenance)."""


class Columns:
    """A column buffer in the normalized column names: `add` one record at a time, return `.cols`."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {k: [] for k in FIELDS}

    def add(self, metric: str, stat: str, value: float | None, unit: str, loc: str, **kw: Any) -> None:
        """Append one record; `kw` sets any other column of FIELDS (op defaults to "")."""
        row = {"metric": metric, "stat": stat, "value": value, "unit": unit, "source_loc": loc, "op": "", **kw}
        for k in FIELDS:
            self.cols[k].append(row.get(k))

    def __len__(self) -> int:
        return len(self.cols["metric"])



def iter_batches(result: Any) -> Iterator[Batch]:
    """Adapters may return one batch or an iterable of batches; always iterate batches."""
    if isinstance(result, (pa.Table, Mapping)) or hasattr(result, "to_numpy"):
        yield result
        return
    yield from result


def head_text(head: bytes) -> str:
    """Decode the sniffed head leniently (BOM stripped) for format checks."""
    return head.decode("utf-8", errors="replace").lstrip("\ufeff")


def read_text(ctx: ReadContext) -> str:
    """The whole file as text: UTF-8 (a BOM is accepted), with a clear error otherwise."""
    data = ctx.path.read_bytes()
    if not data.strip():
        raise ctx.error(None, "the file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ctx.error(f"byte {e.start}", "not UTF-8 text", "save the file as UTF-8") from None
