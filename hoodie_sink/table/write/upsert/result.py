"""What an upsert task hands its commit: written file stats, staged changes and key logs.

Claims, staged changes and key logs live in the instant's work folder, not beside its markers:
Java's rollback parses every file of a marker folder as a marker and fails on anything else.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.markers import work_dir
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.context import TaskIdentity, TaskResult
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.merge import KEY, KIND, ORDER, PART


@dataclass
class StagedChanges:
    """Changes for a file group that another writer owns, parked on storage for the commit."""

    partition_path: str
    file_id: str
    path: str  # relative to the base path, under the instant's work_dir (never its marker folder)
    rows: int
    owner: bool = False  # changes the owning task already merged (kept for re-merges)
    # merge-on-read: the changes include inserts packed into this small file group, so the commit
    # rewrites its base file (Java's merge handle) instead of adding a log file
    rewrite: bool = False


@dataclass
class UpsertResult(TaskResult):
    staged: list[StagedChanges] = field(default_factory=list)
    owned: list[StagedChanges] = field(default_factory=list)
    inserted_key_logs: list[str] = field(default_factory=list)
    num_missing_deletes: int = 0
    # file groups this task moved keys out of (global index): their change sets are all kept, so
    # the commit can tell which copy of a moved key wins; and logs of the moved keys
    moved_from: list[str] = field(default_factory=list)
    moved_key_logs: list[str] = field(default_factory=list)
    moved_change_logs: list[str] = field(default_factory=list)  # final change sets of those file groups


def staging_dir(instant: str) -> str:
    return f"{work_dir(instant)}/staging"


class TaskOutputs:
    """The task's result, filled by the final flush's threads under one lock, and the files of
    the work folder it names (staged changes, inserted, moved and change logs)."""

    def __init__(self, storage: Storage, instant: str, task: TaskIdentity, guard: InstantGuard,
                 ordering_field: str | None, rewrite: set[str]):  # fmt: skip
        self.storage = storage
        self.instant = instant
        self.token = task.token
        self.guard = guard
        self.ordering_field = ordering_field
        self.rewrite = rewrite  # merge-on-read file groups the commit rewrites (shared with the task)
        self.result = UpsertResult(instant, task.partition_id, task.attempt_number)
        self._logs = 0
        self._lock = threading.Lock()

    def add_stats(self, *stats: WriteStat, missing_deletes: int = 0) -> None:
        with self._lock:
            self.result.write_stats.extend(stats)
            self.result.num_missing_deletes += missing_deletes

    def stage(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, owner: bool = False
    ) -> None:
        self.guard.check()
        rel = f"{staging_dir(self.instant)}/{fid}/{self.token}-{flush_no}.parquet"
        with self.storage.open_output(rel) as out:
            pq.write_table(changes, out, compression="lz4")
        self.guard.wrote(rel)
        staged = StagedChanges(partition_path, fid, rel, changes.num_rows, owner, rewrite=fid in self.rewrite)
        with self._lock:
            (self.result.owned if owner else self.result.staged).append(staged)

    def log_inserted_keys(self, inserts: pa.Table, fids: np.ndarray) -> None:
        """Record (key, partition, order, file) of new keys for the commit's duplicate check."""
        cols = {KEY: inserts.column(KEY), PART: inserts.column(PART), ORDER: inserts.column(ORDER),
                KIND: inserts.column(KIND), "_hf": pa.array(fids, pa.string())}  # fmt: skip
        if self.ordering_field:
            cols[self.ordering_field] = inserts.column(self.ordering_field)
        rel = self.write_log("inserted", pa.table(cols))
        with self._lock:
            self.result.inserted_key_logs.append(rel)

    def log_moved_keys(self, keys: pa.Array) -> None:
        rel = self.write_log("moved", pa.table({KEY: keys}))
        with self._lock:
            self.result.moved_key_logs.append(rel)

    def log_final_changes(self, changes: pa.Table) -> None:
        """A file group keys moved out of: the commit needs every change of theirs to know which
        copy wins; the change set is final (nothing re-merges it), so its ranking columns do."""
        cols = [c for c in (KEY, PART, ORDER, KIND, self.ordering_field) if c in changes.column_names]
        rel = self.write_log("moves", changes.select(cols))
        with self._lock:
            self.result.moved_change_logs.append(rel)

    def write_log(self, kind: str, table: pa.Table) -> str:
        with self._lock:
            self._logs += 1
            log_no = self._logs
        rel = f"{work_dir(self.instant)}/{kind}/{self.token}-{log_no}.parquet"
        with self.storage.open_output(rel) as out:
            pq.write_table(table, out, compression="lz4")
        self.guard.wrote(rel)
        return rel
