"""Data skipping's file statistics from the metadata table's `column_stats` partition (I/O): the
statistics of every data file from the partition's few HFiles, instead of one Parquet footer per
file (docs/hudi/column-stats.md).

The partition's records name a file and a column; those of one file become one `FileStats`, in
the values data_skipping compares (a timestamp's stored long back to a datetime, a date's epoch
day back to a date, by the table's schema).  What the records do not say never prunes:
- a column without a record (not indexed, nested, added after the file was written) is
  UNKNOWN, not absent;
- a bound that is NaN (Java's log-file statistics order NaN last) leaves the column unbounded;
- a file without records is not in the result: the caller falls back to its footer.
Statistics are keyed by file name, which names immutable content, so they serve any snapshot.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from hoodie_sink.table.format.metadata_keys import COLUMN_STATS
from hoodie_sink.table.format.metadata_listing import read_partition
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo, StatValue
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.data_skipping import UNKNOWN, ColumnStats, FileStats
from hoodie_sink.table.storage import Storage


def metadata_file_stats(storage: Storage, timeline: Timeline, schema: pa.Schema) -> dict[str, FileStats]:
    """The statistics of every data file the `column_stats` partition has records of, by file
    name (a data file's name is unique in the table: it holds a UUID file id, a write token and
    an instant; the records' keys hash the partition, so they are matched by name)."""
    records = read_partition(storage, timeline, COLUMN_STATS) or {}
    by_file: dict[str, dict[str, ColumnStatsInfo]] = {}
    for record in records.values():
        stats = record.column_stats if record is not None else None
        if stats is None or stats.is_deleted or stats.file_name is None or stats.column_name is None:
            continue
        by_file.setdefault(stats.file_name, {})[stats.column_name] = stats
    types = {f.name: f.type for f in schema}
    out: dict[str, FileStats] = {}
    for name, columns in by_file.items():
        rows = max((c.value_count or 0 for c in columns.values()), default=0)
        known = dict.fromkeys(types, UNKNOWN)
        for col, info in columns.items():
            if col in types:
                known[col] = _column(info, types[col])
        out[name] = FileStats(rows, known)
    return out


def _column(info: ColumnStatsInfo, t: pa.DataType) -> ColumnStats:
    is_float = pa.types.is_floating(t)
    nulls = info.null_count if info.null_count is not None and info.null_count >= 0 else None
    lo, hi = _value(info.min_value, t), _value(info.max_value, t)
    if lo is None or hi is None or _is_nan(lo) or _is_nan(hi):
        return ColumnStats(None, None, nulls, False, is_float)  # prunes by its null count alone
    return ColumnStats(lo, hi, nulls, True, is_float)


def _value(wrapped: StatValue | None, t: pa.DataType) -> Any:
    """A wrapped statistic as data_skipping compares it for a column of type `t`; None when it
    cannot be turned into that type (then the column is not pruned)."""
    if wrapped is None:
        return None
    kind, value = wrapped
    try:
        if kind in ("LongWrapper", "IntWrapper") and (
            pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date(t)
        ):
            raw = pa.scalar(int(value), pa.int64() if kind == "LongWrapper" else pa.int32())
            return raw.cast(t).as_py()
        if kind == "DateWrapper":
            return pa.scalar(int(value), pa.int32()).cast(pa.date32()).as_py()
        if kind == "TimestampMicrosWrapper":
            return pa.scalar(int(value), pa.int64()).cast(pa.timestamp("us", tz="UTC")).as_py()
    except (pa.ArrowException, OverflowError, ValueError):
        return None
    if isinstance(value, bytes) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None  # bytes bounds for a string column: not comparable, never guessed
    return value


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
