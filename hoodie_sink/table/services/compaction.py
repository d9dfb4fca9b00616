"""Compaction of merge-on-read tables: plan, then execute (docs/hudi/services.md#compaction).

Schedule: when the trigger (`hoodie.compact.inline.trigger.strategy`) says so, every latest file
slice with log files (outside pending clustering and compaction) becomes one operation of an Avro
HoodieCompactionPlan in `<c>.compaction.requested`, at a new instant c.  A plan is only made when
no write is pending (Java's guard: every earlier write must be complete), so every log block
it covers is committed before c; the check and the plan's publication are fenced against a write
that starts meanwhile in another process (write/compaction_fence.py), whose logs would otherwise
go to a slice the plan compacts without them.

Execute: `<c>.compaction.inflight` (empty), then each slice's base file and logs are merged (the
snapshot merge of read/file_slice.py) into `<fileId>_<token>_<c>.parquet`, rows keeping their
commit time and sequence number (Java's preserve.commit.metadata default), an empty file when the
logs deleted every record (docs/hudi/compaction-of-empty-slices.md); then `<c>.commit`
with operation COMPACT and `compacted: true`.  Readers see the old slices until that file
appears and the new ones from then on.  The old slices stay for the cleaner.

A compaction that died is executed again from its plan by the next run: the files it had written
(named by its markers) are deleted first.  Writes that arrive while a plan is pending go to a new
file slice at c (the plan's file groups get logs with base instant c; see write/log_writer.py);
readers merge those logs with the slice being compacted until the compaction completes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.clustering_plan import file_groups_under_clustering
from hoodie_sink.table.format.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from hoodie_sink.table.format.compaction_plan import (
    CompactionOperation,
    decode_compaction_plan,
    encode_compaction_plan,
)
from hoodie_sink.table.format.file_group import BaseFile, FileSlice, LogFile, write_token
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.markers import delete_markers, list_marked_files
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.properties import MERGE_ON_READ, read_table_config
from hoodie_sink.table.format.schema import META_COLUMNS, avro_to_arrow, storage_schema, with_meta_fields
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.instant import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INFLIGHT,
    REQUESTED,
    WRITE_ACTIONS,
    Instant,
    parse_instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.file_slice import CommittedInstants, LogStats, read_file_slice
from hoodie_sink.table.service_lock import service_lock
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions
from hoodie_sink.table.write.base_file_writer import (
    BaseFileWriter,
    ParquetSettings,
    file_schema,
    parquet_settings_of,
)
from hoodie_sink.table.write.compaction_fence import SCHEDULING_LOCK
from hoodie_sink.table.write.rollback import delete_files

log = logging.getLogger(__name__)
COMPACT = "COMPACT"
_COMPACTION_STAGE = 999998  # stage id of compaction write tokens: never a Spark task's


@dataclass
class CompactionResult:
    instant: str
    file_groups: int = 0
    rows: int = 0
    log_files: int = 0
    log_bytes: int = 0
    duration_ms: int = 0
    stats: list[WriteStat] = field(default_factory=list)


# ------------------------------------------------------------------------------------ planning


def deltacommits_since_compaction(timeline: Timeline) -> tuple[int, str | None]:
    """(completed deltacommits after the last completed compaction, the time that count starts)."""
    compactions = {i.timestamp for i in timeline.instants if i.action == COMPACTION}
    last = None
    for inst in timeline.completed((COMMIT,)):
        if inst.timestamp in compactions:
            last = inst.timestamp
    deltas = [i for i in timeline.completed((DELTA_COMMIT,)) if last is None or i.timestamp > last]
    start = last or (deltas[0].timestamp if deltas else None)
    return len(deltas), start


@dataclass(frozen=True)
class CompactionConfig:
    """The compaction options, taken from the write options once (`CompactionConfig.of`)."""

    storage_options: StorageOptions
    settings: ParquetSettings  # how the compacted base files are written
    trigger: str = "NUM_COMMITS"  # hoodie.compact.inline.trigger.strategy
    max_delta_commits: int = 5
    max_delta_seconds: int = 3600
    merge_threads: int = 1
    inline: bool = False

    @staticmethod
    def of(cfg: WriteConfig) -> CompactionConfig:
        return CompactionConfig(cfg.storage_options, parquet_settings_of(cfg), cfg.compact_trigger,
                                cfg.compact_max_delta_commits, cfg.compact_max_delta_seconds, cfg.merge_threads,
                                cfg.compact_inline)  # fmt: skip


def compaction_due(cfg: CompactionConfig, timeline: Timeline, now_ms: int | None = None) -> bool:
    """Java's triggers (ScheduleCompactionActionExecutor.needCompact)."""
    count, since = deltacommits_since_compaction(timeline)
    if cfg.trigger == "NUM_COMMITS_AFTER_LAST_REQUEST":
        requested = [i.timestamp for i in timeline.instants if i.action == COMPACTION]
        last = max(requested) if requested else None
        count = sum(1 for i in timeline.completed((DELTA_COMMIT,)) if last is None or i.timestamp > last)
    by_count = count >= max(1, cfg.max_delta_commits)
    elapsed_s = 0.0
    if since is not None:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        elapsed_s = (now - parse_instant(since).timestamp() * 1000) / 1000
    by_time = count > 0 and elapsed_s >= cfg.max_delta_seconds
    return {
        "NUM_COMMITS": by_count,
        "NUM_COMMITS_AFTER_LAST_REQUEST": by_count,
        "TIME_ELAPSED": by_time,
        "NUM_OR_TIME": by_count or by_time,
        "NUM_AND_TIME": by_count and by_time,
    }[cfg.trigger]


