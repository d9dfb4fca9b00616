"""Clustering: rewrite small file groups into large, sorted ones, as one replacecommit.

Timeline (Hudi RFC-19): `<t>.replacecommit.requested` carries the plan (Avro, operationType
CLUSTER); execution moves it to inflight, writes the new file groups under instant t (with
markers, as any write) and completes `<t>.replacecommit` whose partitionToReplaceFileIds
names the input file groups.  Readers see the old file groups until that file appears and the
new ones from then on: never both, never neither.

Runs: `run` executes the groups of a plan with a callable (a local thread pool by default; the
Spark adapter passes one that runs each group as a Spark task).  While it runs, a heartbeat
(`services/heartbeat.py`) keeps writers from rolling the instant back; a clustering whose
runner died is rolled back to its plan (files deleted, inflight removed) by the next writer or
runner and executed again by the next run.

Concurrency with writers: appends only add file groups, so they never conflict.  An upsert or
delete that would change a file group under pending clustering is refused
(`hoodie.clustering.updates.strategy=reject`, Hudi's default): see `conflicts.py`.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import pyarrow as pa

from hoodie_sink.errors import HoodieCommitError, HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.clustering_plan import (
    CLUSTER,
    ClusteringGroup,
    InputSlice,
    clustering_plan,
    file_groups_under_clustering,
    from_avro_plan,
    pending_clusterings,
    to_avro_plan,
)
from hoodie_sink.table.format.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from hoodie_sink.table.format.file_group import (
    BaseFile,
    FileSlice,
    LogFile,
    file_id,
    new_file_id_prefix,
    write_token,
)
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.heartbeat import (
    Heartbeat,
    beat_is_alive,
    last_beat,
    takeover_claim_path,
)
from hoodie_sink.table.format.markers import delete_markers, list_marked_files
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.properties import MERGE_ON_READ, read_table_config
from hoodie_sink.table.format.replace_metadata import encode_requested_replace
from hoodie_sink.table.format.schema import META_COLUMNS, avro_to_arrow, storage_schema, with_meta_fields
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.instant import INFLIGHT, REPLACE_COMMIT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.metadata.removal import remove_metadata_table
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.base_file import read_base_file
from hoodie_sink.table.read.file_slice import CommittedInstants, read_file_slice
from hoodie_sink.table.read.record_index_change import commit_change, task_change, task_logs
from hoodie_sink.table.service_lock import service_lock
from hoodie_sink.table.services.clustering_strategy import ClusteringConfig, plan_groups
from hoodie_sink.table.services.compaction import file_groups_under_compaction
from hoodie_sink.table.services.row_order import sort_indices
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions
from hoodie_sink.table.write.base_file_writer import (
    BaseFileWriter,
    ParquetSettings,
    RollingBaseFileWriter,
    file_schema,
    parquet_settings_of,
)
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.rollback import delete_files, rollback_failed_clustering

log = logging.getLogger(__name__)
COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY = META_COLUMNS[0], META_COLUMNS[1], META_COLUMNS[2]


# ---------------------------------------------------------------------------------- schedule


def schedule(storage: Storage, cfg: WriteConfig) -> str | None:
    """Write a new plan as `<t>.replacecommit.requested`; None when there is nothing to cluster."""
    # one scheduler at a time (an inline and an async runner, say): two plans made from the same
    # listing would both take the same small files, and both replacecommits would publish their rows
    with service_lock(storage, "clustering.schedule", "schedule a clustering"):
        return _schedule_locked(storage, cfg)


def _schedule_locked(storage: Storage, cfg: WriteConfig) -> str | None:
    table = read_table_config(storage)
    # a table recording a BUCKET layout (docs/hudi/bucket-layout.md) is refused whatever the options say
    if index_of(cfg.index_type).bucketed or table.bucket_layout:
        raise HoodieConfigError(
            "Clustering with 'hoodie.index.type'='BUCKET' is not supported: the new file groups would lie "
            "outside the hash buckets (as in Hudi, whose simple bucket index refuses clustering too)."
        )
    timeline = Timeline.load(storage)  # under the lock: every earlier plan is on it
    pending = set(file_groups_under_clustering(storage, timeline))
    view = FileSystemView.load(storage, timeline)
    base_files = view.latest_base_files()
    logs: dict[tuple[str, str], tuple[str, ...]] = {}
    if table.table_type == MERGE_ON_READ:
        # a merge-on-read slice is clustered with its logs merged in; file groups a pending
        # compaction holds are left to it
        pending |= set(file_groups_under_compaction(storage, timeline))
        logs = {
            (sl.partition_path, sl.file_id): tuple(lf.path for lf in sl.log_files)
            for sl in view.read_slices()
        }
    clustering = ClusteringConfig.of(cfg)
    groups = plan_groups(base_files, pending, clustering)
    if logs:
        groups = [with_logs(g, logs) for g in groups]
    if not groups:
        return None
    plan = to_avro_plan(groups, clustering.strategy, storage.base_uri)
    content = encode_requested_replace(CLUSTER, plan)
    # Beat before the plan appears: a runner looking for dead plans must not take this one.
    instant = (
        TimelineStore(storage)
        .create_requested_at_new_time(
            Timeline.load(storage).last_instant_time(),
            REPLACE_COMMIT,
            content,
            before=lambda ts: Heartbeat(storage, ts, cfg.heartbeat_interval_ms / 1000).beat(),
        )
        .timestamp
    )
    log.info("hoodie: scheduled clustering %s: %d groups, %d files", instant, len(groups),
             sum(len(g.slices) for g in groups))  # fmt: skip
    return instant


# ----------------------------------------------------------------------------------- execute


@dataclass(frozen=True)
class ClusteringJob:
    """What a task needs to execute one group of a plan.  Picklable."""

    path: str
    instant: str
    data_schema: pa.Schema
    avro_with_meta: str
    settings: ParquetSettings
    sort_columns: tuple[str, ...]
    layout: str
    preserve_metadata: bool
    storage_options: StorageOptions = field(default_factory=StorageOptions)
    record_index: bool = False  # the table keeps a record index: tasks gather its change


def execute_group(
    job: ClusteringJob, index: int, group: ClusteringGroup, token: str | None = None
) -> list[WriteStat]:
    """Read a group's slices, sort, write new file groups at the target size (bounded by the
    group: every row of it is in memory once, sorted)."""
    storage = Storage(job.path, job.storage_options)
    guard = InstantGuard(storage, job.instant, REPLACE_COMMIT)
    guard.check()
    schema = file_schema(job.data_schema)
    tables = [_read_slice(storage, s, schema, job) for s in group.slices]
    rows = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    del tables
    if job.sort_columns:
        missing = [c for c in job.sort_columns if c not in rows.column_names]
        if missing:
            raise HoodieTableError(
                f"Option 'hoodie.clustering.plan.strategy.sort.columns' names {', '.join(missing)}, not "
                f"columns of the table at {job.path}."
            )
        rows = rows.take(sort_indices(rows, job.sort_columns, job.layout))
    keys = rows.column(RECORD_KEY).combine_chunks()
    times = rows.column(COMMIT_TIME).combine_chunks() if job.preserve_metadata else None
    seqnos = rows.column(COMMIT_SEQNO).combine_chunks() if job.preserve_metadata else None
    data = rows.drop_columns(list(META_COLUMNS))
    token = token or write_token(index, 0, 0)
    prefix = new_file_id_prefix()
    counter = iter(range(1 << 30))

    def new_writer() -> BaseFileWriter:
        return BaseFileWriter(
            storage, group.partition_path, file_id(prefix, next(counter)), token, job.instant, index,
            schema, job.avro_with_meta, job.settings, guard=guard,
        )  # fmt: skip

    stats = RollingBaseFileWriter(new_writer, job.settings).write_all(data, keys, times, seqnos)
    if job.record_index:  # every key moves to the new files (read/record_index_change.py)
        task_change(storage, job.instant, f"{token}-{index}", stats, {}, clustering=True)
    return stats


def _read_slice(storage: Storage, s: InputSlice, schema: pa.Schema, job: ClusteringJob) -> pa.Table:
    """A slice's rows: its base file, merged with its log files in a merge-on-read table."""
    if not s.log_paths:
        return read_base_file(storage, s.path, schema)
    base = BaseFile.parse(*posixpath.split(s.path)) if s.path else None
    logs = [lf for p in s.log_paths if (lf := LogFile.parse(*posixpath.split(p))) is not None]
    sl = FileSlice(s.partition_path, s.file_id, base.instant if base else logs[0].base_instant, base, logs)
    timeline = Timeline.load(storage)
    table = read_table_config(storage)
    return read_file_slice(
        storage, sl, schema, MergeRule.of_table(table), CommittedInstants(timeline, job.instant)
    )


