"""Snapshot reads of copy-on-write tables: the latest committed base file of each file group.

Each base file is read with pyarrow and conformed to the table schema (columns added since
the file was written are null-filled, narrower types widened), as hudi-rs does.

With `filters`, base files are first pruned by their Parquet column statistics
(`hoodie_sink.table.read.data_skipping`), then the rows of the remaining files are filtered exactly.

A snapshot can be pinned to a completion cutoff (`load_timeline(completed_by_ms=...)`): only the
instants whose completed file existed by then count as completed.  Readers that resolve the
snapshot in several processes (the Spark tasks of one query) derive the same instant from the
same cutoff, whatever commits land while they run.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import logging
import operator
import posixpath
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.file_group import BaseFile, FileSlice, LogFile
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.metadata_keys import COLUMN_STATS
from hoodie_sink.table.format.metadata_table import listed_partitions
from hoodie_sink.table.format.properties import MERGE_ON_READ, TableConfig, read_table_config
from hoodie_sink.table.format.schema import META_COLUMNS, avro_to_arrow
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS, Instant
from hoodie_sink.table.format.timeline.timeline import META_DIR, ActiveTimeline, Timeline
from hoodie_sink.table.options.read_config import parse_as_of_instant
from hoodie_sink.table.read.base_file import read_base_file
from hoodie_sink.table.read.data_skipping import FileStats, Predicate, as_predicates, may_match, prune
from hoodie_sink.table.read.file_slice import CommittedInstants, read_file_slice
from hoodie_sink.table.read.metadata_column_stats import metadata_file_stats
from hoodie_sink.table.read.retention import check_time_travel
from hoodie_sink.table.storage import Storage, as_storage

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    storage: Storage
    table: TableConfig
    timeline: Timeline
    schema: pa.Schema  # meta columns + data columns
    instant: str | None
    merges_logs: bool = False  # a merge-on-read snapshot (not read-optimized): slices, not base files
    skip_merge: bool = False  # merge.type=skip_merge: base rows and log records, unmerged

    @staticmethod
    def open(
        path: str | Storage,
        as_of: str | None = None,
        read_optimized: bool = False,
        timeline: Timeline | None = None,
        skip_merge: bool = False,
    ) -> Snapshot:
        """The latest snapshot of `timeline` (default: the table's timeline now), or the one
        `as_of` names (any format `as.of.instant` accepts; instants <= it are visible)."""
        as_of = parse_as_of_instant(as_of) if as_of else None
        storage = as_storage(path)
        table = read_table_config(storage)
        # an ActiveTimeline: the listing through the metadata table reuses it (fs_view.list_table_files)
        timeline = timeline if timeline is not None else ActiveTimeline.load(storage)
        whole = timeline
        if as_of:
            check_time_travel(storage, timeline, as_of)
            # Time travel: the timeline as it was at `as_of` (a replacecommit or schema change
            # after it must not count, and neither must a commit still pending then).
            timeline = Timeline(tuple(i for i in timeline.instants if i.timestamp <= as_of))
        avro = latest_schema(storage, timeline, table)
        if avro is None and as_of:
            # Before the table's first write: no row, but the table's columns, as Hudi's schema
            # resolver answers then (docs/hudi/read-options.md, "Time travel before the first commit").
            avro = latest_schema(storage, whole, table)
        data = avro_to_arrow(json.loads(avro)) if avro else pa.schema([])
        # A virtual-key table's meta columns are null: Java's reader leaves them out, so do we
        # (format/virtual_keys.py).
        meta = [pa.field(n, pa.string()) for n in META_COLUMNS] if table.populate_meta_fields else []
        schema = pa.schema(meta + [f for f in data if f.name not in META_COLUMNS])
        latest = timeline.latest_completed()
        instant = latest.timestamp if latest else None
        if as_of and instant:
            instant = min(as_of, instant)
        merges = table.table_type == MERGE_ON_READ and not read_optimized
        return Snapshot(storage, table, timeline, schema, instant, merges_logs=merges, skip_merge=skip_merge)

    @property
    def merge_rule(self) -> MergeRule:
        return MergeRule.of_table(self.table)

    @functools.cached_property
    def _view(self) -> FileSystemView:
        # the timeline is fixed, so the view is too: listed once however often it is asked (a LIST
        # per partition on object storage; a DML's key lookup asks for slices and base files)
        return FileSystemView.load(self.storage, self.timeline)

    def file_slices(self, partition_filter: Callable[[str], bool] | None = None) -> list[FileSlice]:
        """The latest file slice of every file group (merge-on-read snapshot reads)."""
        return self._view.read_slices(self.instant, partition_filter)

    def read_refs(self, partition_filter: Callable[[str], bool] | None = None) -> list[str]:
        """What this snapshot's read tasks read, one string each: a base file's path, or with
        `merges_logs` a file slice (`slice_ref`)."""
        if not self.merges_logs:
            return [bf.path for bf in self.base_files(partition_filter)]
        return sorted(slice_ref(sl) for sl in self.file_slices(partition_filter))

    def read_ref(self, ref: str, columns: list[str] | None = None) -> pa.Table:
        if "\n" not in ref:
            return read_base_file(self.storage, ref, self.schema, columns)
        sl = parse_slice_ref(ref)
        # the merge needs the key, ordering and delete columns: read everything, then project
        rows = read_file_slice(
            self.storage, sl, self.schema, self.merge_rule, CommittedInstants(self.timeline), self.instant,
            skip_merge=self.skip_merge,
        )  # fmt: skip
        return rows.select(columns) if columns is not None else rows

    def metadata_stats(self) -> dict[str, FileStats]:
        """The data files' column statistics from the metadata table's column_stats partition, by
        file name ({} when the table keeps no such partition)."""
        if COLUMN_STATS not in listed_partitions(self.table.extra):
            return {}
        return metadata_file_stats(self.storage, self.timeline, self.schema)

    def base_files(self, partition_filter: Callable[[str], bool] | None = None) -> list[BaseFile]:
        return sorted(self._view.latest_base_files(self.instant, partition_filter))

    def read_file(self, bf: BaseFile, columns: list[str] | None = None) -> pa.Table:
        return read_base_file(self.storage, bf.path, self.schema, columns)

    @property
    def completed_writes(self) -> tuple[str, ...]:
        """The completed write instants this snapshot stands on: two snapshots with the same
        ones (and the same query instant) see the same files."""
        return tuple(sorted(self.timeline.completed_times()))


def slice_ref(sl: FileSlice) -> str:
    """A file slice as one string (what a Spark input partition carries): the base file's path
    (empty for a log-only slice), then the log files' paths, one per line."""
    return "\n".join([sl.base_file.path if sl.base_file else ""] + [lf.path for lf in sl.log_files])


def parse_slice_ref(ref: str) -> FileSlice:
    base, *logs = ref.split("\n")
    log_files = []
    for path in logs:
        part, name = posixpath.split(path)
        lf = LogFile.parse(part, name)
        if lf is None:
            raise HoodieTableError(f"Not a log file: {path}")
        log_files.append(lf)
    bf = BaseFile.parse(*posixpath.split(base)) if base else None
    first = bf or log_files[0]
    base_instant = bf.instant if bf else log_files[0].base_instant
    return FileSlice(first.partition_path, first.file_id, base_instant, base_file=bf, log_files=log_files)


# A commit is visible to every reader once its completed file exists.  A reader pinned to a
# cutoff C counts a commit whose completed file was written by C; if a commit is in flight while
# a task lists the timeline within this margin of C, the task waits for the margin to pass, so
# that a commit completing around C (the storage's and the driver's clocks may differ by a little)
# is seen, or not, by all the tasks of the query alike.
COMPLETION_CLOCK_MARGIN_MS = 1000


def load_timeline(storage: Storage, completed_by_ms: int | None = None) -> Timeline:
    """The timeline, as of a completion cutoff: a completed file written after `completed_by_ms`
    (epoch ms, by its modification time) is left out, so its instant reads as still pending."""
    if completed_by_ms is None:
        return Timeline.load(storage)
    found = []
    for info in storage.list_dir(META_DIR):
        inst = Instant.parse(info.base_name)
        if inst is None:
            continue
        if inst.is_completed and info.mtime_ns is not None and info.mtime_ns // 1_000_000 > completed_by_ms:
            continue
        found.append(inst)
    return Timeline(tuple(sorted(found)))


def pinned_timeline(
    storage: Storage,
    completed_by_ms: int,
    margin_ms: int = COMPLETION_CLOCK_MARGIN_MS,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Timeline:
    """`load_timeline(storage, completed_by_ms)`, the same in every process that calls it with the
    same cutoff: waits until `margin_ms` after the cutoff first if a write is in flight."""
    timeline = load_timeline(storage, completed_by_ms)
    wait_s = (completed_by_ms + margin_ms) / 1000 - clock()
    if wait_s > 0 and timeline.pending(WRITE_ACTIONS):
        sleep(wait_s)
        timeline = load_timeline(storage, completed_by_ms)
    return timeline


def iter_snapshot(
    path: str,
    columns: list[str] | None = None,
    partition_filter: Callable[[str], bool] | None = None,
    as_of: str | None = None,
    read_optimized: bool = False,
    filters: Sequence[Predicate | Sequence] | None = None,
    skip_merge: bool = False,
) -> Iterator[pa.Table]:
    """The snapshot one base file at a time.  `filters`, `skip_merge`: see `read_snapshot`."""
    snap = Snapshot.open(path, as_of, read_optimized, skip_merge=skip_merge)
    yield from _read_files(snap, columns, partition_filter, as_predicates(filters))


def read_snapshot(
    path: str | Storage,
    columns: list[str] | None = None,
    partition_filter: Callable[[str], bool] | None = None,
    as_of: str | None = None,
    read_optimized: bool = False,
    filters: Sequence[Predicate | Sequence] | None = None,
    skip_merge: bool = False,
) -> pa.Table:
    """The latest snapshot (as of `as_of`) of a copy-on-write table, or the base files of a
    merge-on-read one with `read_optimized`.

    `filters`: predicates that every returned row satisfies (AND), as `data_skipping.Predicate`s or
    pyarrow-style tuples ``(column, op, value)`` with op one of ``= == < <= > >= in is_null
    is_not_null starts_with``.  Base files whose Parquet statistics rule out every row are not
    read; the rows of the others are filtered exactly with pyarrow, so comparisons never match a
    null and NaN follows pyarrow (IEEE: NaN matches no comparison).

    `skip_merge` (Hudi's `hoodie.datasource.merge.type=skip_merge`): a merge-on-read file slice's
    base rows and log records are returned without merging them (table/read/file_slice.py).
    """
    snap = Snapshot.open(path, as_of, read_optimized, skip_merge=skip_merge)
    target = pa.schema([snap.schema.field(c) for c in columns]) if columns else snap.schema
    tables = list(_read_files(snap, columns, partition_filter, as_predicates(filters)))
    return pa.concat_tables(tables) if tables else target.empty_table()


def _read_files(
    snap: Snapshot,
    columns: list[str] | None,
    partition_filter: Callable[[str], bool] | None,
    predicates: list[Predicate],
) -> Iterator[pa.Table]:
    if snap.merges_logs:
        yield from _read_slices(snap, columns, partition_filter, predicates)
        return
    files = snap.base_files(partition_filter)
    if not predicates:
        for bf in files:
            yield snap.read_file(bf, columns)
        return
    row_filter = row_filter_expression(predicates, snap.schema)
    # Filter columns outside the projection are read too, and dropped after filtering.
    extra = (
        []
        if columns is None
        else [c for c in dict.fromkeys(p.column for p in predicates) if c not in columns]
    )
    pruned = prune(snap.storage, files, predicates, known=snap.metadata_stats())
    if pruned.skipped:
        log.debug("data skipping: %d of %d base files skipped", pruned.skipped, pruned.considered)
    for bf in pruned.files:
        table = snap.read_file(bf, None if columns is None else columns + extra).filter(row_filter)
        yield table.select(columns) if extra else table


def skip_slices(
    storage: Storage,
    slices: list[FileSlice],
    predicates: Sequence[Predicate],
    known: Mapping[str, FileStats] | None = None,
) -> list[FileSlice]:
    """Data skipping on file slices.  A slice without log files is skipped by its base file's
    statistics.  One with log files only when `known` (the metadata table's column_stats, which
    cover log files) has statistics of every file of it and none may match: the merged rows are
    base rows and log records, so none of them can match then.  Otherwise the slice is kept."""
    if not predicates:
        return slices
    known = known or {}
    preds = as_predicates(predicates)
    bare = [sl.base_file for sl in slices if not sl.log_files and sl.base_file is not None]
    kept = {bf.path for bf in prune(storage, bare, list(predicates), known=known).files}
    out = []
    for sl in slices:
        if not sl.log_files:
            if sl.base_file is not None and sl.base_file.path in kept:
                out.append(sl)
            continue
        names = [lf.name for lf in sl.log_files] + ([sl.base_file.name] if sl.base_file is not None else [])
        stats = [known.get(n) for n in names]
        if any(fs is None for fs in stats) or any(may_match(fs, preds, fs.num_rows) for fs in stats if fs):
            out.append(sl)
    return out


def _read_slices(
    snap: Snapshot,
    columns: list[str] | None,
    partition_filter: Callable[[str], bool] | None,
    predicates: list[Predicate],
) -> Iterator[pa.Table]:
    """Merge-on-read snapshot: each latest file slice merged (skip_slices first)."""
    slices = skip_slices(snap.storage, snap.file_slices(partition_filter), predicates, snap.metadata_stats())
    if predicates:
        row_filter = row_filter_expression(predicates, snap.schema)
    for sl in slices:
        rows = snap.read_ref(slice_ref(sl))
        if predicates:
            rows = rows.filter(row_filter)
        yield rows.select(columns) if columns is not None else rows


# ------------------------------------------------------------------------------- exact row filter


def row_filter_expression(predicates: Sequence[Predicate], schema: pa.Schema) -> pc.Expression:
    """The conjunction of `predicates` as a pyarrow expression over rows of `schema`."""
    exprs = [_predicate_expression(p, _field(schema, p.column)) for p in predicates]
    expr = functools.reduce(operator.and_, exprs)
    try:  # type errors surface when the expression is bound: find them before reading any file
        schema.empty_table().filter(expr)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise HoodieTableError(f"Cannot apply filters {list(predicates)} to the table: {e}") from e
    return expr


def _field(schema: pa.Schema, name: str) -> pa.Field:
    if schema.get_field_index(name) < 0:
        raise HoodieTableError(
            f"Filter on unknown column '{name}'; the table's columns: {', '.join(schema.names)}."
        )
    return schema.field(name)


_COMPARE = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _predicate_expression(p: Predicate, f: pa.Field) -> pc.Expression:
    col = pc.field(p.column)
    if p.op == "is_null":
        return col.is_null()  # NaN is not null
    if p.op == "is_not_null":
        return col.is_valid()
    if p.op == "starts_with":
        return pc.starts_with(col, pattern=p.value)
    try:
        if p.op == "in":
            # Nulls dropped from the set, so that a null row matches nothing (SQL `IN`).
            values = [_literal(v, f.type) for v in p.value if v is not None]
            return col.isin(pa.array(values)) if values else pc.scalar(False)
        return _COMPARE[p.op](col, pc.scalar(_literal(p.value, f.type)))
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise HoodieTableError(
            f"Filter {p.column} {p.op} {p.value!r} does not apply to column type {f.type}: {e}"
        ) from e


def _literal(value, column_type: pa.DataType):
    """`value` as pyarrow should see it next to a column of `column_type`.  pyarrow infers the
    literal's type and casts for the comparison, except in two cases fixed here: timestamps with
    and without time zone do not compare (naive values are UTC wall times, as in data skipping),
    and an integer next to a decimal column needs to be a decimal."""
    if isinstance(value, dt.datetime) and pa.types.is_timestamp(column_type):
        if column_type.tz is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        if column_type.tz is None and value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, int) and not isinstance(value, bool) and pa.types.is_decimal(column_type):
        return decimal.Decimal(value)
    return value
