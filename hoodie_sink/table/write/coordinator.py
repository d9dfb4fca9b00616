"""The coordinator: start an instant, complete it atomically, or roll it back.

One write = one instant.  `begin` runs before any data file exists (driver side): it opens or
creates the table, rolls back what failed writers left, checks the input schema against the
table and publishes `<t>.<action>.requested` and the inflight file.  Tasks then write files,
each announced by a marker.  `complete` deletes files that no successful task attempt
reported (failed or speculative attempts), then publishes the completed file: the commit
point.  `abort` deletes everything the markers name, then the pending timeline files.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from dataclasses import replace

import pyarrow as pa

from hoodie_sink.errors import (
    HoodieCommitError,
    HoodieCommitStateUnknown,
    HoodieConfigError,
    HoodieKeyError,
    HoodieSchemaError,
    HoodieTableError,
)
from hoodie_sink.table.format.clustering_plan import file_groups_under_clustering
from hoodie_sink.table.format.commit_metadata import (
    SCHEMA_KEY,
    CommitMetadata,
    WriteStat,
    inflight_workload_json,
)
from hoodie_sink.table.format.debezium import OP_COLUMN, check_debezium_schema
from hoodie_sink.table.format.file_group import PARTITION_METAFILE, BaseFile, SliceFiles
from hoodie_sink.table.format.fs_view import FileSystemView, latest_slice_files
from hoodie_sink.table.format.heartbeat import Heartbeat, stop_heartbeat
from hoodie_sink.table.format.keygen import check_key_columns
from hoodie_sink.table.format.markers import delete_markers, list_marked_files
from hoodie_sink.table.format.metadata_table import has_files_partition
from hoodie_sink.table.format.properties import MERGE_ON_READ, TableConfig, read_table_config
from hoodie_sink.table.format.replace_metadata import encode_requested_replace
from hoodie_sink.table.format.schema import (
    META_COLUMNS,
    arrow_to_avro,
    avro_to_arrow,
    check_compatible,
    check_ordering_field,
    evolve_schema,
    storage_schema,
    with_meta_fields,
)
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.instant import (
    COMPACTION,
    COMPLETED,
    INFLIGHT,
    REPLACE_COMMIT,
    REQUESTED,
    ROLLBACK,
    WRITE_ACTIONS,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import META_DIR, ActiveTimeline, Timeline, TimelineStore
from hoodie_sink.table.format.write_operation import TABLE, WriteOperation
from hoodie_sink.table.index.bloom_index import BloomIndex
from hoodie_sink.table.index.protocol import Index
from hoodie_sink.table.index.record_index import RecordIndex, check_usable
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.metadata.bootstrap import settle as settle_metadata_table
from hoodie_sink.table.metadata.record_index_init import RecordIndexInit
from hoodie_sink.table.metadata.removal import remove_metadata_table
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.bloom_filter_files import bloom_filters_init
from hoodie_sink.table.read.column_stats_files import column_stats_init
from hoodie_sink.table.read.file_slice import CommittedInstants
from hoodie_sink.table.read.record_index_change import commit_change
from hoodie_sink.table.read.record_index_keys import live_entries
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.bucket_layout import settle_bucket_layout
from hoodie_sink.table.write.compaction_fence import wait_while_compaction_is_scheduled
from hoodie_sink.table.write.conflicts import check_clustering_conflicts, check_concurrent_writes
from hoodie_sink.table.write.context import WriteContext
from hoodie_sink.table.write.locking import check_table_lock, table_lock
from hoodie_sink.table.write.plan import WritePlan, keygen_config_of
from hoodie_sink.table.write.rollback import delete_files, rollback_failed_writes, rollback_instant
from hoodie_sink.table.write.table_setup import (
    check_not_foreign,
    check_partial_update,
    create_table,
    new_table_config,
    resolve_with_table,
    table_exists,
)
from hoodie_sink.table.write.upsert.incoming import DML_DELETE

log = logging.getLogger(__name__)


def begin(
    cfg: WriteConfig,
    input_schema: pa.Schema,
    timeline: ActiveTimeline | None = None,
    routed: bool = False,
    read_on: Timeline | None = None,
) -> WriteContext:
    """Start the write's instant.  The timeline is loaded once for all of begin's steps (the
    rollback, the schema, the file groups, the instant time); `timeline` is a load the caller
    has just made of an existing table (the streaming begin read its checkpoints from it).
    `routed`: the input was routed (write/routing/); its tasks check that it was routed on the
    snapshot this write starts from (`WriteContext.routed_on`).  `read_on`: the timeline the
    input was computed from (a MERGE, UPDATE or DELETE read the table first); under OCC, a write
    completed since then that changed one of our file groups is a conflict, as one completed
    since our instant began is."""
    storage = cfg.storage()
    check_table_lock(cfg)
    cfg, table, exists, op, index, data_schema, incoming = _resolve(cfg, storage, input_schema)
    if not exists:
        create_table(storage, table)
    keep_metadata = cfg.keeps_metadata_table(
        exists and has_files_partition(table.extra), new_table=not exists
    )
    if exists and not keep_metadata:
        _drop_metadata_table(storage, table)
    timeline = _roll_back_failed_writes(storage, cfg, timeline if exists else None)
    if keep_metadata:  # kept, built or repaired before our instant exists
        rli = RecordIndexInit(cfg.record_index_sizing(), live_entries) if cfg.record_index_enable else None
        settle_metadata_table(
            storage, timeline, True, cfg.metadata_compact_max_delta_commits, rli, column_stats_init(cfg),
            bloom_filters_init(cfg),
        )  # fmt: skip
    if exists:  # a BUCKET write into a table that does not record its bucket layout
        table = settle_bucket_layout(storage, cfg, table, timeline)
    existing = latest_schema(storage, timeline, table) if exists else None
    data_schema, incoming = _reconcile_schema(cfg, op, table, data_schema, incoming, existing)
    action = op.commit_action(table.table_type == MERGE_ON_READ)
    instant = _publish_instant(storage, cfg, op, table, timeline, action)
    if table.table_type == MERGE_ON_READ and op.keyed and existing:
        instant, timeline = _settle_with_compaction_scheduling(storage, cfg, op, table, action, instant)
    base_files, avg_size, clustering, log_slices = _file_groups_to_assign(
        cfg, op, table, timeline, bool(existing)
    )
    ctx = WriteContext(
        config=cfg,
        plan=WritePlan.of(cfg, op, index, table, avg_size),
        base_files=base_files,
        clustering=clustering,
        log_slices=log_slices,
        log_blocks=CommittedInstants(Timeline(timeline.instants), before=instant) if log_slices else None,
        instant=instant,
        action=action,
        avro_schema=json.dumps(incoming, separators=(",", ":")),
        avro_with_meta=json.dumps(with_meta_fields(incoming), separators=(",", ":")),
        data_schema=data_schema,
        created_table=not exists,
        routed_on=route_fingerprint(op, timeline if exists else None) if routed else None,
        **(_planned_on(read_on if read_on is not None else timeline) if cfg.occ else {}),
    )
    log.info("hoodie: started %s %s on %s (%s)", action, instant, cfg.path, ctx.plan.operation.operation_type)
    return ctx


def routing_context(cfg: WriteConfig, input_schema: pa.Schema, nonce: str) -> tuple[WriteContext, str]:
    """What a routed write's tag stage reads (docs/design/routing.md): the same options, schema
    and file groups `begin` would resolve, on the table's latest snapshot, with nothing written
    and no instant started.  Returns the context (its `instant` is `nonce`: it names the new hash
    buckets of a BUCKET write, alike in every task and retry) and the snapshot's fingerprint, which
    routed write's tasks check against the one its `begin` saw (`WriteContext.routed_on`)."""
    storage = cfg.storage()
    cfg, table, exists, op, index, data_schema, incoming = _resolve(cfg, storage, input_schema)
    timeline = ActiveTimeline.load(storage) if exists else None
    existing = latest_schema(storage, timeline, table) if timeline is not None else None
    data_schema, incoming = _reconcile_schema(cfg, op, table, data_schema, incoming, existing)
    if timeline is not None:
        base_files, avg_size, clustering, log_slices = _file_groups_to_assign(
            cfg, op, table, timeline, bool(existing)
        )
    else:
        base_files, avg_size, clustering, log_slices = (), cfg.record_size_estimate, (), ()
    ctx = WriteContext(
        config=cfg,
        plan=WritePlan.of(cfg, op, index, table, avg_size),
        base_files=base_files,
        clustering=clustering,
        log_slices=log_slices,
        log_blocks=CommittedInstants(Timeline(timeline.instants)) if log_slices and timeline else None,
        instant=nonce,
        action=op.commit_action(table.table_type == MERGE_ON_READ),
        avro_schema=json.dumps(incoming, separators=(",", ":")),
        avro_with_meta=json.dumps(with_meta_fields(incoming), separators=(",", ":")),
        data_schema=data_schema,
    )
    return ctx, route_fingerprint(op, timeline)