def with_logs(group: ClusteringGroup, logs: dict[tuple[str, str], tuple[str, ...]]) -> ClusteringGroup:
    slices = tuple(replace(s, log_paths=logs.get((s.partition_path, s.file_id), ())) for s in group.slices)
    return replace(group, slices=slices)


GroupRunner = Callable[[ClusteringJob, Sequence[ClusteringGroup]], list[list[WriteStat]]]


def local_runner(threads: int) -> GroupRunner:
    """Groups in a thread pool of this process (inline clustering, the engine API)."""

    def run(job: ClusteringJob, groups: Sequence[ClusteringGroup]) -> list[list[WriteStat]]:
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(groups)))) as pool:
            return list(pool.map(lambda ig: execute_group(job, ig[0], ig[1]), enumerate(groups)))

    return run


@dataclass
class ClusteringResult:
    instant: str
    groups: int
    input_files: int
    output_files: int
    rows: int
    seconds: float


def execute(
    storage: Storage,
    cfg: WriteConfig,
    instant: str,
    runner: GroupRunner | None = None,
    takeover: bool = False,
) -> ClusteringResult:
    """Run a scheduled clustering to completion (or leave it to be rolled back on failure).

    The heartbeat runs from the first step: a runner that loads the plan (or, `takeover`, rolls a
    dead run back to its plan) before it beats would look dead to other runners for that long."""
    with Heartbeat(storage, instant, cfg.heartbeat_interval_ms / 1000):
        if takeover:
            rollback_failed_clustering(storage, Instant(instant, REPLACE_COMMIT, REQUESTED), cfg, force=True)
        return _execute(storage, cfg, instant, runner)


