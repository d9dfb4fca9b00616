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

Filters: none is pushed into the read.  Spark 4.3 keeps one read plan (the partitions and the
pickled reader) per loaded relation and lets a filter pushdown replace it for later scans of that
relation (a reused DataFrame, a temporary view, `df.rdd`).  A reader that
pruned files by its pushed filters would serve them to queries that never asked for them, and no
task can tell which query's filters it is serving (docs/hudi/reused-read-plans.md).  The reader
therefore keeps Spark's default `pushFilters` (every filter stays Spark's to apply) and its plan
is the same whatever filters a query has, with filter pushdown on or off.  Data skipping by
column statistics is for the Python API (`hoodie_sink.read(path, filters=...)`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.read_config import ReadConfig
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.read.cdc import CdcTask, plan_cdc, read_cdc_task
from hoodie_sink.table.read.incremental import (
    IncrementalPlan,
    open_incremental,
    plan_incremental,
    read_in_range,
    touched_refs,
)
from hoodie_sink.table.read.snapshot import Snapshot, load_timeline, pinned_timeline
from hoodie_sink.table.storage import Storage


class HoodieReader(DataSourceReader):
    """Plans at `partitions()`, resolves the snapshot again in every task (see the module doc).
    No `pushFilters`: the plan must not depend on any query's filters (module doc)."""

    def __init__(self, config: ReadConfig, columns: list[str]):
        self.config = config
        self.columns = columns

    def partitions(self):
        if self.config.incremental:
            return self._incremental_partitions()
        snap = self._open()
        self._schema = snap.schema
        files = _files(snap)
        plan = (snap.instant, snap.completed_writes)
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
        return Snapshot.open(
            cfg.storage(), cfg.as_of_instant, cfg.read_optimized, timeline=timeline, skip_merge=cfg.skip_merge
        )

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
            if (snap.instant, snap.completed_writes) != plan:
                raise HoodieTableError(
                    f"The Hudi table at {self.config.path} changed since this read was planned (instant "
                    f"{plan[0]}, now {snap.instant}), and Spark did not say which query this task belongs "
                    "to, so the new snapshot cannot be pinned. Help: load the table again "
                    "(spark.read.format('hoodie').load(path)) or re-create the temporary view."
                )
            return snap, planned
        snap = self._open(pinned_timeline(storage, cutoff))
        if (snap.instant, snap.completed_writes) == plan:
            return snap, planned  # the planned snapshot: the planned files
        files = _replanned(self.config, snap)
        return snap, tuple(files[slot::n])


def _files(snap: Snapshot) -> list[str]:
    """What the read tasks of a snapshot read, every one of them: base file paths, or file slices
    (`slice_ref`) of a merge-on-read snapshot."""
    return sorted(snap.read_refs())


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
    files = touched_refs(_files(snap), inc, storage, cfg.path_glob) if inc.end else []
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


def _replanned(config: ReadConfig, snap: Snapshot) -> list[str]:
    key = (config, snap.instant, snap.completed_writes)
    if key not in _REPLANNED:
        if len(_REPLANNED) > 16:
            _REPLANNED.clear()
        _REPLANNED[key] = _files(snap)
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