def route_fingerprint(op: WriteOperation, timeline: Timeline | None) -> str:
    """What a routed write's routes depend on: the operation they were made for (an upsert's
    routes name existing file groups, an append's only new ones) and the table's snapshot."""
    return f"{op.name}@{snapshot_fingerprint(timeline)}"


def _resolve(
    cfg: WriteConfig, storage: Storage, input_schema: pa.Schema
) -> tuple[WriteConfig, TableConfig, bool, WriteOperation, Index, pa.Schema, dict]:
    """The options resolved against the table (or the one to create), the operation, the index,
    the input's storage schema and its Avro schema.  Everything that can refuse the options or the
    input is checked here, before anything is written."""
    cfg, table, exists = _open_table(cfg, storage)
    op = WriteOperation.of(cfg.operation)
    index = index_of(cfg.index_type)
    if cfg.bloom_use_metadata and isinstance(index, BloomIndex):  # options/write_config.py checked the type
        index = replace(index, use_metadata=True)
    if isinstance(index, RecordIndex):  # its partition must exist and stay kept
        keeps = cfg.keeps_metadata_table(exists and has_files_partition(table.extra), new_table=not exists)
        check_usable(cfg.path, cfg.record_index_enable, keeps)
    _check_input_columns(cfg, op, index, input_schema)
    data_schema = storage_schema(_without_meta(input_schema))
    _check_options_against_input(cfg, op, index, input_schema, data_schema)
    if not exists and op.deletes:
        raise HoodieTableError(f"Nothing to delete: there is no Hudi table at {cfg.path}.")
    return cfg, table, exists, op, index, data_schema, arrow_to_avro(data_schema, table.name)


