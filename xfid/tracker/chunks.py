"""A check's rows as a sequence of frames (chunks) instead of one frame.

`xfid check` files issues and writes its rows file from the rows the engine gives it. Held as one
frame, those rows bound the check by the driver's memory (rows x ~30 columns); held as chunks,
the tracker keeps only a few small values per distinct fingerprint (xfid.tracker.recording).

A `RowChunks` can be read more than once (the recording reads it up to three times: once to
write the rows file and tally each fingerprint, then only the rows it files, then the uncertain
ones it observes). Each read gives the same rows in the same order: the order of the one frame
the collected path builds. Every chunk's index is the rows' positions in that order (0, 1, ...
across the chunks), so a position names one row whatever the chunk size.

`transform` (the noise and stack annotations of a check: xfid.tracker.noise, xfid.tracker.stack)
is applied to each chunk as it is read; it must treat every row on its own (the result of a row
does not depend on the other rows of its chunk) and keep the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

CHUNK_ROWS = 500_000
"""Rows per chunk by default (as many as one collect of the Spark engine brings back)."""

Transform = Callable[["pd.DataFrame"], "pd.DataFrame"]


class RowChunks:
    """The rows of one check, read chunk by chunk (see the module docstring).

    `source` returns a new iterator of frames at each call, the same rows in the same order each
    time (their sizes may vary; empty frames are allowed)."""

    def __init__(self, source: Callable[[], Iterable[pd.DataFrame]], transform: Transform | None = None):
        self._source = source
        self._transform = transform

    @classmethod
    def of_frame(cls, frame: pd.DataFrame, size: int | None = None, transform: Transform | None = None) -> RowChunks:
        """One frame handed over in chunks of `size` rows (default CHUNK_ROWS)."""
        n = check_size(size)
        frame = frame.reset_index(drop=True)

        def pieces() -> Iterator[pd.DataFrame]:
            yield frame.iloc[:n]
            for start in range(n, len(frame), n):
                yield frame.iloc[start:start + n]

        return cls(pieces, transform)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        """The chunks, each indexed by its rows' positions, transformed."""
        for chunk in self._raw():
            yield self._transform(chunk) if self._transform is not None else chunk

    def raw(self) -> Iterator[pd.DataFrame]:
        """The chunks as the source gives them (not transformed), indexed by position."""
        return self._raw()

    def _raw(self) -> Iterator[pd.DataFrame]:
        import pandas as pd

        start = 0
        for chunk in self._source():
            index = pd.RangeIndex(start, start + len(chunk))
            if not chunk.index.equals(index):
                chunk = chunk.set_axis(index)
            start += len(chunk)
            yield chunk

    def records(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows at `positions` (transformed), as dicts, in position order."""
        for sub in self.frames(positions):
            yield from sub.to_dict("records")

    def frames(self, positions: Iterable[int]) -> Iterator[pd.DataFrame]:
        """The rows at `positions` (transformed), as frames (one per chunk that has some), in position order."""
        import numpy as np

        wanted = np.unique(np.fromiter(positions, dtype=np.int64))
        if not len(wanted):
            return
        for chunk in self._raw():
            if not len(chunk):
                continue
            lo, hi = np.searchsorted(wanted, [chunk.index[0], chunk.index[-1] + 1])
            if lo == hi:
                continue
            sub = chunk.loc[wanted[lo:hi]]
            if self._transform is not None:
                sub = self._transform(sub)
            yield sub
            if hi == len(wanted):
                return


def check_size(size: int | None) -> int:
    """Rows per chunk: `size`, else CHUNK_ROWS; an integer >= 1."""
    from xfid.errors import TrackerError

    n = CHUNK_ROWS if size is None else size
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TrackerError(f"rows per chunk must be an integer >= 1, got {size!r}")
    return n


def dataset_source(folder: str | Path, tracked: pd.DataFrame, pairs: list[dict[str, Any]], *,
                   include_missing: bool, size: int | None = None) -> Callable[[], Iterator[pd.DataFrame]]:
    """The rows of a check whose discrepancies an engine wrote as a Parquet dataset (Spark's
    executors: xfid.engine.spark.output, parts written in the collected order, pair then key, read
    part by part in name order), with the `tracked` rows that came back (the open issues' rows:
    those that are not discrepancies, ok rows above all, are put in their place), as a source of
    chunks for `RowChunks`: the rows, order and dtypes of the collected path (what the engine's
    Correlation.rows holds without `out`). `pairs`: the correlation's settings["pairs"] (their
    order is the rows' pair order)."""
    import numpy as np
    import pyarrow.parquet as pq

    from xfid.engine.dataset import DATASET_SCHEMA
    from xfid.engine.spark.engine import _local_rows
    from xfid.engine.spark.output import PART_ORDER

    n = check_size(size)
    index = {}
    for i, p in enumerate(pairs):
        index.setdefault((str(p.get("candidate")), str(p.get("reference"))), i)

    def with_pairs(frame: pd.DataFrame) -> pd.DataFrame:
        pair = [index[(str(c), str(r))] for c, r in zip(frame["candidate"], frame["reference"], strict=True)]
        return frame.assign(pair_index=np.asarray(pair, dtype=np.int64))

    kinds = tracked["kind"].astype(str)
    other = (kinds == "ok") | ((kinds == "missing_reference") & (not include_missing))
    extra = with_pairs(tracked[other.to_numpy()].reset_index(drop=True)) if len(tracked) else None
    extra_keys = [_order_key(r) for r in extra[list(PART_ORDER)].itertuples(index=False)] \
        if extra is not None else []
    parts = sorted(p for p in Path(folder).glob("*.parquet") if not p.name.startswith(("_", ".")))

    def source() -> Iterator[pd.DataFrame]:
        j = 0  # the next tracked row to place
        for part in parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=n):
                if not batch.num_rows:
                    continue
                frame = with_pairs(pa_table(batch, DATASET_SCHEMA).to_pandas())
                last = _order_key(tuple(frame[c].iloc[-1] for c in PART_ORDER))
                k = j
                while k < len(extra_keys) and extra_keys[k] <= last:
                    k += 1
                yield _local_rows([frame, *([extra.iloc[j:k].copy()] if k > j else [])])
                j = k
        if extra is not None and j < len(extra_keys):
            yield _local_rows([extra.iloc[j:].copy()])

    def source_or_empty() -> Iterator[pd.DataFrame]:
        empty = True
        for frame in source():
            empty = False
            yield frame
        if empty:
            yield _local_rows([])

    return source_or_empty


def _order_key(values: Iterable[Any]) -> tuple:
    """A row's place in the parts' order (xfid.engine.spark.output.PART_ORDER: pair, then key, as
    the collected path's engine._local_rows): strings by code point, a missing value first."""
    import pandas as pd

    it = iter(values)
    out: list[Any] = [int(next(it))]
    for v in it:
        out.append((0, "") if v is None or (not isinstance(v, str) and pd.isna(v)) else (1, str(v)))
    return tuple(out)


def pa_table(batch: Any, schema: Any) -> Any:
    """A record batch as a table of `schema` (the dataset's types)."""
    import pyarrow as pa

    return pa.Table.from_batches([batch]).select(schema.names).cast(schema)
