"""The write client: the one entry to a write, for the Spark adapter and for Python callers.

A write is: `begin` an instant (driver), `write_task` for each task's share of the input,
then `complete` (the commit, then the table services that run inline after a commit) or
`abort`.  `write` runs all of it in one process over Arrow data, without Spark.
Like Hudi's write client it sits above the write path and the table services, so neither
needs the other.  The rest of this package: `table.py`, the `Table` (reads, timeline, services);
`scans.py`, reads planned on a driver and run in tasks; `jobs.py` and `micro_batches.py`, what the
Spark adapter's service jobs and streaming sink need.  Engines come in here, never through
`format/` or `write/`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

import pyarrow as pa

from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieConfigError, HoodieWriteConflictError
from hoodie_sink.table.catalog.hive_sync import sync_after_commit
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metrics import WriteMetrics, append_metrics_line, sum_task_phases
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services.after_commit import ServicesReport, run_after_commit
from hoodie_sink.table.write import write_path
from hoodie_sink.table.write.context import TaskIdentity, TaskResult, WriteContext
from hoodie_sink.table.write.coordinator import abort
from hoodie_sink.table.write.write_path import REPORT_KEY, begin, write_task

__all__ = ["TaskIdentity", "TaskResult", "WriteContext", "abort", "begin", "complete", "write", "write_task"]

log = logging.getLogger("hoodie_sink.table.write.write_path")  # the report logger (datasource/report_log.py)
DataLike: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


def complete(
    ctx: WriteContext, results: list[TaskResult], extra: dict[str, str] | None = None, label: str = "write"
) -> CommitMetadata:
    """Commit the write, then run the table services due inline (clustering, cleaning, archival);
    logs (and with hoodie.sink.metrics.file, appends) the write's per-phase metrics."""
    started, cpu_started = time.monotonic(), time.process_time()
    metadata = write_path.complete(ctx, results, extra, label)
    commit_ms = int((time.monotonic() - started) * 1000)
    commit_cpu_ms = int((time.process_time() - cpu_started) * 1000)
    services = run_after_commit(ctx.config)
    metrics = write_metrics(ctx, results, metadata, commit_ms, services, commit_cpu_ms)
    log.info("%s", metrics.summary())
    if ctx.config.metrics_file:
        try:
            append_metrics_line(ctx.config.metrics_file, metrics, ctx.config.storage_options)
        except OSError as e:  # the commit stands: a metrics sink must never fail a write
            log.warning("hoodie: could not append metrics to %s: %s", ctx.config.metrics_file, e)
    if ctx.config.meta_sync is not None:
        # after the commit and its services, as Hudi's writer syncs; a failure is raised naming
        # the instant that stands (docs/hudi/hive-sync.md#what-our-sync-does)
        sync_after_commit(
            ctx.config.meta_sync.with_base_path(ctx.config.path), ctx.config.storage(), ctx.instant
        )
    return metadata


def write_metrics(
    ctx: WriteContext,
    results: list[TaskResult],
    md: CommitMetadata,
    commit_ms: int,
    services: ServicesReport,
    commit_cpu_ms: int = 0,
) -> WriteMetrics:
    tasks, slowest = sum_task_phases([r.phase_ms for r in results])
    report = json.loads(md.extra_metadata.get(REPORT_KEY, "{}"))
    merge_ms = int((report.get("phasesMs") or {}).get("merge", 0))
    t = md.totals()
    return WriteMetrics(
        instant=ctx.instant,
        action=ctx.action,
        operation=md.operation_type,
        tasks=len(results),
        rows_in=sum(r.num_records for r in results),
        inserts=t["numInserts"],
        updates=t["numUpdateWrites"],
        deletes=t["numDeletes"],
        bytes_written=t["totalWriteBytes"],
        files_added=sum(1 for s in md.write_stats if s.prev_commit in ("null", "")),
        files_updated=sum(1 for s in md.write_stats if s.prev_commit not in ("null", "")),
        phases_ms={**tasks, "merge": merge_ms, "commit": max(0, commit_ms - merge_ms), **services.phases_ms},
        slowest_task_ms=slowest,
        total_ms=int((time.time() - ctx.started_at) * 1000),
        commit_cpu_ms=commit_cpu_ms,
    )


def _batches(data: DataLike) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    if isinstance(data, pa.Table):
        return data.schema, data.to_batches()
    if isinstance(data, pa.RecordBatch):
        return data.schema, [data]
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, data
    batches = list(data)
    if not batches:
        raise HoodieConfigError("write() got no record batches; pass a pyarrow Table to write an empty one.")
    return batches[0].schema, batches


def write(data: DataLike, path: str, options: Mapping[str, str], mode: str = "append") -> CommitMetadata:
    if mode not in ("append", "overwrite"):
        raise HoodieConfigError(f"mode must be 'append' or 'overwrite', got '{mode}'.")
    schema, batches = _batches(data)
    cfg = WriteConfig.from_options(options, path=path, overwrite=(mode == "overwrite"))
    if cfg.foreach_batch_id is not None:
        raise HoodieConfigError(
            "Option 'hoodie.sink.streaming.batch.id' is set by hoodie_sink.spark.micro_batches on Spark batch "
            "writes; hoodie_sink.write does not record micro-batch checkpoints. Help: remove it."
        )
    if cfg.conflict_retries and isinstance(batches, pa.RecordBatchReader):
        batches = list(batches)  # a retry writes the input again: keep it
    for attempt in range(cfg.conflict_retries + 1):
        try:
            return _write_once(cfg, schema, batches)
        except HoodieWriteConflictError:
            # Hudi's hoodie.write.num.retries.on.conflict.failures: the whole write again, on a
            # new instant planned on the timeline that now holds the other writer's commit
            if attempt == cfg.conflict_retries:
                raise
            log.info("hoodie: write conflict on %s, retry %d of %d", path, attempt + 1, cfg.conflict_retries)
    raise AssertionError("unreachable")


# extraMetadata for a commit, asked for just before it (a stream's checkpoint map must be read
# from the timeline as it is then); raising aborts the write.
CommitExtra: TypeAlias = Callable[[], dict[str, str]]


def write_read_changes(
    cfg: WriteConfig, data: pa.Table, read_on: Timeline, extra: CommitExtra | None = None
) -> CommitMetadata:
    """Write changes computed from the table as `read_on` showed it (the Table's MERGE, UPDATE and
    DELETE), in one process: one instant; under OCC a write completed since that read which changed
    the same file groups is a conflict (no retry here: the changes must be computed again).
    `extra`: what the commit adds to its extraMetadata (a micro-batch's checkpoint)."""
    return _write_once(cfg, data.schema, data.to_batches(), read_on=read_on, extra=extra)


def _write_once(
    cfg: WriteConfig,
    schema: pa.Schema,
    batches,
    read_on: Timeline | None = None,
    extra: CommitExtra | None = None,
) -> CommitMetadata:
    ctx = begin(cfg, schema, read_on=read_on)
    try:
        result = write_task(ctx, TaskIdentity(only_task=True), batches)
        return complete(ctx, [result], extra() if extra is not None else None)
    except HoodieCommitStateUnknown:
        raise  # the commit may have landed: its files must stay (the next writer's rollback decides)
    except BaseException:
        abort(ctx, settle_seconds=0)  # one process: no straggling tasks
        raise