def snapshot_fingerprint(timeline: Timeline | None) -> str:
    """What a routed write's routes depend on: the latest completed write, and the compactions and
    clusterings planned (a plan moves file slices).  Equal fingerprints: the same file groups, file
    slices and keys.  "" for a table that does not exist yet."""
    if timeline is None:
        return ""
    last = timeline.latest_completed(WRITE_ACTIONS)
    plans = [f"{i.timestamp}.{i.action}" for i in timeline.pending((COMPACTION, REPLACE_COMMIT))]
    return ",".join([last.timestamp if last else "-", *plans])


def _planned_on(timeline: Timeline) -> dict:
    last = timeline.latest_completed(WRITE_ACTIONS)
    pending = tuple(i.timestamp for i in timeline.pending(WRITE_ACTIONS + (COMPACTION,)))
    return {"last_completed": last.timestamp if last else None, "pending_at_begin": pending}


def _open_table(cfg: WriteConfig, storage: Storage) -> tuple[WriteConfig, TableConfig, bool]:
    """The table's settings (those of the table to create, if there is none yet), and the
    options resolved against them."""
    if table_exists(storage):
        table = read_table_config(storage)
        return _missing_columns_as_nulls(resolve_with_table(cfg, table)), table, True
    check_not_foreign(storage)
    table = new_table_config(cfg)
    return (
        _missing_columns_as_nulls(cfg.with_(table_name=table.name, payload_class=table.payload_class)),
        table,
        False,
    )