def _execute(
    storage: Storage, cfg: WriteConfig, instant: str, runner: GroupRunner | None
) -> ClusteringResult:
    started = time.monotonic()
    store = TimelineStore(storage)
    requested = Instant(instant, REPLACE_COMMIT, REQUESTED)
    job, groups, avro = _job_of_plan(storage, cfg, requested)
    inflight = requested.with_state(INFLIGHT)
    if not storage.exists(store.path(inflight)):
        store.transition_to_inflight(requested, b"")
    per_group = (runner or local_runner(cfg.merge_threads))(job, groups)
    stats = [s for group_stats in per_group for s in group_stats]
    reported = {s.path for s in stats}
    orphans = [p for p, _ in list_marked_files(storage, instant) if p not in reported]
    delete_files(storage, orphans)  # files of failed task attempts
    _check_still_ours(storage, store, inflight, stats)
    md = CommitMetadata(
        operation_type=CLUSTER,
        write_stats=stats,
        extra_metadata={SCHEMA_KEY: avro},
        partition_to_replace_file_ids=_replaced_file_ids(groups),
    )
    keeps = metadata_sync.keeps_record_index(storage)
    rli = commit_change(storage, instant, md, task_logs(storage, instant)) if keeps else None
    metadata_sync.on_commit(storage, instant, md, rli)
    store.complete(inflight, md.to_bytes())
    delete_markers(storage, instant)
    result = ClusteringResult(
        instant=instant,
        groups=len(groups),
        input_files=sum(len(g.slices) for g in groups),
        output_files=len(stats),
        rows=sum(s.num_writes for s in stats),
        seconds=time.monotonic() - started,
    )
    log.info("hoodie: clustering %s done: %s", instant, result)
    return result


def _job_of_plan(
    storage: Storage, cfg: WriteConfig, requested: Instant
) -> tuple[ClusteringJob, list[ClusteringGroup], str]:
    """The job that executes a stored plan (ours or Java's), its groups, and the table schema."""
    plan = clustering_plan(storage, requested)
    if plan is None:
        raise HoodieTableError(
            f"Instant {requested.timestamp} on {storage.base_uri} is not a pending clustering."
        )
    groups, params, preserve = from_avro_plan(plan, storage.base_uri)
    table = read_table_config(storage)
    avro = latest_schema(storage, Timeline.load(storage), table)
    if avro is None:
        raise HoodieTableError(f"The table at {storage.base_uri} has no schema yet: nothing to cluster.")
    avro_json = json.loads(avro)
    target_bytes = int(
        params.get("hoodie.clustering.plan.strategy.target.file.max.bytes", cfg.clustering_target_file_bytes)
    )
    job = ClusteringJob(
        path=cfg.path,
        storage_options=cfg.storage_options,
        instant=requested.timestamp,
        data_schema=storage_schema(avro_to_arrow(avro_json)),
        avro_with_meta=json.dumps(with_meta_fields(avro_json), separators=(",", ":")),
        # the table decides whether the new files carry meta fields (virtual keys: they do not)
        settings=parquet_settings_of(
            cfg.with_(max_file_size=target_bytes, populate_meta_fields=table.populate_meta_fields)
        ),
        sort_columns=tuple(
            c for c in params.get("hoodie.clustering.plan.strategy.sort.columns", "").split(",") if c
        ),
        layout=params.get("hoodie.layout.optimize.strategy", cfg.layout_strategy),
        preserve_metadata=preserve,
        record_index=metadata_sync.keeps_record_index(storage),
    )
    return job, groups, avro


