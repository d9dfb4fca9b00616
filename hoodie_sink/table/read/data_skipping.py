"""File-level data skipping: drop base files whose Parquet column statistics prove that no row
can match a conjunction of simple predicates.

Each base file's footer holds, per row group and column, min / max / null count.  They are folded
into one `ColumnStats` per top-level column of the file, cached per process, and `may_match` asks
whether a file MAY hold a row matching every predicate (AND).  It answers False only when that is
certain; missing statistics, a value whose type does not compare with the statistics, or anything
unusual keeps the file.  Pruning therefore never changes a result, it only saves reads: the callers
still filter rows exactly (the Python reader with pyarrow, Spark by re-evaluating its filters).

Semantics, those of Spark SQL (which pushes the filters) and of the rows our reader returns:

* Comparisons, ``in`` and ``starts_with`` never match a null.  A column missing from a file
  (added to the table after the file was written) is read as all nulls, so it matches only
  ``is_null``.
* NaN: Parquet statistics ignore NaN, and Spark orders NaN above every number (and NaN = NaN),
  so a floating column is never pruned by ``>`` / ``>=``, nor by ``=`` / ``in`` with a NaN value.
* Strings are compared in code point order, which is the UTF-8 byte order Parquet writes
  string statistics in (old writers' signed-order statistics are discarded by pyarrow).
* Timestamps: statistics of a UTC-adjusted column come back tz-aware, Spark may push naive
  values; when exactly one side is naive it is taken as UTC (the reader does the same when it
  casts a naive file column to the table's UTC timestamps).

This module is pure Python over pyarrow (no pyspark): it runs in Spark's planner worker, in the
Python reader, and in unit tests alike.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.lru_cache import LRUCache
from hoodie_sink.table.storage import Storage

# ------------------------------------------------------------------------------------- predicates

COMPARISONS = ("=", "<", "<=", ">", ">=")
VALUE_OPS = (*COMPARISONS, "in", "starts_with")
NULL_OPS = ("is_null", "is_not_null")
OPS = (*VALUE_OPS, *NULL_OPS)
# Spellings accepted in tuples, as pyarrow's `filters=` accepts them.
_OP_ALIASES = {"==": "=", "not null": "is_not_null", "is null": "is_null", "startswith": "starts_with"}


@dataclass(frozen=True)
class Predicate:
    """`column <op> value`; ``in`` takes a collection of values, ``is_null`` / ``is_not_null`` none."""

    column: str
    op: str
    value: Any = None

    def __post_init__(self) -> None:
        op = _OP_ALIASES.get(self.op, self.op)
        if op not in OPS:
            raise ValueError(
                f"Unsupported filter operator '{self.op}' on column '{self.column}'; "
                f"supported: {', '.join(OPS)}."
            )
        object.__setattr__(self, "op", op)
        if op == "in":
            if isinstance(self.value, (str, bytes)) or not isinstance(self.value, Iterable):
                raise ValueError(
                    f"Filter '{self.column} in ...' needs a collection of values, got {self.value!r}."
                )
            object.__setattr__(self, "value", tuple(self.value))  # hashable, and iterable twice
        if op == "starts_with" and not isinstance(self.value, str):
            raise ValueError(f"Filter '{self.column} starts_with' needs a string, got {self.value!r}.")

    @staticmethod
    def of(p: Predicate | Sequence) -> Predicate:
        """A Predicate, or a tuple ``(column, op, value)`` / ``(column, op)`` as in pyarrow filters."""
        if isinstance(p, Predicate):
            return p
        if isinstance(p, (tuple, list)) and len(p) in (2, 3):
            return Predicate(*p)
        raise ValueError(f"A filter is a Predicate or a (column, op, value) tuple, got {p!r}.")


def as_predicates(filters: Iterable[Predicate | Sequence] | None) -> list[Predicate]:
    return [Predicate.of(f) for f in filters or ()]


# ------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class ColumnStats:
    """One column of one file, over all its row groups.

    `min` / `max` bound the non-null, non-NaN values when `has_min_max`; `null_count` is None when
    some row group does not record it.  `in_file` False: the file has no such column (it reads as
    all nulls).
    """

    min: Any = None
    max: Any = None
    null_count: int | None = None
    has_min_max: bool = False
    is_float: bool = False
    in_file: bool = True


UNKNOWN = ColumnStats()  # present, nothing known: never prunes
ABSENT = ColumnStats(in_file=False)


@dataclass(frozen=True)
class FileStats:
    num_rows: int
    columns: Mapping[str, ColumnStats]  # every top-level column of the file

    def column(self, name: str) -> ColumnStats:
        return self.columns.get(name, ABSENT)

    def nbytes(self) -> int:
        """A rough size for the cache budget: a few hundred bytes per column plus its bounds."""
        return 200 + sum(300 + _size(c.min) + _size(c.max) for c in self.columns.values())


def _size(v: Any) -> int:
    return len(v) if isinstance(v, (str, bytes)) else 0


def file_stats_from_metadata(md: pq.FileMetaData) -> FileStats:
    names, leaves = _top_level_leaves(md)
    columns = {name: UNKNOWN for name in names}  # nested columns: present, no usable bounds
    for name, leaf in leaves.items():
        columns[name] = _column_stats(md, leaf)
    return FileStats(md.num_rows, columns)


def _top_level_leaves(md: pq.FileMetaData) -> tuple[list[str], dict[str, int]]:
    """Top-level column names, and the leaf (column chunk) index of each primitive one.

    Leaves are laid out in schema order, so a top-level field's leaves follow those of the fields
    before it.  Matching by position rather than by dotted path keeps a column named "a.b" apart
    from field b of a struct a.  Should the counts disagree, no column gets statistics.
    """
    arrow = md.schema.to_arrow_schema()
    leaves: dict[str, int] = {}
    pos = 0
    for f in arrow:
        n = _leaf_count(f.type)
        if n == 1 and not pa.types.is_nested(f.type):  # a one-field struct is still nested
            leaves[f.name] = pos
        pos += n
    return arrow.names, (leaves if pos == md.num_columns else {})


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    if pa.types.is_dictionary(t):
        return _leaf_count(t.value_type)
    return 1


def _column_stats(md: pq.FileMetaData, leaf: int) -> ColumnStats:
    """Fold the row groups' statistics of one leaf column.  A row group without min/max still
    leaves the file bounded when all its values are null (nothing to bound)."""
    lo = hi = None
    nulls: int | None = 0
    bounded = True
    is_float = False
    try:
        for r in range(md.num_row_groups):
            rg = md.row_group(r)
            chunk = rg.column(leaf)
            is_float = is_float or _is_float_chunk(chunk)
            s = chunk.statistics
            rg_nulls = s.null_count if s is not None and s.has_null_count else None
            nulls = None if nulls is None or rg_nulls is None else nulls + rg_nulls
            if (
                s is not None
                and s.has_min_max
                and _exact_bounds(s)
                and not (_is_nan(s.min) or _is_nan(s.max))
            ):
                lo = s.min if lo is None or s.min < lo else lo
                hi = s.max if hi is None or s.max > hi else hi
            elif rg_nulls is None or rg_nulls < rg.num_rows:
                bounded = False
    except (TypeError, ValueError, ArithmeticError, pa.ArrowException):
        return ColumnStats(is_float=is_float)
    has_min_max = bounded and lo is not None
    return ColumnStats(lo if has_min_max else None, hi if has_min_max else None, nulls, has_min_max, is_float)


def _is_float_chunk(chunk: pq.ColumnChunkMetaData) -> bool:
    if chunk.physical_type in ("FLOAT", "DOUBLE"):
        return True
    s = chunk.statistics
    return s is not None and "float16" in str(s.logical_type).lower()


def _exact_bounds(s: pq.Statistics) -> bool:
    """Newer Parquet writers flag truncated bounds; pyarrow exposes the flags in recent versions
    only.  A bound flagged inexact is not used (conservative, though a truncated bound is still a
    valid one)."""
    return (
        getattr(s, "is_min_value_exact", True) is not False
        and getattr(s, "is_max_value_exact", True) is not False
    )


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


# ---------------------------------------------------------------------------------- the decision


def may_match(
    stats: Mapping[str, ColumnStats] | FileStats, predicates: Iterable[Predicate], num_rows: int
) -> bool:
    """Whether a file of `num_rows` rows with these column statistics may hold a row matching all
    `predicates`.  False only when certain.

    `stats`: a file's `FileStats` (a column it does not list is missing from the file, so all
    null), or a mapping of some columns to their `ColumnStats` (a column it does not list is
    unknown and never prunes; give a column missing from the file as `ABSENT`).
    """
    # A FileStats knows every column of its file, so a column it lacks is ABSENT; a plain mapping
    # may hold only some columns, so a column it lacks is unknown.
    lookup = stats.column if isinstance(stats, FileStats) else stats.get
    if num_rows <= 0:
        return False  # an empty file holds no matching row
    for p in predicates:
        col = lookup(p.column)
        if col is not None and not _column_may_match(col, p, num_rows):
            return False
    return True


def _column_may_match(col: ColumnStats, p: Predicate, num_rows: int) -> bool:
    if not col.in_file:
        return p.op == "is_null"  # read as all nulls
    nulls = col.null_count
    if p.op == "is_null":
        return nulls is None or nulls > 0
    if p.op == "is_not_null":
        return nulls is None or nulls < num_rows
    if nulls is not None and nulls >= num_rows:
        return False  # all null: value predicates never match a null
    if not col.has_min_max:
        return True
    try:
        return _bounds_may_match(col, p)
    except (TypeError, ValueError, ArithmeticError):
        return True  # the value does not compare with the statistics: keep the file


def _bounds_may_match(col: ColumnStats, p: Predicate) -> bool:
    """Prune conditions are written as positive comparisons, so that any comparison with a NaN
    (always False) keeps the file."""
    if _may_read_rounded(col, p):
        return True
    if p.op == "in":
        values = [v for v in p.value if v is not None]  # `x in (NULL)` matches no row
        return any(_value_in_range(col, v) for v in values)
    v = p.value
    if v is None:
        return True  # `x = NULL` matches nothing, but Spark never pushes it: keep it simple
    if p.op == "=":
        return _value_in_range(col, v)
    if p.op == "starts_with":
        return _prefix_may_match(col.min, col.max, v)
    lo, hi = _align(col.min, v), _align(col.max, v)
    v = _align(v, col.min)
    if p.op == "<":
        return not (lo >= v)
    if p.op == "<=":
        return not (lo > v)
    if col.is_float:
        return True  # NaN (absent from the statistics) is greater than every number in Spark
    if p.op == ">":
        return not (hi <= v)
    if p.op == ">=":
        return not (hi < v)
    return True


# Integers of larger magnitude than this may not survive a float32 (2^24) or float64 (2^53) read.
_EXACT_IN_FLOAT32 = 1 << 24


def _may_read_rounded(col: ColumnStats, p: Predicate) -> bool:
    """An integer file column compared with a floating-point value may belong to a column the
    table has since promoted to float or double (docs/hudi/schema-evolution.md): its values are read
    rounded, so its exact integer bounds could skip a file whose rounded values match.  Such a file
    is kept whenever a bound is too large to be exact in a float."""
    values = p.value if p.op == "in" else [p.value]
    if col.is_float or not any(isinstance(v, float) for v in values):
        return False
    bounds = (col.min, col.max)
    return any(isinstance(b, int) and abs(b) > _EXACT_IN_FLOAT32 for b in bounds)


def _value_in_range(col: ColumnStats, v: Any) -> bool:
    if _is_nan(v):
        return True  # Spark: NaN = NaN, and NaN is not in the statistics
    lo, hi, v = _align(col.min, v), _align(col.max, v), _align(v, col.min)
    return not (v < lo or v > hi)


def _prefix_may_match(lo: Any, hi: Any, prefix: str) -> bool:
    if not (isinstance(lo, str) and isinstance(hi, str)):
        return True
    if hi < prefix:
        return False  # every string starting with `prefix` is >= prefix
    # A min above the prefix that does not start with it is above every string that does.
    return not (lo > prefix and not lo.startswith(prefix))


def _align(x: Any, other: Any) -> Any:
    """`x` made comparable with `other` when both are datetimes and only `x` is naive: naive
    values are UTC wall times (the session time zone Spark pushes them in, and the cast the reader
    applies to naive file columns)."""
    naive_vs_aware = isinstance(x, dt.datetime) and isinstance(other, dt.datetime) and x.tzinfo is None
    if naive_vs_aware and other.tzinfo is not None:
        return x.replace(tzinfo=dt.timezone.utc)
    return x


# -------------------------------------------------------------------------------- footers, cache

DEFAULT_STATS_CACHE_BUDGET = 64 * 1024 * 1024
# Keyed by (storage.base_uri, relative path): base files are immutable, so the path identifies content.
_STATS = LRUCache(DEFAULT_STATS_CACHE_BUDGET)


def set_stats_cache_budget(nbytes: int) -> None:
    """Bound the per-process cache of file statistics (least recently used evicted first)."""
    _STATS.set_budget(int(nbytes))


def stats_cache_stats() -> dict[str, int]:
    return _STATS.stats()


def clear_stats_cache() -> None:
    _STATS.clear()


def read_file_stats(storage: Storage, rel_path: str) -> FileStats:
    """The column statistics of one base file, from its footer (cached)."""
    key = (storage.base_uri, rel_path)
    cached = _STATS.get(key)
    if cached is not None:
        return cached
    with storage.open_input_file(rel_path) as f:
        stats = file_stats_from_metadata(pq.read_metadata(f))
    _STATS.put(key, stats, stats.nbytes())
    return stats


def _try_read_stats(storage: Storage, rel_path: str) -> FileStats | None:
    """None when the footer cannot be read: the file is kept, and reading it reports the error."""
    try:
        return read_file_stats(storage, rel_path)
    except (OSError, pa.ArrowException, ValueError):
        return None


@dataclass(frozen=True)
class PruneResult:
    files: list[BaseFile]  # the files that may hold matching rows, in the given order
    considered: int
    footers_read: int = 0  # footers not in the cache, read for this call
    skipped_files: list[BaseFile] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.considered - len(self.files)


def prune(
    storage: Storage,
    base_files: Iterable[BaseFile],
    predicates: Iterable[Predicate | Sequence],
    threads: int = 8,
    known: Mapping[str, FileStats] | None = None,
) -> PruneResult:
    """The base files that may hold rows matching every predicate.  `known`: statistics by file
    name from the metadata table's column_stats partition (read/metadata_column_stats.py); the
    footers of the other files not cached yet are read in a thread pool (I/O bound: pyarrow
    releases the GIL)."""
    files = list(base_files)
    preds = as_predicates(predicates)
    if not preds or not files:
        return PruneResult(files, len(files))
    known = known or {}
    missing = [
        bf.path for bf in files
        if bf.name not in known and not _STATS.contains((storage.base_uri, bf.path))
    ]  # fmt: skip
    stats = _read_all(storage, missing, threads)
    kept: list[BaseFile] = []
    skipped: list[BaseFile] = []
    for bf in files:
        # a file cached before this call: from the cache (or read again if evicted since)
        fs = known.get(bf.name) or (stats[bf.path] if bf.path in stats else _try_read_stats(storage, bf.path))
        keep = fs is None or may_match(fs, preds, fs.num_rows)
        (kept if keep else skipped).append(bf)
    return PruneResult(kept, len(files), len(missing), skipped)


def _read_all(storage: Storage, paths: list[str], threads: int) -> dict[str, FileStats | None]:
    if len(paths) <= 1 or threads <= 1:
        return {p: _try_read_stats(storage, p) for p in paths}
    with ThreadPoolExecutor(max_workers=min(threads, len(paths)), thread_name_prefix="hoodie-footer") as pool:
        return dict(zip(paths, pool.map(lambda p: _try_read_stats(storage, p), paths), strict=True))