def plan_operations(view: FileSystemView, excluded: set[tuple[str, str]]) -> list[CompactionOperation]:
    """Every latest slice with log files, largest logs first (Java's LogFileSizeBasedCompactionStrategy
    with its default thresholds keeps them all)."""
    ops = []
    for fg in view.file_groups():
        sl = fg.latest_slice
        if sl is None or not sl.log_files or (fg.partition_path, fg.file_id) in excluded:
            continue
        ops.append(CompactionOperation.of_slice(sl))
    return sorted(ops, key=lambda op: (-op.log_bytes, op.partition_path, op.file_id))


def pending_compactions(timeline: Timeline) -> list[Instant]:
    return timeline.pending((COMPACTION,))


def file_groups_under_compaction(storage: Storage, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending compaction instant whose plan holds the file group."""
    out: dict[tuple[str, str], str] = {}
    store = TimelineStore(storage)
    for inst in pending_compactions(timeline):
        plan = decode_compaction_plan(storage.read_bytes(store.path(inst.with_state(REQUESTED))))
        out.update(((op.partition_path, op.file_id), inst.timestamp) for op in plan)
    return out


def schedule(
    storage: Storage, cfg: WriteConfig, force: bool = False, wait_for_writes_s: float = 0.0
) -> str | None:
    """Write a compaction plan if one is due (or `force`) and there is something to compact; its
    instant, or None.  A plan needs a moment without writes in flight (a log a pending write adds
    to a planned slice would be missed): up to `wait_for_writes_s` is spent waiting for one (a
    stream leaves gaps between micro-batches).  The check and the plan's publication happen under
    the scheduling lock, which a write that starts meanwhile waits for before it chooses its file
    slices (write/compaction_fence.py)."""
    _check_merge_on_read(storage)
    timeline = Timeline.load(storage)
    if not force and not compaction_due(CompactionConfig.of(cfg), timeline):
        return None
    deadline = time.monotonic() + wait_for_writes_s
    while True:
        if not timeline.pending(WRITE_ACTIONS):
            # not held while waiting: a write that starts waits for it, and would be waited for
            with service_lock(storage, SCHEDULING_LOCK, "schedule a compaction"):
                timeline = Timeline.load(storage)
                if not timeline.pending(WRITE_ACTIONS):
                    return _plan(storage, timeline)
        if time.monotonic() >= deadline:
            log.info("hoodie: not scheduling a compaction of %s: a write is in flight", storage.base_uri)
            return None
        time.sleep(0.05)
        timeline = Timeline.load(storage)


def _plan(storage: Storage, timeline: Timeline) -> str | None:
    """List the latest slices and publish the plan of those with logs, at an instant later than
    every instant of `timeline` (Java's rule: no write pending before it, no commit after it)."""
    excluded = set(file_groups_under_clustering(storage, timeline)) | set(
        file_groups_under_compaction(storage, timeline)
    )
    ops = plan_operations(FileSystemView.load(storage, timeline), excluded)
    if not ops:
        return None
    zone = read_table_config(storage).timeline_zone
    requested = TimelineStore(storage, zone=zone).create_requested_at_new_time(
        timeline.last_instant_time(), COMPACTION, encode_compaction_plan(ops)
    )
    log.info(
        "hoodie: scheduled compaction %s of %d file slices on %s",
        requested.timestamp,
        len(ops),
        storage.base_uri,
    )
    return requested.timestamp


def _check_merge_on_read(storage: Storage) -> None:
    if read_table_config(storage).table_type != MERGE_ON_READ:
        raise HoodieConfigError(
            f"Compaction applies to MERGE_ON_READ tables; the table at {storage.base_uri} is COPY_ON_WRITE."
        )


# ----------------------------------------------------------------------------------- execution


@dataclass(frozen=True)
class CompactionJob:
    """What every operation of one compaction needs (picklable: Spark tasks run operations)."""

    path: str
    instant: str
    avro_schema: str  # the table schema without meta fields
    storage_options: StorageOptions
    settings: ParquetSettings
    rule: MergeRule

    @property
    def avro_with_meta(self) -> str:
        return json.dumps(with_meta_fields(json.loads(self.avro_schema)), separators=(",", ":"))


OperationRunner = Callable[[CompactionJob, list[CompactionOperation]], list[WriteStat | None]]


def compact_operation(
    job: CompactionJob, index: int, op: CompactionOperation, token: str
) -> WriteStat | None:
    """Merge one file slice into a base file of the compaction instant."""
    storage = Storage(job.path, job.storage_options)
    schema = file_schema(storage_schema(avro_to_arrow(json.loads(job.avro_schema))))
    timeline = Timeline.load(storage)

    committed = CommittedInstants(timeline, before=job.instant)
    scan = LogStats()
    rows = read_file_slice(storage, _slice_of(op), schema, job.rule, committed, stats=scan)
    if op.base_file is None and scan.records == 0:
        return None  # no base file and no log record counts (all rolled back): nothing to write, as Java
    # A slice whose records were all deleted still gets its (empty) base file, as Java writes it:
    # the old base file stops being the latest (read_optimized shows no deleted row) and the slice
    # has no logs left to plan again (docs/hudi/compaction-of-empty-slices.md).
    writer = BaseFileWriter(
        storage, op.partition_path, op.file_id, token, job.instant, index,
        schema, job.avro_with_meta, job.settings, prev_commit=op.base_instant,
    )  # fmt: skip
    keys = rows.column(META_COLUMNS[2]).combine_chunks()
    data = rows.drop_columns(list(META_COLUMNS))
    stat = writer.write_all(data, keys, rows.column(META_COLUMNS[0]), rows.column(META_COLUMNS[1]))
    stat.num_update_writes = 0
    stat.num_inserts = rows.num_rows
    stat.num_deletes = scan.deletes
    stat.extra.update(
        {
            "totalLogRecords": scan.records,
            "totalLogFilesCompacted": scan.files,
            "totalLogSizeCompacted": scan.bytes,
            "totalLogBlocks": scan.blocks,
            "totalRollbackBlocks": scan.rollback_blocks,
        }
    )
    return stat


def local_runner(threads: int) -> OperationRunner:
    def run(job: CompactionJob, ops: list[CompactionOperation]) -> list[WriteStat | None]:
        def one(item: tuple[int, CompactionOperation]) -> WriteStat | None:
            i, op = item
            return compact_operation(job, i, op, write_token(i, _COMPACTION_STAGE, 0))

        with ThreadPoolExecutor(
            max_workers=max(1, min(threads, len(ops))), thread_name_prefix="hoodie-compact"
        ) as pool:
            return list(pool.map(one, enumerate(ops)))

    return run


def execute(
    storage: Storage, instant: str, cfg: WriteConfig, runner: OperationRunner | None = None
) -> CompactionResult:
    """Execute the pending compaction `instant` to completion (again from its plan if an earlier
    run died)."""
    started = time.monotonic()
    timeline = Timeline.load(storage)
    states = [i for i in timeline.instants if i.timestamp == instant]
    if any(i.action == COMMIT and i.is_completed for i in states):
        return CompactionResult(instant)  # done already
    if not any(i.action == COMPACTION for i in states):
        raise HoodieTableError(f"No compaction {instant} on the timeline of {storage.base_uri}.")
    store = TimelineStore(storage)
    requested = Instant(instant, COMPACTION, REQUESTED)
    ops = decode_compaction_plan(storage.read_bytes(store.path(requested)))
    leftovers = [p for p, _ in list_marked_files(storage, instant)]
    if leftovers:  # a run that died: its files go, the plan is executed again
        log.info("hoodie: compaction %s: deleting %d files of an earlier attempt", instant, len(leftovers))
        delete_files(storage, leftovers)
        delete_markers(storage, instant)
    if not any(i.state == INFLIGHT for i in states):
        store.transition_to_inflight(requested, b"")
    table = read_table_config(storage)
    avro = latest_schema(storage, timeline, table)
    if avro is None:
        raise HoodieTableError(f"The table at {storage.base_uri} has no schema to compact with.")
    compaction = CompactionConfig.of(cfg)
    job = CompactionJob(storage.base_uri, instant, avro, compaction.storage_options, compaction.settings,
                        MergeRule.of_table(table))  # fmt: skip
    runner = runner or local_runner(compaction.merge_threads)
    stats = [s for s in runner(job, ops) if s is not None]
    reported = {s.path for s in stats}
    orphans = [p for p, _ in list_marked_files(storage, instant) if p not in reported]
    if orphans:  # files of failed or speculative task attempts
        delete_files(storage, orphans)
    md = CommitMetadata(
        operation_type=COMPACT, write_stats=stats, extra_metadata={SCHEMA_KEY: avro}, compacted=True
    )
    metadata_sync.on_commit(storage, instant, md)
    # the compaction completes as a commit at its own instant (layout 1 keeps the compaction files)
    store.complete(Instant(instant, COMMIT, INFLIGHT), md.to_bytes())
    delete_markers(storage, instant)
    result = CompactionResult(instant, stats=stats, file_groups=len(ops))
    result.rows = sum(s.num_writes for s in stats)
    result.log_files = sum(int(s.extra.get("totalLogFilesCompacted", 0)) for s in stats)
    result.log_bytes = sum(int(s.extra.get("totalLogSizeCompacted", 0)) for s in stats)
    result.duration_ms = int((time.monotonic() - started) * 1000)
    log.info("hoodie: compaction %s of %s: %d file slices, %d rows, %d log files in %.1fs", instant, storage.base_uri,
             result.file_groups, result.rows, result.log_files, result.duration_ms / 1000)  # fmt: skip
    return result


def _slice_of(op: CompactionOperation) -> FileSlice:
    base = BaseFile.parse(op.partition_path, op.base_file) if op.base_file else None
    logs = []
    for name in op.log_files:
        lf = LogFile.parse(op.partition_path, name)
        if lf is None:
            raise HoodieTableError(f"Compaction plan names {name}, which is not a log file name.")
        logs.append(lf)
    return FileSlice(op.partition_path, op.file_id, op.base_instant, base_file=base, log_files=logs)


def run(
    cfg: WriteConfig,
    force: bool = True,
    runner: OperationRunner | None = None,
    wait_for_writes_s: float = 0.0,
) -> list[CompactionResult]:
    """Finish pending compactions, then schedule one (if due, or with `force` whenever there are
    logs) and execute it.  One runner per table at a time (a lock renewed while it works)."""
    storage = cfg.storage()
    _check_merge_on_read(storage)
    with service_lock(storage, "compaction", "compact"):
        pending = pending_compactions(Timeline.load(storage))
        out = [execute(storage, inst.timestamp, cfg, runner) for inst in pending]
        instant = schedule(storage, cfg, force=force, wait_for_writes_s=wait_for_writes_s)
        if instant is not None:
            out.append(execute(storage, instant, cfg, runner))
    return out


def maybe_run_inline(cfg: WriteConfig) -> list[CompactionResult]:
    """After a commit on a merge-on-read table: compact when due (hoodie.compact.inline)."""
    if not CompactionConfig.of(cfg).inline:
        return []
    storage = cfg.storage()
    if read_table_config(storage).table_type != MERGE_ON_READ:
        return []
    return run(cfg, force=False)


def maybe_schedule(cfg: WriteConfig) -> str | None:
    """hoodie.datasource.compaction.async.enable, right after a commit (no write of this writer in
    flight): plan a compaction when due; `execute_pending` runs it in the background."""
    storage = cfg.storage()
    if read_table_config(storage).table_type != MERGE_ON_READ or pending_compactions(Timeline.load(storage)):
        return None  # one plan at a time: the pending one is being executed
    with service_lock(storage, "compaction", "schedule a compaction", wait_seconds=5.0):
        return schedule(storage, cfg)


def execute_pending(cfg: WriteConfig) -> list[CompactionResult]:
    storage = cfg.storage()
    with service_lock(storage, "compaction", "compact"):
        return [execute(storage, inst.timestamp, cfg) for inst in pending_compactions(Timeline.load(storage))]
