"""Which task writer and which commit steps an operation uses (shared by Spark and the client)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa

from hoodie_sink.table import commit
from hoodie_sink.table.append_task import AppendTask
from hoodie_sink.table.commit import WriteContext
from hoodie_sink.table.metadata import CommitMetadata
from hoodie_sink.table.reconcile import reconcile
from hoodie_sink.table.services import clustering
from hoodie_sink.table.upsert_task import UpsertTask
from hoodie_sink.table.write_task import InsertTask, TaskIdentity, TaskResult

# Operations that go through the bucket assigner (index, small files, claims).
ASSIGNED_OPERATIONS = ("upsert", "delete", "insert")


def write_task(ctx: WriteContext, task: TaskIdentity, batches: Iterable[pa.RecordBatch]) -> TaskResult:
    if ctx.config.operation in ASSIGNED_OPERATIONS:
        return UpsertTask(ctx, task).write(batches)
    if ctx.config.operation == "append":
        return AppendTask(ctx, task).write(batches)
    return InsertTask(ctx, task).write(batches)


def complete(ctx: WriteContext, results: list[TaskResult], extra: dict[str, str] | None = None) -> CommitMetadata:
    """Reconcile what the tasks could not settle alone, then publish the commit."""
    if ctx.config.operation in ASSIGNED_OPERATIONS:
        rec = reconcile(ctx, results)
        stats = rec.stats
        counts = {
            "contendedFileGroups": rec.merged_file_groups,
            "stagedRecords": rec.staged_rows,
            "duplicateInsertsRemoved": rec.duplicate_inserts,
            "deletesOfMissingKeys": rec.missing_deletes,
        }
        extra = {**(extra or {}), "hoodie.sink.write.stats": json.dumps(counts)}
    else:
        stats = [s for r in results for s in r.write_stats]
    metadata = commit.complete(ctx, stats, extra)
    clustering.maybe_run_inline(ctx.config)
    return metadata