def _missing_columns_as_nulls(cfg: WriteConfig) -> WriteConfig:
    """A partial update (PartialUpdateAvroPayload) may leave columns out: a missing column is a
    null one, which keeps the stored value (docs/hudi/partial-update.md), as
    hoodie.write.set.null.for.missing.columns writes it.  Checked here, once the options are
    resolved against the table (its payload class and index)."""
    check_partial_update(cfg)
    if cfg.partial_update and not cfg.set_null_for_missing_columns:
        return cfg.with_(set_null_for_missing_columns=True)
    return cfg


def _drop_metadata_table(storage: Storage, table: TableConfig) -> None:
    """Not keeping it (hoodie.metadata.enable=false): Hudi's metadata table, which a Java writer may have built,
    would not list our commit: remove it before the instant exists (metadata/removal.py explains
    the crash windows)."""
    remove_metadata_table(storage, table.extra)


def _roll_back_failed_writes(
    storage: Storage, cfg: WriteConfig, timeline: ActiveTimeline | None
) -> ActiveTimeline:
    """Roll back what failed writers left; the timeline after it.  Loaded again only if it had
    pending writes (a rollback may have removed them): a table with none is listed once."""
    timeline = timeline if timeline is not None else ActiveTimeline.load(storage)
    rollback_failed_writes(storage, timeline, config=cfg)
    if timeline.pending(WRITE_ACTIONS + (ROLLBACK,)):  # rollbacks ran: their instants are new
        timeline = ActiveTimeline.load(storage)
    return timeline


def _reconcile_schema(
    cfg: WriteConfig,
    op: WriteOperation,
    table: TableConfig,
    data_schema: pa.Schema,
    incoming: dict,
    existing: str | None,
) -> tuple[pa.Schema, dict]:
    """The write's storage and Avro schemas against the table's latest schema (if any)."""
    if existing and op.deletes:
        # Deletes need only the key (and partition) columns: the table keeps its schema.
        incoming = json.loads(existing)
        return storage_schema(avro_to_arrow(incoming, force_nullable=True)), incoming
    if existing:
        # Hudi 0.15's deduceWriterSchema: the input's types promoted against the table's, missing
        # columns null-filled when asked, then checked (docs/hudi/schema-evolution.md).
        existing_avro = json.loads(existing)
        data_schema = evolve_schema(
            data_schema,
            existing_avro,
            fill_missing=cfg.set_null_for_missing_columns,
            reconcile=cfg.reconcile_schema,
        )
        incoming = arrow_to_avro(data_schema, table.name)
        check_compatible(existing_avro, incoming)
    return data_schema, incoming


def _publish_instant(
    storage: Storage,
    cfg: WriteConfig,
    op: WriteOperation,
    table: TableConfig,
    timeline: Timeline,
    action: str,
) -> str:
    """Publish `<t>.<action>.requested`, then the inflight file; the new instant time `t`, in the
    table's timeline zone."""
    store = TimelineStore(storage, zone=table.timeline_zone)
    op_type = op.operation_type
    # The first beat comes before the instant appears: a concurrent writer's rollback must never
    # see this instant pending without a live heartbeat (it would take it for a crashed write).
    requested = store.create_requested_at_new_time(
        timeline.last_instant_time(),
        action,
        encode_requested_replace(op_type) if action == REPLACE_COMMIT else b"",
        before=lambda ts: Heartbeat(storage, ts, cfg.heartbeat_interval_ms / 1000).beat(),
    )
    store.transition_to_inflight(requested, inflight_workload_json(op_type))
    return requested.timestamp


