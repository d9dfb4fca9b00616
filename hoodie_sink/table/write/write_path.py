"""Which task writer and which commit steps an operation uses (shared by Spark and the client).

Both ends keep the write's heartbeat (format/heartbeat.py) while they work: the driver from begin
to the commit or abort (`begin`), a task while it writes, the commit while it merges at commit
and publishes.  The commit reports what the write did
in one place for every writer (engine API, Spark batch, each micro-batch): one INFO line on the
driver side and `hoodie.sink.write.report` in the commit's extraMetadata.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from hoodie_sink.errors import HoodieCommitStateUnknown
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import join_partition
from hoodie_sink.table.format.heartbeat import Heartbeat, keep_beating, release_heartbeat
from hoodie_sink.table.format.list_elements import check_no_null_elements, has_lists
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.format.write_operation import APPEND, ASSIGNED
from hoodie_sink.table.metrics import sum_task_phases
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.record_index_change import task_change
from hoodie_sink.table.write import coordinator
from hoodie_sink.table.write.append_task import AppendTask
from hoodie_sink.table.write.bulk_insert_task import BulkInsertTask
from hoodie_sink.table.write.commit_merge import merge_at_commit
from hoodie_sink.table.write.context import TaskIdentity, TaskResult, WriteContext
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.merge import refuse_null_ordering
from hoodie_sink.table.write.routing.checks import checked_routed_stats
from hoodie_sink.table.write.routing.new_file_groups import NewFileGroupTask
from hoodie_sink.table.write.routing.task import RoutedTask
from hoodie_sink.table.write.upsert_task import UpsertTask

log = logging.getLogger(__name__)

REPORT_KEY = "hoodie.sink.write.report"  # extraMetadata: what the commit's write stats do not say


def _heartbeat(ctx: WriteContext) -> Heartbeat:
    # owner=False: other tasks may still work on the instant; the commit or abort ends the
    # heartbeat.  `running`: a straggler's beat after an abort must not leave a heartbeat behind.
    return Heartbeat(
        ctx.storage,
        ctx.instant,
        ctx.config.heartbeat_interval_ms / 1000,
        owner=False,
        running=lambda: _instant_running(ctx),
    )


def begin(
    cfg: WriteConfig, input_schema: pa.Schema, routed: bool = False, read_on: Timeline | None = None
) -> WriteContext:
    """Begin the write on the driver side and keep its heartbeat from here to the commit or
    abort: between begin and the first task (Spark may queue tasks behind other jobs), and
    between tasks, nobody else beats.  Every beat within `interval`, well inside Java's expiry
    (`interval x tolerable misses`).  A micro-batch begins in a task instead
    (streaming.begin_batch, no keeper there): that task beats while it writes.
    `routed`: the input carries routes (write/routing/), and `input_schema` its user columns."""
    ctx = coordinator.begin(cfg, input_schema, routed=routed, read_on=read_on)
    keep_beating(ctx.storage, ctx.instant, cfg.heartbeat_interval_ms / 1000, lambda: _instant_running(ctx))
    return ctx


def _instant_running(ctx: WriteContext) -> bool:
    """Inflight and not completed: a commit or an abort by another process ends the keeper."""
    return InstantGuard(ctx.storage, ctx.instant, ctx.action).alive()


def write_task(ctx: WriteContext, task: TaskIdentity, batches: Iterable[pa.RecordBatch]) -> TaskResult:
    if not ctx.config.allow_null_array_elements and has_lists(ctx.data_schema):
        batches = _without_null_elements(batches)
    ordering = ordered_input_field(ctx)
    if ordering is not None:
        batches = _with_ordering_values(batches, ordering, ctx.plan.operation.name)
    with _heartbeat(ctx):
        result = _write_task(ctx, task, batches)
        if ctx.config.record_index_enable:  # its bulk runs here, in the task, not at the commit
            previous = _replaced_base_files(ctx)
            storage, token = ctx.storage, task.token
            result.record_index_log = task_change(storage, ctx.instant, token, result.write_stats, previous)
        return result


def _write_task(ctx: WriteContext, task: TaskIdentity, batches: Iterable[pa.RecordBatch]) -> TaskResult:
    if ctx.routed_on is not None:
        routed = RoutedTask if ctx.plan.operation.writer == ASSIGNED else NewFileGroupTask
        return routed(ctx, task).write(batches)
    if ctx.plan.operation.writer == ASSIGNED:
        return UpsertTask(ctx, task).write(batches)
    if ctx.plan.operation.writer == APPEND:
        return AppendTask(ctx, task).write(batches)
    return BulkInsertTask(ctx, task).write(batches)


def _replaced_base_files(ctx: WriteContext) -> dict[tuple[str, str], str]:
    """(partition, file id) -> base file of its slice as the write began, for the slices a task can
    read the keys of alone (a base file without logs); the commit reads the others."""
    out = {(bf.partition_path, bf.file_id): bf.path for bf in ctx.base_files}
    for sl in ctx.log_slices:
        key = (sl.partition_path, sl.file_id)
        if sl.log_names or sl.base_name is None:
            out.pop(key, None)
        else:
            out[key] = join_partition(sl.partition_path, sl.base_name)
    return out


def ordered_input_field(ctx: WriteContext) -> str | None:
    """The precombine field when this write may not hold a null value in it (docs/hudi/null-ordering.md):
    an upsert compares records by it (Java 0.15 refuses a null there), and a merge-on-read table's
    readers do (Java's fail on a null in a log file; hudi-rs reads a stored null as 0, Java's merge
    as the smallest value: they would disagree).  A copy-on-write insert, bulk_insert or append
    compares nothing and stores nulls, as Java's; the delete operation and keyless writes (whose
    generated keys never meet another record) never compare."""
    field = ctx.plan.merge_rule.ordering_field  # none for the delete operation
    if not field or not ctx.config.record_key_fields:
        return None
    return field if ctx.plan.operation.compares_ordering or ctx.plan.merge_on_read else None


def _with_ordering_values(
    batches: Iterable[pa.RecordBatch], field: str, operation: str
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        refuse_null_ordering(batch, field, operation)
        yield batch


def _without_null_elements(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        check_no_null_elements(batch)
        yield batch


def complete(
    ctx: WriteContext, results: list[TaskResult], extra: dict[str, str] | None = None, label: str = "write"
) -> CommitMetadata:
    """Merge what the tasks could not settle alone, publish the commit, report it.

    `label` names the write in the report line (e.g. "micro-batch 7")."""
    started = time.monotonic()
    try:
        with _heartbeat(ctx):
            metadata = _merge_and_commit(ctx, results, extra)
    except HoodieCommitStateUnknown:
        # Nobody aborts a commit that may have landed: stop beating (the file stays and expires),
        # or this process would keep a failed instant alive and the next writer's rollback, which
        # decides, would never see it dead.
        release_heartbeat(ctx.storage, ctx.instant)
        raise
    log.info("%s", write_report(label, ctx, metadata, time.monotonic() - started))
    return metadata


def write_report(label: str, ctx: WriteContext, md: CommitMetadata, commit_s: float) -> str:
    """The one-line account of a commit, the same for batch writes and micro-batches: the whole
    write's seconds (from begin) and those of its commit step (merge at commit + publish)."""
    t = md.totals()
    report = json.loads(md.extra_metadata.get(REPORT_KEY, "{}"))
    return (
        f"hoodie: {label} -> {ctx.action} {ctx.instant} on {ctx.config.path}: {report.get('rowsIn', 0)} rows in, "
        f"{t['numInserts']} inserted, {t['numUpdateWrites']} updated, {t['numDeletes']} deleted, "
        f"{t['numFiles']} files, {t['totalWriteBytes'] / 1e6:.1f} MB, {time.time() - ctx.started_at:.2f}s "
        f"(commit {commit_s:.2f}s)"
    )


