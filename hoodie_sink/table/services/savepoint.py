"""Savepoints and restore, as Apache Hudi writes them (docs/hudi/services.md#savepoints-and-restore).

A savepoint pins the table as of a completed commit t: `<t>.savepoint` lists the files of the
latest slices as of t, which the cleaner never deletes, and archival stops before t, so the
table can be restored to t however long it lives on.

Restore to t rolls back every write instant after t, newest first, inside one `restore` instant:
`<r>.restore.requested` (the plan: what will be undone), `.inflight`, one rollback per instant
(a completed commit is first turned back into a pending one by deleting its completed file, so
readers stop seeing it at once and a crash leaves a pending instant; then its files and pending
files go as in any rollback), `<r>.restore` with the rollback metadata of each.  A restore that
died midway is finished by running it again.  Afterwards the table reads exactly as of t.

Streaming queries: the checkpoint of a stream is the batch id in the newest commit's extra
metadata, so after a restore the table's checkpoint is the one as of t.  A query restarted from
its own (newer) Spark checkpoint does not replay the batches that were undone: restore the
table, then restart the stream from a Spark checkpoint (or a source offset) matching t.
"""

from __future__ import annotations

import getpass
import logging
import posixpath
import time
from dataclasses import dataclass

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.clustering_plan import is_clustering
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.heartbeat import is_alive
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS
from hoodie_sink.table.format.rollback_metadata import (
    RollbackPlan,
    decode_rollback_metadata,
    decode_rollback_plan,
    plan_rollback,
)
from hoodie_sink.table.format.savepoint_metadata import (
    RESTORE,
    SAVEPOINT,
    decode_restore_plan,
    decode_savepoint,
    encode_restore_metadata,
    encode_restore_plan,
    encode_savepoint,
)
from hoodie_sink.table.format.timeline.instant import (
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    REQUESTED,
    ROLLBACK,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.metadata.bootstrap import initialize as initialize_metadata_table
from hoodie_sink.table.metadata.record_index_init import RecordIndexInit
from hoodie_sink.table.metadata.removal import remove_metadata_table
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.bloom_filter_files import bloom_filters_init
from hoodie_sink.table.read.column_stats_files import column_stats_init
from hoodie_sink.table.read.record_index_keys import live_entries
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import (
    execute_rollback,
    files_of_instant,
    request_rollback,
    rollback_instant,
    written_files,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavepointInfo:
    instant: str
    savepointed_by: str
    savepointed_at_ms: int
    comments: str
    files: int


def _storage(target: str | Storage) -> Storage:
    return target if isinstance(target, Storage) else Storage(target)


def create_savepoint(
    target: str | Storage, instant: str | None = None, user: str | None = None, comments: str = ""
) -> SavepointInfo:
    storage = _storage(target)
    timeline = Timeline.load(storage)
    commits = timeline.completed()
    if instant is None:
        if not commits:
            raise HoodieTableError(f"No completed commit to savepoint on {storage.base_uri}.")
        instant = commits[-1].timestamp
    if instant not in {c.timestamp for c in commits}:
        raise HoodieTableError(
            f"Cannot savepoint {instant} on {storage.base_uri}: it is not a completed commit on the active timeline."
        )
    oldest = oldest_readable_instant(storage, timeline)
    if oldest is not None and instant < oldest:
        raise HoodieTableError(
            f"Cannot savepoint {instant} on {storage.base_uri}: the cleaner kept file versions only from {oldest} on."
        )
    store = TimelineStore(storage)
    if storage.exists(store.path(Instant(instant, SAVEPOINT, COMPLETED))):
        raise HoodieTableError(f"{instant} is already savepointed on {storage.base_uri}.")
    view = FileSystemView.load(
        storage, Timeline(tuple(i for i in timeline.instants if i.timestamp <= instant))
    )
    files: dict[str, list[str]] = {}
    for fg in view.file_groups(instant):
        sl = fg.latest_slice
        if sl is None:
            continue
        names = ([sl.base_file.name] if sl.base_file else []) + [lf.name for lf in sl.log_files]
        files.setdefault(fg.partition_path, []).extend(names)
    by = user or getpass.getuser()
    at_ms = int(time.time() * 1000)
    inflight = Instant(instant, SAVEPOINT, INFLIGHT)
    storage.write_atomic(store.path(inflight), b"")
    store.complete(inflight, encode_savepoint(by, at_ms, comments, files))
    log.info(
        "hoodie: savepoint %s of %s (%d files)", instant, storage.base_uri, sum(map(len, files.values()))
    )
    return SavepointInfo(instant, by, at_ms, comments, sum(len(v) for v in files.values()))


def list_savepoints(target: str | Storage) -> list[SavepointInfo]:
    storage = _storage(target)
    store = TimelineStore(storage)
    out = []
    for sp in Timeline.load(storage).completed((SAVEPOINT,)):
        md = decode_savepoint(storage.read_bytes(store.path(sp)))
        files = sum(
            len(p.get("savepointDataFile") or []) for p in (md.get("partitionMetadata") or {}).values()
        )
        out.append(SavepointInfo(sp.timestamp, md.get("savepointedBy") or "", int(md.get("savepointedAt") or 0),
                                 md.get("comments") or "", files))  # fmt: skip
    return out


def delete_savepoint(target: str | Storage, instant: str) -> None:
    storage = _storage(target)
    store = TimelineStore(storage)
    if not storage.exists(store.path(Instant(instant, SAVEPOINT, COMPLETED))):
        raise HoodieTableError(f"No savepoint {instant} on {storage.base_uri}.")
    storage.delete(store.path(Instant(instant, SAVEPOINT, COMPLETED)))
    storage.delete(store.path(Instant(instant, SAVEPOINT, INFLIGHT)))


def savepointed_files(storage: Storage, timeline: Timeline) -> frozenset[str]:
    """Relative paths of every file a completed savepoint names (the cleaner keeps them)."""
    store = TimelineStore(storage)
    out: set[str] = set()
    for sp in timeline.completed((SAVEPOINT,)):
        for part, meta in (
            decode_savepoint(storage.read_bytes(store.path(sp))).get("partitionMetadata") or {}
        ).items():
            out.update(posixpath.join(part, n) if part else n for n in meta.get("savepointDataFile") or [])
    return frozenset(out)


def restore(target: str | Storage, savepoint: str, config: WriteConfig | None = None) -> list[str]:
    """Roll the table back to `savepoint`; returns the instants undone, in the order undone."""
    storage = _storage(target)
    cfg = config or WriteConfig(path=storage.base_uri)
    store = TimelineStore(storage)
    timeline = Timeline.load(storage)
    if not storage.exists(store.path(Instant(savepoint, SAVEPOINT, COMPLETED))):
        raise HoodieTableError(
            f"Cannot restore {storage.base_uri} to {savepoint}: there is no such savepoint."
        )
    started = time.monotonic()
    # The metadata table is rebuilt rather than rolled back instant by instant (Java restores it
    # to the savepoint, then syncs a listing diff): removed first, so every crash window leaves
    # readers listing storage; built again from the restored listing at the end.
    keep_metadata = cfg.keeps_metadata_table(metadata_sync.is_kept(storage))
    # the record index is rebuilt from the restored records, if the table had one (or asks for one)
    keep_record_index = cfg.record_index_enable or metadata_sync.keeps_record_index(storage)
    record_index = RecordIndexInit(cfg.record_index_sizing(), live_entries) if keep_record_index else None
    # and the column statistics from the restored files, likewise
    keeps_stats = cfg.column_stats_enable or COLUMN_STATS in metadata_sync.kept_partitions(storage)
    column_stats = column_stats_init(cfg.with_(column_stats_enable=True)) if keeps_stats else None
    keeps_blooms = cfg.bloom_filters_enable or BLOOM_FILTERS in metadata_sync.kept_partitions(storage)
    bloom_filters = bloom_filters_init(cfg.with_(bloom_filters_enable=True)) if keeps_blooms else None
    remove_metadata_table(storage)
    pending_restore = timeline.pending((RESTORE,))
    if pending_restore:  # a restore that died: finish it from its plan
        restore_instant = pending_restore[0].with_state(REQUESTED)
        plan = decode_restore_plan(storage.read_bytes(store.path(restore_instant)))
    else:
        plan = _plan(storage, timeline, savepoint, cfg)
        restore_instant = store.create_requested_at_new_time(timeline.last_instant_time(), RESTORE,
                                                             encode_restore_plan(plan))  # fmt: skip
    current = (
        pending_restore[0]
        if pending_restore and pending_restore[0].state == INFLIGHT
        else store.transition_to_inflight(restore_instant)
    )
    rollbacks: dict[str, list[dict]] = {}
    for ts, action in plan:
        metadata = _roll_back(storage, store, Instant(ts, action, COMPLETED))
        if metadata is not None:
            rollbacks[ts] = [metadata]
    taken_ms = int((time.monotonic() - started) * 1000)
    store.complete(current, encode_restore_metadata(current.timestamp, taken_ms, plan, rollbacks))
    _drop_rollbacks_after(storage, store, savepoint)
    if keep_metadata:
        initialize_metadata_table(storage, Timeline.load(storage), record_index, column_stats, bloom_filters)
    log.info(
        "hoodie: restored %s to savepoint %s: %d instants rolled back", storage.base_uri, savepoint, len(plan)
    )
    return [ts for ts, _ in plan]


# The write timeline of Java (`getWriteTimeline`): every instant a restore undoes, in any state.
_RESTORED_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION)


def _plan(storage: Storage, timeline: Timeline, savepoint: str, cfg: WriteConfig) -> list[tuple[str, str]]:
    """Every instant of the write timeline after the savepoint, whatever its state (a pending
    compaction or clustering plan too: left behind, it would run again with a time older than the
    restore), as Java's RestorePlanActionExecutor: pending clusterings first, then newest first
    (docs/hudi/mor-rollback.md).  A completed instant is named by its completed action (a
    compaction completes as a `commit`)."""
    later: dict[str, Instant] = {}
    for inst in timeline.instants:
        if inst.action not in _RESTORED_ACTIONS or inst.timestamp <= savepoint:
            continue
        seen = later.get(inst.timestamp)
        if seen is None or (inst.is_completed and not seen.is_completed):
            later[inst.timestamp] = inst
    store = TimelineStore(storage)
    for inst in later.values():
        done = storage.exists(store.path(inst.with_state(COMPLETED)))
        if not done and is_alive(
            storage, inst.timestamp, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses
        ):
            raise HoodieTableError(
                f"Cannot restore {storage.base_uri}: {inst.action} {inst.timestamp} is being written (its "
                "heartbeat is alive). Help: stop the table's writers first."
            )
    newest_first = sorted(later.values(), key=lambda i: i.timestamp, reverse=True)
    clusterings = [i for i in newest_first if not i.is_completed and is_clustering(storage, i)]
    ordered = clusterings + [i for i in newest_first if i not in clusterings]
    return [(i.timestamp, i.action) for i in ordered]


def _roll_back(storage: Storage, store: TimelineStore, target: Instant) -> dict | None:
    """Undo one instant of the plan (completed or pending); its rollback metadata.

    A completed instant is rolled back in Java's order (BaseRollbackActionExecutor): the
    rollback is planned while it is still completed, from its write stats (the only record of
    the log files it added to older slices), then it is turned back into a pending instant (a
    compaction into its pending compaction: `<c>.commit` goes, the plan stays until the rollback
    deletes it), then the plan runs.  A restore that died midway finds its planned rollback and
    runs it, whatever the state reached."""
    ts = target.timestamp
    pending_action = _pending_action(storage, store, target)
    pending = Instant(ts, pending_action, INFLIGHT)
    planned = _planned_rollback(storage, ts)
    completed = store.path(target.with_state(COMPLETED))
    if storage.exists(completed):
        if planned is None:
            written = written_files(storage, target.with_state(COMPLETED))
            plan = plan_rollback(pending, files_of_instant(storage, ts, written, pending_action))
            planned = (request_rollback(storage, plan, None), plan)
        if not storage.exists(store.path(pending)):
            storage.write_atomic(store.path(pending), b"")  # a pending state must outlive the completed file
        storage.delete(completed)  # readers stop seeing it here, all at once
    if planned is not None:
        execute_rollback(storage, planned[0], planned[1])
    elif storage.exists(store.path(pending)) or storage.exists(store.path(pending.with_state(REQUESTED))):
        state = INFLIGHT if storage.exists(store.path(pending)) else REQUESTED
        rollback_instant(storage, pending.with_state(state))
    return _rollback_metadata_of(storage, store, ts)


def _pending_action(storage: Storage, store: TimelineStore, target: Instant) -> str:
    """The action an instant is pending under: a completed `commit` with a compaction plan beside
    it is a compaction (Java's `getInflightInstant` on merge-on-read), a `deltacommit` with a log
    compaction plan a log compaction."""
    for completed_as, planned_as in ((COMMIT, COMPACTION), (DELTA_COMMIT, LOG_COMPACTION)):
        if target.action == completed_as and storage.exists(
            store.path(Instant(target.timestamp, planned_as, REQUESTED))
        ):
            return planned_as
    return target.action


def _planned_rollback(storage: Storage, ts: str) -> tuple[Instant, RollbackPlan] | None:
    """A pending rollback of instant `ts` (a restore that died after planning it)."""
    store = TimelineStore(storage)
    for rollback in Timeline.load(storage).pending((ROLLBACK,)):
        try:
            plan = decode_rollback_plan(storage.read_bytes(store.path(rollback.with_state(REQUESTED))))
        except (FileNotFoundError, ValueError):
            continue
        if plan.instant_to_rollback.timestamp == ts:
            return rollback, plan
    return None


def _rollback_metadata_of(storage: Storage, store: TimelineStore, ts: str) -> dict | None:
    for rb in reversed(Timeline.load(storage).completed((ROLLBACK,))):
        md = decode_rollback_metadata(storage.read_bytes(store.path(rb)))
        if ts in (md.get("commitsRollback") or []):
            return md
    return None


def _drop_rollbacks_after(storage: Storage, store: TimelineStore, savepoint: str) -> None:
    """Java's `finishRestore`: once the restore is complete, every rollback instant after the
    savepoint goes (its metadata lives on in the restore's), completed file first, then the
    pending ones, so the timeline after a restore is the savepoint's plus the restore."""
    for rb in reversed(Timeline.load(storage).instants):
        if rb.action == ROLLBACK and rb.timestamp > savepoint and rb.is_completed:
            storage.delete(store.path(rb))
    for rb in Timeline.load(storage).pending((ROLLBACK,)):
        if rb.timestamp > savepoint:
            store.delete_pending(rb.timestamp, ROLLBACK)