def _settle_with_compaction_scheduling(
    storage: Storage, cfg: WriteConfig, op: WriteOperation, table: TableConfig, action: str, instant: str
) -> tuple[str, ActiveTimeline]:
    """The write's instant and the timeline its file slices are chosen from: listed after any
    compaction being scheduled has published its plan, with no compaction later than the
    instant (write/compaction_fence.py; docs/hudi/compaction-scheduling.md).  An instant stamped
    before such a plan appeared is dropped (nothing is written under it yet) and the write starts
    again at a new time after the plan's, so its logs may go to the slice of that compaction."""
    store = TimelineStore(storage, zone=table.timeline_zone)
    for _ in range(_RESTARTS):
        wait_while_compaction_is_scheduled(storage)
        timeline = ActiveTimeline.load(storage)
        later = sorted(
            i.timestamp for i in timeline.instants if i.action == COMPACTION and i.timestamp > instant
        )
        if not later:
            return instant, timeline
        log.info("hoodie: %s %s on %s starts again after compaction %s, planned while it started",
                 action, instant, cfg.path, later[-1])  # fmt: skip
        store.delete_pending(instant, action)
        stop_heartbeat(storage, instant)
        instant = _publish_instant(storage, cfg, op, table, timeline, action)
    raise HoodieTableError(
        f"Could not start a {action} on {storage.base_uri}: compactions were planned while it started, "
        f"{_RESTARTS} times in a row. Nothing was written. Help: retry the write."
    )


_RESTARTS = 10


def _file_groups_to_assign(
    cfg: WriteConfig, op: WriteOperation, table: TableConfig, timeline: ActiveTimeline, has_data: bool
) -> tuple[tuple[BaseFile, ...], int, tuple, tuple[SliceFiles, ...]]:
    """What the bucket assigner needs of the table: its latest base files, the average record
    size, the file groups under pending clustering (only for operations that look them up) and,
    in a merge-on-read table, the latest file slices (updates go to their logs)."""
    # insert packs small files, but not in a merge-on-read table: a file group there may have log
    # files, which rewriting its base file would orphan (Hudi appends such inserts to the logs).
    packs = op.packs_small_files and table.table_type != MERGE_ON_READ
    if not (op.keyed or packs) or not has_data:
        return (), cfg.record_size_estimate, (), ()
    storage = timeline.table_storage
    view = FileSystemView.load(storage, timeline)
    base_files = tuple(view.latest_base_files())
    avg_size = _average_record_size(timeline) or cfg.record_size_estimate
    clustering = tuple(sorted(file_groups_under_clustering(storage, timeline).items()))
    slices = latest_slice_files(view) if table.table_type == MERGE_ON_READ else ()
    return base_files, avg_size, clustering, slices