def _check_still_ours(
    storage: Storage, store: TimelineStore, inflight: Instant, stats: list[WriteStat]
) -> None:
    """Complete only what is still ours: a writer that (wrongly) took this run for dead has
    deleted the inflight file and our files, and replacing the old file groups with missing
    files would lose their rows."""
    missing = [s.path for s in stats if not storage.exists(s.path)]
    if not storage.exists(store.path(inflight)) or missing:
        raise HoodieCommitError(
            f"Clustering {inflight.timestamp} on {storage.base_uri} was rolled back while it ran "
            f"(inflight file gone or {len(missing)} of its files missing); nothing was committed. Help: raise "
            "hoodie.client.heartbeat.interval_in_ms if the runner cannot beat in time."
        )


def _replaced_file_ids(groups: list[ClusteringGroup]) -> dict[str, list[str]]:
    replaced: dict[str, list[str]] = {}
    for g in groups:
        for s in g.slices:
            replaced.setdefault(s.partition_path, []).append(s.file_id)
    return {p: sorted(ids) for p, ids in replaced.items()}


def run(cfg: WriteConfig, runner: GroupRunner | None = None) -> ClusteringResult | None:
    """Execute the oldest pending clustering whose runner is gone, or schedule and execute a
    new one.  None when there is nothing to cluster."""
    storage = cfg.storage()
    if not cfg.keeps_metadata_table(metadata_sync.is_kept(storage)):
        # a replacecommit that Hudi's metadata table does not list would be invisible to Java readers
        remove_metadata_table(storage)
    timeline = Timeline.load(storage)
    for ts in sorted(pending_clusterings(storage, timeline)):
        beat = last_beat(storage, ts)
        if beat_is_alive(beat, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses):
            continue  # its runner is at work
        # Take the dead run over: one claim per dead heartbeat, so two runners never both resume it.
        if not storage.create_if_absent(takeover_claim_path(ts, beat)):
            continue
        # Its runner may have completed it between our timeline load and the heartbeat check (a
        # runner removes its heartbeat after the completed file is in place): look again.
        if ts not in pending_clusterings(storage, Timeline.load(storage)):
            continue
        Heartbeat(storage, ts, cfg.heartbeat_interval_ms / 1000).beat()  # writers: hands off
        return execute(storage, cfg, ts, runner, takeover=True)
    instant = schedule(storage, cfg)
    if instant is None:
        return None
    return execute(storage, cfg, instant, runner)


# ------------------------------------------------------------------------------------ inline


def commits_since_last_clustering(storage: Storage, timeline: Timeline) -> int:
    """Completed writes after the latest completed clustering (all of them if there is none)."""
    store = TimelineStore(storage)
    done = timeline.completed()
    for i in range(len(done) - 1, -1, -1):
        inst = done[i]
        if (
            inst.action == REPLACE_COMMIT
            and store.read_json(inst).get("operationType", "").upper() == CLUSTER
        ):
            return len(done) - 1 - i
    return len(done)


def maybe_run_inline(cfg: WriteConfig) -> ClusteringResult | None:
    """hoodie.clustering.inline: after every `inline.max.commits` writes, cluster right here (in
    the committing process, groups in a thread pool) before the write call returns."""
    clustering = ClusteringConfig.of(cfg)
    if not clustering.inline:
        return None
    storage = cfg.storage()
    if commits_since_last_clustering(storage, Timeline.load(storage)) < max(1, clustering.max_commits):
        return None
    try:
        return run(cfg)
    except Exception:
        # The write itself is committed; a failed clustering is rolled back to its plan by the
        # next writer or run (heartbeat expiry) and executed again at the next trigger.
        log.exception("hoodie: inline clustering of %s failed; the write's commit stands", cfg.path)
        return None
