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

from pyspark.sql.datasource import DataSourceReader, InputPartition

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.client import scans
from hoodie_sink.table.client.scans import ChangeRead, IncrementalPlan
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.options.read_config import ReadConfig


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
            return cdc_partitions(Table.of(cfg), cfg.begin_instant, cfg.end_instant)
        return incremental_partitions(self, cfg.begin_instant, cfg.end_instant)

    def _open(self, timeline=None, table: Table | None = None):
        cfg = self.config
        table = table or Table.of(cfg)
        return table.open_snapshot(cfg.as_of_instant, cfg.read_optimized, cfg.skip_merge, timeline)

    def read(self, partition: InputPartition):
        if partition is None or not getattr(partition, "value", None):
            return  # Spark still runs one read task when there is no partition
        slot, n, plan, planned = partition.value
        table = Table.of(self.config)
        if isinstance(plan, ChangeRead):
            yield from scans.read_changes(table, plan, self.columns)
            return
        if isinstance(plan, IncrementalPlan):
            yield from scans.read_incremental_refs(table, plan, planned, self.columns)
            return
        snap, refs = self._slot_files(table, slot, n, plan, planned)
        for ref in refs:
            yield from snap.read_ref(ref, self.columns).to_batches()

    def _slot_files(self, table: Table, slot: int, n: int, plan, planned: tuple[str, ...]) -> tuple:
        """The snapshot pinned for this query, and what slot `slot` of `n` reads of it."""
        cutoff = query_started_ms()
        if cutoff is None:
            # No query identity to pin on: read the planned snapshot, if it is still the latest.
            snap = self._open(scans.timeline_of(table), table)
            if (snap.instant, snap.completed_writes) != plan:
                raise HoodieTableError(
                    f"The Hudi table at {self.config.path} changed since this read was planned (instant "
                    f"{plan[0]}, now {snap.instant}), and Spark did not say which query this task belongs "
                    "to, so the new snapshot cannot be pinned. Help: load the table again "
                    "(spark.read.format('hoodie').load(path)) or re-create the temporary view."
                )
            return snap, planned
        snap = self._open(scans.timeline_of(table, cutoff, pinned=True), table)
        if (snap.instant, snap.completed_writes) == plan:
            return snap, planned  # the planned snapshot: the planned files
        files = _replanned(self.config, snap)
        return snap, tuple(files[slot::n])


def _files(snap) -> list[str]:
    """What the read tasks of a snapshot read, every one of them: base file paths, or file slices
    (`slice_ref`) of a merge-on-read snapshot."""
    return sorted(snap.read_refs())


def incremental_partitions(reader: HoodieReader, begin: str, end: str | None) -> list[InputPartition]:
    """One task per touched file group of (begin, end], as of its end (table/client/scans.py)."""
    cfg = reader.config
    inc = scans.plan_incremental_read(Table.of(cfg), begin, end, cfg.fallback_full_scan, cfg.path_glob)
    reader._schema = inc.schema
    return [InputPartition((i, 0, inc.plan, (ref,))) for i, ref in enumerate(inc.refs)]


def cdc_partitions(table: Table, begin: str, end: str | None) -> list[InputPartition]:
    """A change feed of (begin, end]: one task per write and few file groups."""
    return [InputPartition((i, 0, read, ())) for i, read in enumerate(scans.plan_changes(table, begin, end))]


_REPLANNED: dict = {}  # per Python worker: tasks of one query share one listing


def _replanned(config: ReadConfig, snap) -> list[str]:
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