def _average_record_size(timeline: ActiveTimeline) -> int | None:
    """Bytes per record on storage, from the latest commits (as Hudi sizes new file groups)."""
    for inst in reversed(timeline.completed()[-5:]):
        totals = timeline.commit_metadata(inst).totals()
        if totals["numWrites"] > 0 and totals["totalWriteBytes"] > 0:
            return max(1, totals["totalWriteBytes"] // totals["numWrites"])
    return None


def _without_meta(schema: pa.Schema) -> pa.Schema:
    """The input's data columns: neither Hudi's meta columns nor the DML's delete marker."""
    return pa.schema([f for f in schema if f.name not in META_COLUMNS and f.name != DML_DELETE])


def _check_input_columns(cfg: WriteConfig, op: WriteOperation, index: Index, schema: pa.Schema) -> None:
    names = schema.names
    checks = [("hoodie.datasource.write.recordkey.field", f) for f in cfg.record_key_fields]
    if not op.deletes or index.deletes_need_partition_path:
        checks += [("hoodie.datasource.write.partitionpath.field", f) for f in cfg.partition_fields]
    if cfg.precombine_field and not op.deletes:
        checks.append(("hoodie.datasource.write.precombine.field", cfg.precombine_field))
    for option, column in checks:
        if column not in names:
            raise HoodieKeyError(
                f"Option '{option}' names column '{column}', which the input does not have. "
                f"Input columns: {', '.join(names)}."
            )
    if not cfg.record_key_fields and not op.key_optional:
        raise HoodieKeyError(
            f"No record key for the table at {cfg.path} (operation '{cfg.operation}'). Help: set option "
            "'hoodie.datasource.write.recordkey.field' (alias 'primaryKey') to the key column(s); only the "
            "append operation writes without one (keys are then generated)."
        )
    for f in schema:
        if f.name.startswith("_hoodie_") and f.name not in (
            "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
            "_hoodie_partition_path", "_hoodie_file_name", "_hoodie_is_deleted",
        ) and not (cfg.dml_deletes and op.keyed and f.name == DML_DELETE):  # fmt: skip
            raise HoodieSchemaError(f"Column '{f.name}' uses the reserved prefix '_hoodie_'.")
    if cfg.debezium and op.keyed and not op.deletes:
        check_debezium_schema(schema, cfg.precombine_field, cfg.path, cfg.payload_class or "")
    elif cfg.debezium and not op.keyed and OP_COLUMN in names:
        # Java's insert paths drop a 'd' event (the payload's insert value is empty); ours would
        # store it (docs/hudi/debezium.md#options)
        raise HoodieSchemaError(
            f"Operation '{cfg.operation}' with option 'hoodie.datasource.write.payload.class'="
            f"'{cfg.payload_class}' and column '{OP_COLUMN}' is not supported by hoodie_sink: Apache Hudi drops "
            f"delete events there, which hoodie_sink does not implement. Nothing was written to {cfg.path}. "
            "Help: write Debezium changes with operation 'upsert' (the default)."
        )
    if cfg.partial_update and op.keyed and not op.deletes and "_hoodie_is_deleted" in names:
        # Java 0.15's PartialUpdateAvroPayload treats a soft delete one way in a batch's
        # de-duplication (its flag is merged like any column) and another against the stored
        # record (it deletes whatever the ordering): not implemented (docs/hudi/partial-update.md).
        raise HoodieSchemaError(
            f"Column '_hoodie_is_deleted' (soft deletes) is not supported with option "
            f"'hoodie.datasource.write.payload.class'='{cfg.payload_class}' by hoodie_sink, so nothing was "
            f"written to {cfg.path}. Help: write the deleted keys with operation 'delete', and drop the column."
        )


def _check_options_against_input(
    cfg: WriteConfig, op: WriteOperation, index: Index, schema: pa.Schema, data_schema: pa.Schema
) -> None:
    """Option checks that need the input schema (or the table's settings), done here so
    that no task fails on them after the instant has started."""
    partitions_given = all(f in schema.names for f in cfg.partition_fields)
    check_key_columns(keygen_config_of(cfg), schema, partitions=partitions_given)
    if not op.deletes:
        check_ordering_field(data_schema, cfg.precombine_field)
    if index.bucketed and cfg.bucket_hash_fields:
        # Hudi hashes the hash fields' values parsed out of the record key (BucketIdentifier), and
        # requires them to be record key fields
        outside = [f for f in cfg.bucket_hash_fields if f not in cfg.record_key_fields]
        if outside:
            raise HoodieConfigError(
                f"Option 'hoodie.bucket.index.hash.field' names {', '.join(outside)}, not record key field(s) "
                f"({', '.join(cfg.record_key_fields)}). Help: hash a subset of the record key fields."
            )
    if cfg.clustering_sort_columns and not op.deletes:
        missing = [
            c for c in cfg.clustering_sort_columns if c not in data_schema.names and c not in META_COLUMNS
        ]
        if missing:
            raise HoodieConfigError(
                f"Option 'hoodie.clustering.plan.strategy.sort.columns' names {', '.join(missing)}, not columns "
                f"of the input ({', '.join(data_schema.names)})."
            )
    if cfg.column_stats_enable and cfg.column_stats_columns and not op.deletes:
        # a column the files do not have would get no statistics: data skipping on it would
        # silently never prune, so a misspelt name is refused
        unknown = [
            c for c in cfg.column_stats_columns if c not in data_schema.names and c not in META_COLUMNS
        ]
        if unknown:
            raise HoodieConfigError(
                f"Option 'hoodie.metadata.index.column.stats.column.list' names {', '.join(unknown)}, not "
                f"top-level columns of the input ({', '.join(data_schema.names)}) or meta columns."
            )


def complete(
    ctx: WriteContext,
    stats: list[WriteStat],
    extra_metadata: dict[str, str] | None = None,
    record_index_logs: list[str] | None = None,
) -> CommitMetadata:
    """Finish the write: drop unreported files, then publish the commit atomically.
    `record_index_logs`: the tasks' record-index changes (read/record_index_change.py)."""
    with table_lock(ctx.config):  # optimistic concurrency control: the check and the publication
        return _complete(ctx, stats, extra_metadata, record_index_logs or [])


def _complete(
    ctx: WriteContext,
    stats: list[WriteStat],
    extra_metadata: dict[str, str] | None = None,
    record_index_logs: list[str] | None = None,
) -> CommitMetadata:
    storage = ctx.storage
    timeline = None
    if ctx.config.occ:
        timeline = Timeline.load(storage)  # under the lock: one listing serves both checks
        check_concurrent_writes(ctx, stats, timeline)
    check_clustering_conflicts(ctx, stats, timeline)
    reported = {s.path for s in stats}
    orphans = [p for p, _ in list_marked_files(storage, ctx.instant) if p not in reported]
    if orphans:
        log.info("hoodie: deleting %d files of failed task attempts of %s", len(orphans), ctx.instant)
        delete_files(storage, orphans)

    replaced = None
    if ctx.plan.operation.overwrites:
        replaced = _replaced_file_ids(storage, ctx, stats)
    extra = {SCHEMA_KEY: ctx.avro_schema}
    extra.update(dict(ctx.config.commit_extra))
    extra.update(extra_metadata or {})
    md = CommitMetadata(
        operation_type=ctx.plan.operation.operation_type,
        write_stats=stats,
        extra_metadata=extra,
        partition_to_replace_file_ids=replaced,
    )
    inflight = Instant(ctx.instant, ctx.action, INFLIGHT)
    try:
        keeps = metadata_sync.keeps_record_index(storage)
        rli = commit_change(storage, ctx.instant, md, record_index_logs or []) if keeps else None
        metadata_sync.on_commit(
            storage, ctx.instant, md, rli
        )  # before the data instant completes, never after
    except (OSError, HoodieCommitStateUnknown) as e:
        # Whatever became of the metadata table's deltacommit, the data instant is certainly not
        # complete: the write failed and may be undone (the rollback removes that deltacommit if it
        # landed; docs/hudi/metadata-table-protocol.md).  Not "state unknown", which forbids undoing.
        raise HoodieCommitError(
            f"Could not write the metadata table's deltacommit {ctx.instant} on {storage.base_uri} "
            f"(the data commit was not published): {e}"
        ) from e
    try:
        TimelineStore(storage).complete(inflight, md.to_bytes())
    except HoodieCommitStateUnknown:
        raise  # maybe landed: the caller must not abort
    except Exception as e:
        raise HoodieCommitError(f"Could not publish commit {ctx.instant} on {storage.base_uri}: {e}") from e
    delete_markers(storage, ctx.instant)
    stop_heartbeat(storage, ctx.instant)
    log.info("hoodie: committed %s %s on %s: %s", ctx.action, ctx.instant, ctx.config.path, md.totals())
    return md


def _replaced_file_ids(storage: Storage, ctx: WriteContext, stats: list[WriteStat]) -> dict[str, list[str]]:
    written = {s.partition_path for s in stats}
    new_ids = {(s.partition_path, s.file_id) for s in stats}
    view = FileSystemView.load(storage)
    if ctx.plan.operation.overwrites == TABLE:
        groups = view.file_groups()
    else:
        groups = view.file_groups(partition_filter=lambda p: p in written)
    out: dict[str, list[str]] = {}
    for fg in groups:
        if (fg.partition_path, fg.file_id) not in new_ids:
            out.setdefault(fg.partition_path, []).append(fg.file_id)
    return {p: sorted(ids) for p, ids in out.items()}


def abort(ctx: WriteContext, settle_seconds: float = 1.0, max_wait_seconds: float = 10.0) -> None:
    """Undo the write: its files, its markers, its timeline files (and a table it created).

    Spark calls abort while cancelled tasks may still be running.  Removing the inflight file
    first tells them to stop (InstantGuard); files keep appearing for a moment, so the marker
    listing is swept until it has been quiet for `settle_seconds`.  The requested file goes
    last: while it exists, any straggler's file stays invisible to readers.

    A write whose completed file exists has landed, whatever error its commit raised: abort
    then deletes nothing (if even that cannot be checked, the storage error propagates and
    nothing is deleted either; the next writer's rollback decides once the storage answers).
    """
    storage = ctx.storage
    store = TimelineStore(storage)
    if storage.exists(store.path(Instant(ctx.instant, ctx.action, COMPLETED))):
        log.warning(
            "hoodie: not aborting %s %s on %s: its commit landed", ctx.action, ctx.instant, ctx.config.path
        )
        return
    storage.delete(store.path(Instant(ctx.instant, ctx.action, INFLIGHT)))
    deleted: set[str] = set()
    quiet_since = time.monotonic()
    deadline = quiet_since + max_wait_seconds
    while True:
        files = [p for p, _ in list_marked_files(storage, ctx.instant) if p not in deleted]
        if files:
            delete_files(storage, files)
            deleted.update(files)
            quiet_since = time.monotonic()
        now = time.monotonic()
        if now - quiet_since >= settle_seconds or now >= deadline:
            break
        time.sleep(0.2)
    if ctx.created_table and _only_instant(storage, ctx.instant):
        _drop_created_table(storage, ctx)  # no rollback instant to keep: the table goes with it
    else:
        # as Java undoes a failed write: a `.rollback` instant that lists what was deleted (the
        # files swept above, named by the markers), then the instant's own files go
        rollback_instant(
            storage,
            Instant(ctx.instant, ctx.action, REQUESTED),
            after=ctx.instant,
            deleted=frozenset(deleted),
        )
    log.info(
        "hoodie: aborted %s %s on %s (%d files deleted)",
        ctx.action,
        ctx.instant,
        ctx.config.path,
        len(deleted),
    )


def _drop_created_table(storage: Storage, ctx: WriteContext) -> None:
    """Undo the instant of a write that created the table, and the table unless another writer
    has started an instant in it meanwhile."""
    delete_markers(storage, ctx.instant)
    TimelineStore(storage).delete_pending(ctx.instant, ctx.action)
    stop_heartbeat(storage, ctx.instant)
    if not Timeline.load(storage).instants:
        leftovers = [
            p for p in storage.walk_files("")
            if not p.startswith(META_DIR + "/") and posixpath.basename(p) != PARTITION_METAFILE
        ]  # fmt: skip
        storage.delete_dir("" if not leftovers else META_DIR)


def _only_instant(storage: Storage, instant: str) -> bool:
    return {i.timestamp for i in Timeline.load(storage).instants} <= {instant}


__all__ = ["REQUESTED", "WriteContext", "abort", "begin", "complete"]
