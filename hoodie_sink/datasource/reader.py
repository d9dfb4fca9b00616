"""`spark.read.format("hoodie").load(path)`: snapshot reads of copy-on-write tables.

Which snapshot: Spark 4.3 calls `partitions()` once per DataFrame or temporary view and reuses
that plan for every later query of it, so a snapshot fixed there would be served forever (an
`INSERT INTO v` would not show in `SELECT ... FROM v`).  The plan therefore fixes only the number
of input partitions (one per base file then) and remembers which files it found; each task
resolves the snapshot again, pinned to the moment its query was created, which Spark ships to
every task of the query (`query_started_ms`): the latest instant completed by then
(`table.reader.pinned_timeline`).  Every task of one query derives the same instant from the same
timeline on storage, on any executor, whatever commits land while they run.  If that snapshot is
the planned one, a task reads its planned file; otherwise the tasks list the new snapshot and
share its files round-robin (a table that grew is read with the planned number of tasks).
Without a query id (not a Spark SQL execution) a task reads the planned snapshot, and fails with
an error if the table has changed since, never with a stale answer.

Pruning: when Spark pushes filters down
(spark.sql.python.filterPushdown.enabled=true, off by default in Spark 4.3), base files are
skipped in two steps:

1. partition pruning: filters on partition columns against each file's partition path;
2. data skipping: every supported filter (=, <, <=, >, >=, IN, IS [NOT] NULL, LIKE 'prefix%' on
   a top-level column) against the min / max / null count statistics of each remaining file's
   Parquet footer (`hoodie_sink.table.read.data_skipping`; footers are cached per process).  Clustering
   sorts rows, so filters on its sort columns skip most files.

Both only drop files that certainly hold no matching row, and every filter is still returned to
Spark, so rows are filtered exactly either way.

Spark 4.3 keeps the read plan of a pushdown on the relation, and a later query with no filter
at all reuses it, pushed filters included.  A task recognises such a reuse when its query was
created after the plan was made (a view's later query): it then prunes nothing and reads every
file of its snapshot (Spark filters rows above the scan anyway).  A query on the SAME DataFrame
object that was created before the pushdown (`df.collect()` after `df.where(...).collect()`)
cannot be told apart: load the table again for such an unfiltered query (README).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.read_config import ReadConfig
from hoodie_sink.table.format.keygen import parse_partition_path
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.read import data_skipping
from hoodie_sink.table.read.cdc import CdcTask, plan_cdc, read_cdc_task
from hoodie_sink.table.read.data_skipping import Predicate
from hoodie_sink.table.read.incremental import (
    IncrementalPlan,
    open_incremental,
    plan_incremental,
    read_in_range,
    touched_refs,
)
from hoodie_sink.table.read.snapshot import Snapshot, load_timeline, pinned_timeline, skip_slices, slice_ref
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


class HoodieReader(DataSourceReader):
    """Plans at `partitions()`, resolves the snapshot again in every task (see the module doc)."""

    def __init__(self, config: ReadConfig, columns: list[str]):
        self.config = config
        self.columns = columns
        self.partition_predicates: list = []  # Spark filters, for partition pruning
        self.predicates: list[Predicate] = []  # every supported filter, for data skipping

    def partitions(self):
        if self.config.incremental:
            return self._incremental_partitions()
        snap = self._open()
        self._schema = snap.schema
        files = self._files(snap)
        plan = (snap.instant, snap.completed_writes, int(time.time() * 1000))
        n = max(1, len(files))
        # Spark ships only .value.  One slot per planned base file (file slice, in a merge-on-read
        # snapshot); the number of slots is fixed now, the files a slot reads are decided again at
        # read time if the table changed.
        return [InputPartition((i, n, plan, (files[i],) if files else ())) for i in range(n)]

    def _incremental_partitions(self):
        cfg = self.config
        assert cfg.begin_instant is not None, "ReadConfig requires it for incremental queries"
        if cfg.cdc:
            return cdc_partitions(cfg.storage(), cfg.begin_instant, cfg.end_instant)
        return incremental_partitions(self, cfg.begin_instant, cfg.end_instant)

    def _open(self, timeline=None) -> Snapshot:
        cfg = self.config
        return Snapshot.open(cfg.storage(), cfg.as_of_instant, cfg.read_optimized, timeline=timeline)

    def _files(self, snap: Snapshot) -> list[str]:
        """What the read tasks read: base file paths, or file slices (`slice_ref`) of a
        merge-on-read snapshot, of which only those without log files are skipped by statistics
        (a base file's statistics say nothing of the updates in its logs)."""
        if snap.merges_logs:
            return self._slices(snap)
        files = snap.base_files(self._pruner(snap))
        if self.predicates:
            skipping = data_skipping.prune(snap.storage, files, self.predicates)
            log.info(
                "hoodie data skipping on %s: %d of %d base files skipped (%d footers read)",
                self.config.path,
                skipping.skipped,
                skipping.considered,
                skipping.footers_read,
            )
            files = skipping.files
        return [bf.path for bf in sorted(files)]

    def _slices(self, snap: Snapshot) -> list[str]:
        slices = skip_slices(snap.storage, snap.file_slices(self._pruner(snap)), self.predicates)
        return sorted(slice_ref(sl) for sl in slices)

    def _pruner(self, snap: Snapshot) -> Callable[[str], bool] | None:
        fields = snap.table.partition_fields
        timestamp_keygen = "Timestamp" in (snap.table.keygen_class or "")
        preds = [p for p in self.partition_predicates if p.attribute[0] in fields]
        if not preds or not fields or timestamp_keygen:
            return None
        hive, url_encode = snap.table.hive_style, snap.table.url_encode

        def keep(partition_path: str) -> bool:
            values = parse_partition_path(partition_path, fields, hive, url_encode)
            return all(_holds(p, values.get(p.attribute[0])) for p in preds)

        return keep

    def read(self, partition: InputPartition):
        if partition is None or not getattr(partition, "value", None):
            return  # Spark still runs one read task when there is no partition
        slot, n, plan, planned = partition.value
        if isinstance(plan, CdcRead):
            yield from read_cdc_partition(self.config.storage(), plan, self.columns)
            return
        if isinstance(plan, IncrementalPlan):
            yield from read_incremental_partition(self.config.storage(), plan, planned, self.columns)
            return
        storage = self.config.storage()
        snap, refs = self._slot_files(storage, slot, n, plan, planned)
        for ref in refs:
            yield from snap.read_ref(ref, self.columns).to_batches()

    def _slot_files(
        self, storage: Storage, slot: int, n: int, plan, planned: tuple[str, ...]
    ) -> tuple[Snapshot, tuple]:
        """The snapshot pinned for this query, and what slot `slot` of `n` reads of it."""
        cutoff = query_started_ms()
        if cutoff is None:
            # No query identity to pin on: read the planned snapshot, if it is still the latest.
            timeline = load_timeline(storage)
            snap = self._open(timeline)
            if (snap.instant, snap.completed_writes) != plan[:2]:
                raise HoodieTableError(
                    f"The Hudi table at {self.config.path} changed since this read was planned (instant "
                    f"{plan[0]}, now {snap.instant}), and Spark did not say which query this task belongs "
                    "to, so the new snapshot cannot be pinned. Help: load the table again "
                    "(spark.read.format('hoodie').load(path)) or re-create the temporary view."
                )
            return snap, planned
        snap = self._open(pinned_timeline(storage, cutoff))
        # A query created after the plan reuses it (Spark 4.3): its pushed filters may be another
        # query's, so it prunes nothing.
        prune = cutoff <= plan[2] or not (self.predicates or self.partition_predicates)
        if prune and (snap.instant, snap.completed_writes) == plan[:2]:
            return snap, planned  # the planned snapshot and filters: the planned files
        files = _replanned(self, snap, prune)
        return snap, tuple(files[slot::n])


def incremental_partitions(reader: HoodieReader, begin: str, end: str | None) -> list[InputPartition]:
    """An incremental read of (begin, end] reads the touched file groups as of its end instant,
    resolved now: a snapshot as of an instant does not change when later commits land, so the
    tasks read exactly what was planned (a stream's replayed micro-batch too)."""
    cfg = reader.config
    storage = cfg.storage()
    timeline = load_timeline(storage)
    inc = plan_incremental(storage, timeline, begin, end, cfg.fallback_full_scan)
    snap = open_incremental(storage, inc, timeline)
    reader._schema = snap.schema
    files = touched_refs(reader._files(snap), inc, storage, cfg.path_glob) if inc.end else []
    return [InputPartition((i, 0, inc, (ref,))) for i, ref in enumerate(files)]


@dataclass(frozen=True)
class CdcRead:
    """What one task of a change feed reads: a CdcTask, with the schema of the images and the
    timeline the driver planned on (every task sees the same instants)."""

    task: CdcTask
    schema: pa.Schema
    timeline: Timeline


def cdc_partitions(storage: Storage, begin: str, end: str | None) -> list[InputPartition]:
    """A change feed of (begin, end]: one task per write and few file groups (table/read/cdc.py)."""
    timeline = ActiveTimeline.load(storage)  # each commit file read once while planning
    plan = plan_cdc(storage, timeline, begin, end)
    if not plan.instants:
        return []
    schema = Snapshot.open(storage, timeline=timeline).schema
    plain = Timeline(timeline.instants)  # pickles small
    return [InputPartition((i, 0, CdcRead(t, schema, plain), ())) for i, t in enumerate(plan.tasks())]


def read_cdc_partition(storage: Storage, read: CdcRead, columns: list[str]):
    yield from read_cdc_task(storage, read.task, read.schema, read.timeline).select(columns).to_batches()


def read_incremental_partition(
    storage: Storage,
    plan: IncrementalPlan,
    refs: tuple[str, ...],
    columns: list[str],
    whole_schema: bool = False,
):
    """The planned refs' records in the plan's range.  `whole_schema`: `columns` are all the
    table's columns as a stream saw them when it started, and a column added since fails the read
    (dropping it would lose its values without a word; a restarted query sees it)."""
    snap = open_incremental(storage, plan)
    added = [c for c in snap.schema.names if c not in columns]
    if whole_schema and added:
        raise HoodieTableError(
            f"The schema of {storage.base_uri} gained column(s) {', '.join(added)} after this streaming query started "
            "(Spark fixes a stream's schema at its start). Help: restart the query; it resumes from its "
            "checkpoint and reads the new columns."
        )
    for ref in refs:
        yield from read_in_range(snap, ref, plan, columns).to_batches()


_REPLANNED: dict = {}  # per Python worker: tasks of one query share one listing


def _replanned(reader: HoodieReader, snap: Snapshot, prune: bool) -> list[str]:
    filters = (repr(reader.partition_predicates), repr(reader.predicates)) if prune else ()
    key = (reader.config, snap.instant, snap.completed_writes, filters)
    if key not in _REPLANNED:
        if len(_REPLANNED) > 16:
            _REPLANNED.clear()
        _REPLANNED[key] = reader._files(snap) if prune else snap.read_refs()
    return _REPLANNED[key]


def query_started_ms() -> int | None:
    """When the Spark query this task belongs to was created (epoch ms), the same in all of its
    tasks, or None outside a Spark SQL query.  Spark 4 gives every query execution a UUIDv7 id
    (`spark.sql.execution.query.id`, a local property shipped with each task); a UUIDv7 starts
    with its creation time in milliseconds."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    raw = tc.getLocalProperty("spark.sql.execution.query.id") if tc is not None else None
    if not raw:
        return None
    try:
        qid = uuid.UUID(raw)
    except ValueError:
        return None
    return qid.int >> 80 if qid.version == 7 else None


class HoodiePushdownReader(HoodieReader):
    def pushFilters(self, filters):
        for f in filters:
            if (
                isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual))
                and len(f.attribute) == 1
            ):
                self.partition_predicates.append(f)
            pred = to_predicate(f)
            if pred is not None:
                self.predicates.append(pred)
            yield f  # Spark still evaluates every filter: pruning only skips whole files


_SPARK_OPS: dict[type, str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
    IsNull: "is_null",
    IsNotNull: "is_not_null",
    StringStartsWith: "starts_with",
}
# Literal types Parquet statistics can be compared with; arrays, maps and structs cannot.
_SCALARS = (bool, int, float, str, bytes, decimal.Decimal, dt.date, dt.datetime, type(None))


def to_predicate(f) -> Predicate | None:
    """The data-skipping predicate of a Spark filter, or None (Not, StringContains, EqualNullSafe,
    nested columns, non-scalar literals: not used for skipping, Spark still applies them)."""
    op = _SPARK_OPS.get(type(f))
    if op is None or len(f.attribute) != 1:
        return None
    if op in data_skipping.NULL_OPS:
        return Predicate(f.attribute[0], op)
    values = f.value if op == "in" else (f.value,)
    if not all(isinstance(v, _SCALARS) for v in values):
        return None
    try:
        return Predicate(f.attribute[0], op, f.value)
    except ValueError:
        return None


def _coerce(raw: str, like):
    if isinstance(like, bool):
        return raw.lower() == "true"
    if isinstance(like, int):
        return int(raw)
    if isinstance(like, float):
        return float(raw)
    if isinstance(like, decimal.Decimal):
        return decimal.Decimal(raw)
    if isinstance(like, dt.date):
        return dt.date.fromisoformat(raw)
    return raw


def _holds(pred, raw: str | None) -> bool:
    """Whether a partition whose value is `raw` may hold rows matching `pred` (True if unsure)."""
    if raw is None or raw == "__HIVE_DEFAULT_PARTITION__":
        return True  # null partition values: keep the file, Spark filters the rows
    try:
        if isinstance(pred, In):
            return any(_coerce(raw, v) == v for v in pred.value if v is not None)
        v = pred.value
        x = _coerce(raw, v)
        if isinstance(pred, EqualTo):
            return x == v
        if isinstance(pred, GreaterThan):
            return x > v
        if isinstance(pred, GreaterThanOrEqual):
            return x >= v
        if isinstance(pred, LessThan):
            return x < v
        if isinstance(pred, LessThanOrEqual):
            return x <= v
    except (ValueError, TypeError, ArithmeticError):
        return True
    return True
