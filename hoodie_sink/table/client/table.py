"""`Table`: one Hudi table opened by its path, and everything a caller does with it.

The engine's front door for readers and operators, as hudi-rs's `Table`, pyiceberg's `Table` and
delta-rs's `DeltaTable` are theirs: reads (snapshot, time travel, incremental, change feed), the
timeline and file groups, and the table services (compact, cluster, clean, archive, savepoint,
restore, rollback, validate).  Each method is one call into `read/` or `services/`; the Python API
(`hoodie_sink.read`), the Spark reader and stream source and the CLI all come through here, so none
of them needs the format model or the write path.

`options` are the table's: S3 settings (`fs.s3a.*`), read options (query type, instants, ...) for
`read()`, and Hudi write options that configure the services (retention, file sizes, ...).  Each
service takes its own options on top of them.  Writes keep their own entry,
`hoodie_sink.table.client.write` (and `begin` / `write_task` / `complete` for engines).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.dml import condition_tasks
from hoodie_sink.table.dml import table_merger as dml
from hoodie_sink.table.dml.condition_changes import ConditionDml
from hoodie_sink.table.dml.table_merger import TableMerger
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import FileGroup, FileSlice
from hoodie_sink.table.format.fs_view import FileSystemView, replacing_instants
from hoodie_sink.table.format.heartbeat import is_alive
from hoodie_sink.table.format.properties import MERGE_ON_READ, TableConfig, read_table_config
from hoodie_sink.table.format.timeline.instant import COMPLETED, INFLIGHT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.options.read_config import ReadConfig, is_read_option
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.base_file import count_rows
from hoodie_sink.table.read.cdc import read_cdc
from hoodie_sink.table.read.incremental import read_incremental
from hoodie_sink.table.read.snapshot import Snapshot, read_snapshot, slice_ref
from hoodie_sink.table.services import clustering, compaction, validation
from hoodie_sink.table.services.archival import (
    ArchivalConfig,
    ArchivalResult,
    load_archived_timeline,
    run_archival,
)
from hoodie_sink.table.services.cleaning import CleanConfig, CleanResult, committed_file_groups, run_clean
from hoodie_sink.table.services.savepoint import (
    SavepointInfo,
    create_savepoint,
    delete_savepoint,
    list_savepoints,
    restore,
)
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions
from hoodie_sink.table.write.rollback import rollback_instant

# a compaction's plan is a `compaction` (a log compaction's a `logcompaction`) instant, and its
# completed state a `commit` (`deltacommit`) file at the same time (docs/hudi/timeline-compaction-states.md)
_COMPLETES_AS = {"compaction": "commit", "logcompaction": "deltacommit"}


@dataclass(frozen=True)
class InstantHistory:
    """One instant time of a timeline with the states it reached; `action` is the one requested
    (a compaction's, not the `commit` it completes as)."""

    instant: str
    action: str
    requested: bool
    inflight: bool
    completed: bool

    @property
    def state(self) -> str:
        return COMPLETED if self.completed else INFLIGHT if self.inflight else REQUESTED


@dataclass(frozen=True)
class Commit:
    """A completed write (commit, deltacommit or replacecommit) with its metadata."""

    instant: Instant
    metadata: CommitMetadata


@dataclass(frozen=True)
class SliceRows:
    """The latest file slice of a file group with its live rows (after merging its logs)."""

    slice: FileSlice
    rows: int


@dataclass(frozen=True)
class RollbackResult:
    instant: str
    action: str
    files_deleted: int


class Table:
    def __init__(self, path: str, options: Mapping[str, str] | None = None):
        self.options = {str(k): "" if v is None else str(v) for k, v in (options or {}).items()}
        lowered = {k.lower(): v for k, v in self.options.items()}
        self.storage = Storage(str(path), StorageOptions.from_options(lowered))
        self.path = str(path)
        self.config: TableConfig = read_table_config(self.storage)  # a clear error if there is no table

    @staticmethod
    def of(config: ReadConfig) -> Table:
        """The table a parsed read (a Spark read's options) names, with its S3 settings."""
        table = Table.__new__(Table)
        table.options, table.path, table.storage = {}, config.path, config.storage()
        table.config = read_table_config(table.storage)
        return table

    def __repr__(self) -> str:
        return f"Table({self.path!r}, {self.config.table_type})"

    @property
    def table_type(self) -> str:
        return self.config.table_type

    @property
    def merge_on_read(self) -> bool:
        return self.config.table_type == MERGE_ON_READ

    def schema(self, as_of: str | None = None) -> pa.Schema:
        """The table's columns (meta columns first), now or as of an instant."""
        return self.open_snapshot(as_of).schema

    # ---------------------------------------------------------------------------------- reads

    def snapshot(
        self,
        columns: list[str] | None = None,
        filters: Sequence[Any] | None = None,
        partition_filter: Callable[[str], bool] | None = None,
        as_of: str | None = None,
        read_optimized: bool = False,
        skip_merge: bool = False,
    ) -> pa.Table:
        """The latest snapshot, or with `as_of` (any format Hudi's `as.of.instant` takes) the
        snapshot as of that instant (time travel).  `filters`: see table/read/snapshot.py."""
        return read_snapshot(
            self.storage, columns, partition_filter, as_of, read_optimized, filters, skip_merge
        )

    def incremental(
        self,
        begin: str,
        end: str | None = None,
        columns: list[str] | None = None,
        partition_filter: Callable[[str], bool] | None = None,
        fallback_full_scan: bool = False,
        path_glob: str | None = None,
    ) -> pa.Table:
        """The latest state of the records written in (begin, end] (Hudi's incremental query)."""
        return read_incremental(self.storage, begin, end, fallback_full_scan=fallback_full_scan,
                                path_glob=path_glob, columns=columns, partition_filter=partition_filter)  # fmt: skip

    def changes(self, begin: str, end: str | None = None) -> pa.Table:
        """The change feed of (begin, end]: one row per inserted, updated or deleted record with its
        before and after images (Hudi's CDC query, table/read/cdc.py)."""
        return read_cdc(self.storage, begin, end)

    def read(self, options: Mapping[str, str] | None = None, **kwargs: Any) -> pa.Table:
        """The read Hudi's read options ask for (the table's, then `options`): the snapshot (as of
        `as.of.instant`, read optimized, skip_merge), an incremental query or a change feed.
        `kwargs`: `columns`, `partition_filter`, and for snapshots `filters`."""
        cfg = ReadConfig.from_options({**self.options, **(options or {})}, path=self.path)
        if cfg.cdc:
            if kwargs:
                raise HoodieConfigError(f"A change feed (incremental.format=cdc) takes no {sorted(kwargs)}.")
            assert cfg.begin_instant is not None, "ReadConfig requires it"
            return self.changes(cfg.begin_instant, cfg.end_instant)
        if cfg.incremental:
            unknown = set(kwargs) - {"columns", "partition_filter"}
            if unknown:
                raise HoodieConfigError(
                    f"An incremental read takes columns and partition_filter, not {sorted(unknown)}."
                )
            assert cfg.begin_instant is not None, "ReadConfig requires it"
            return self.incremental(cfg.begin_instant, cfg.end_instant, fallback_full_scan=cfg.fallback_full_scan,
                                    path_glob=cfg.path_glob, **kwargs)  # fmt: skip
        settings = {
            "as_of": cfg.as_of_instant,
            "read_optimized": cfg.read_optimized,
            "skip_merge": cfg.skip_merge,
        }
        return self.snapshot(**{**settings, **kwargs})

    def open_snapshot(
        self, as_of: str | None = None, read_optimized: bool = False, skip_merge: bool = False, timeline=None
    ) -> Snapshot:
        """The snapshot as a plan (its schema, instant and the files its tasks read), for engines
        that plan a read in one place and read its files in others (table/client/scans.py)."""
        return Snapshot.open(self.storage, as_of, read_optimized, timeline=timeline, skip_merge=skip_merge)

    # ------------------------------------------------------------------------ timeline and files

    def timeline(self) -> ActiveTimeline:
        """The active timeline now (every state file of every instant)."""
        return ActiveTimeline.load(self.storage)

    def history(self, archived: bool = False) -> list[InstantHistory]:
        """One entry per instant time of the active (or archived) timeline, oldest first."""
        if archived:
            states = [e.instant for e in load_archived_timeline(self.storage)]
        else:
            states = list(self.timeline().instants)
        by_time: dict[str, list[Instant]] = {}
        for inst in states:
            by_time.setdefault(inst.timestamp, []).append(inst)
        return [_history(ts, found) for ts, found in sorted(by_time.items())]

    def commits(self) -> list[Commit]:
        """The completed writes of the active timeline, oldest first, with their metadata."""
        timeline = self.timeline()
        return [Commit(i, timeline.commit_metadata(i)) for i in timeline.completed()]

    def commit(self, instant: str) -> Commit:
        timeline = self.timeline()
        match = [i for i in timeline.completed() if i.timestamp == instant]
        if not match:
            raise HoodieTableError(
                f"no completed write instant {instant} on the active timeline of {self.path}"
            )
        return Commit(match[0], timeline.commit_metadata(match[0]))

    def file_groups(self) -> list[FileGroup]:
        """Every committed file group with all of its file slices (the cleaner's view: replaced
        groups too, until they are cleaned)."""
        timeline = self.timeline()
        return committed_file_groups(FileSystemView.load(self.storage, timeline).listing, timeline)

    def replaced_file_groups(self) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the replacecommit that replaced the file group."""
        return replacing_instants(self.storage, self.timeline())

    def latest_file_slices(self) -> list[FileSlice]:
        """The latest committed file slice of every visible file group."""
        view = FileSystemView.load(self.storage, self.timeline())
        return [sl for fg in view.file_groups() if (sl := fg.latest_slice) is not None]

    def base_file_rows(self, sl: FileSlice) -> int:
        """The rows of a slice's base file (its footer's count; 0 without one)."""
        return count_rows(self.storage, sl.base_file.path) if sl.base_file else 0

    def live_rows(self) -> list[SliceRows]:
        """The file slices a snapshot reads, each with the rows it holds for readers: a base file's
        rows from its footer, a slice with logs merged first (a merge-on-read table's updates and
        deletes are in its logs)."""
        snap = self.open_snapshot()
        out = []
        for sl in snap.file_slices():
            # a slice with logs is merged (the row count of an empty projection), else its footer says
            rows = snap.read_ref(slice_ref(sl), []).num_rows if sl.log_files else self.base_file_rows(sl)
            out.append(SliceRows(sl, rows))
        return out

    # ------------------------------------------------------------- row-level changes (table/dml/)

    def merge(
        self,
        source: Any,
        predicate: str,
        source_alias: str = "source",
        target_alias: str = "target",
        options: Mapping[str, str] | None = None,
        merge_schema: bool = False,
    ) -> TableMerger:
        """MERGE the `source` rows (a pyarrow Table, RecordBatch or RecordBatchReader, or a Spark
        DataFrame) into this table, as delta-rs's `DeltaTable.merge`: `predicate` (SQL) must equate
        the target's record key fields with source expressions; add `when_*` clauses to the
        returned builder, then `execute()`.  `merge_schema`: the source's columns the table lacks
        are added to it by `when_*_all` clauses.  One upsert instant (docs/design/table-dml.md)."""
        return TableMerger(
            self.write_config(options), write_read_changes, source, predicate, source_alias, target_alias,
            merge_schema=merge_schema,
        )  # fmt: skip

    def update(
        self,
        updates: Mapping[str, str],
        predicate: str | None = None,
        options: Mapping[str, str] | None = None,
        spark: Any = None,
    ) -> dict[str, int]:
        """UPDATE the rows `predicate` (SQL over the table's columns; every row without one)
        selects, setting each column of `updates` to its SQL expression; one upsert instant.
        `spark` (a SparkSession): as one Spark job, a task per file slice the condition does not
        rule out; else in this process."""
        return self._by_condition(dml.update_dml(updates, predicate), options, spark)

    def delete(
        self, predicate: str | None = None, options: Mapping[str, str] | None = None, spark: Any = None
    ) -> dict[str, int]:
        """DELETE the rows `predicate` (SQL over the table's columns; every row without one)
        selects; one upsert instant of deletes.  `spark`: as for `update`."""
        return self._by_condition(dml.delete_dml(predicate), options, spark)

    def _by_condition(
        self, change: ConditionDml, options: Mapping[str, str] | None, spark: Any
    ) -> dict[str, int]:
        cfg = self.write_config(options)
        if spark is not None:
            return condition_tasks.run_in_engine(spark, cfg, change)
        return dml.run_condition(cfg, write_read_changes, change)

    # --------------------------------------------------------------------------- table services

    def write_config(self, options: Mapping[str, str] | None = None) -> WriteConfig:
        """The services' settings: the table's write options (its read options left out), then `options`."""
        mine = {k: v for k, v in self.options.items() if not is_read_option(k)}
        return WriteConfig.from_options({**mine, **(options or {})}, path=self.path)

    def compact(
        self, options: Mapping[str, str] | None = None, runner=None, wait_for_writes_s: float = 0.0
    ) -> list[compaction.CompactionResult]:
        """Finish pending compactions of this merge-on-read table, then schedule and execute one of
        every file slice with logs.  `runner` executes the operations (default: a thread pool)."""
        return compaction.run(self.write_config(options), runner=runner,
                              wait_for_writes_s=wait_for_writes_s)  # fmt: skip

    def schedule_compaction(self, options: Mapping[str, str] | None = None) -> str | None:
        """Write a compaction plan of every file slice with logs; its instant, or None."""
        return compaction.schedule(self.storage, self.write_config(options), force=True)

    def cluster(
        self, options: Mapping[str, str] | None = None, runner=None
    ) -> clustering.ClusteringResult | None:
        """Resume a clustering whose runner is gone, or schedule and execute one; None when there
        is nothing to cluster.  `runner` executes the groups (default: a thread pool)."""
        return clustering.run(self.write_config(options), runner=runner)

    def clean(self, options: Mapping[str, str] | None = None) -> CleanResult:
        return run_clean(self.storage, CleanConfig.of(self.write_config(options)))

    def archive(self, options: Mapping[str, str] | None = None) -> ArchivalResult:
        return run_archival(self.storage, ArchivalConfig.of(self.write_config(options)))

    def savepoint(
        self, instant: str | None = None, user: str | None = None, comments: str = ""
    ) -> SavepointInfo:
        """Pin the table as of a completed commit (default: the latest)."""
        return create_savepoint(self.storage, instant, user, comments)

    def savepoints(self) -> list[SavepointInfo]:
        return list_savepoints(self.storage)

    def delete_savepoint(self, instant: str) -> None:
        delete_savepoint(self.storage, instant)

    def restore(self, savepoint_instant: str) -> list[str]:
        """Roll the table back to a savepoint; the instants rolled back.  Stop its writers first."""
        return restore(self.storage, savepoint_instant, self.write_config())

    def rollback(self, instant: str) -> RollbackResult:
        """Roll back a pending write whose writer is gone (its heartbeat expired).  Completed
        commits are undone by `restore`, not here."""
        timeline = self.timeline()
        states = timeline.states_of(instant)
        if not states:
            raise HoodieTableError(f"no instant {instant} on the active timeline of {self.path}")
        if any(s.is_completed for s in states):
            raise HoodieTableError(
                f"{states[0].action} {instant} is completed: only pending instants are rolled back here. Help: "
                "to undo completed commits, restore a savepoint (hoodie-sink savepoint / restore)"
            )
        cfg = self.write_config()
        if is_alive(self.storage, instant, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses):
            raise HoodieTableError(
                f"{states[0].action} {instant} has a live heartbeat: its writer is still at work"
            )
        pending = max(states, key=lambda s: s.state == INFLIGHT)
        deleted = rollback_instant(self.storage, pending, after=timeline.last_instant_time())
        return RollbackResult(instant, pending.action, deleted)

    def validate(self, global_keys: bool = False) -> list[validation.Violation]:
        """The table's invariants checked (unique keys, bloom footers, files the timeline names,
        orphans); every violation found, none when the table is sound."""
        return validation.validate_table(self.storage, global_keys=global_keys)


def _history(ts: str, states: list[Instant]) -> InstantHistory:
    kinds = {s.state for s in states}
    pending = [s.action for s in states if not s.is_completed]
    done = [s.action for s in states if s.is_completed]
    # the completed state of a compaction is a commit: the entry keeps the compaction's name
    action = pending[0] if pending and (not done or _COMPLETES_AS.get(pending[0]) == done[0]) else done[0]
    return InstantHistory(ts, action, REQUESTED in kinds, INFLIGHT in kinds, COMPLETED in kinds)