def _merge_and_commit(
    ctx: WriteContext, results: list[TaskResult], extra: dict[str, str] | None
) -> CommitMetadata:
    extra = dict(extra or {})
    merge_started = time.monotonic()
    if ctx.routed_on is not None:
        stats = checked_routed_stats(ctx, results)
        extra["hoodie.sink.write.stats"] = json.dumps(
            {"deletesOfMissingKeys": sum(getattr(r, "num_missing_deletes", 0) for r in results)}
        )
    elif ctx.plan.operation.writer == ASSIGNED:
        rec = merge_at_commit(ctx, results)
        stats = rec.stats
        counts = {
            "contendedFileGroups": rec.merged_file_groups,
            "stagedRecords": rec.staged_rows,
            "duplicateInsertsRemoved": rec.duplicate_inserts,
            "deletesOfMissingKeys": rec.missing_deletes,
        }
        extra["hoodie.sink.write.stats"] = json.dumps(counts)
    else:
        stats = [s for r in results for s in r.write_stats]
    # rows the tasks received (inserted/updated/deleted/files/bytes are in the write stats) and
    # the time from begin to the commit point
    tasks, _ = sum_task_phases([r.phase_ms for r in results])
    extra[REPORT_KEY] = json.dumps(
        {
            "rowsIn": sum(r.num_records for r in results),
            "durationMs": int((time.time() - ctx.started_at) * 1000),
            # task sums (tag, write) and the commit-time merge; metrics.py has the full account
            "phasesMs": {**tasks, "merge": int((time.monotonic() - merge_started) * 1000)},
        }
    )
    logs = [r.record_index_log for r in results if r.record_index_log]
    return coordinator.complete(ctx, stats, extra, record_index_logs=logs)
