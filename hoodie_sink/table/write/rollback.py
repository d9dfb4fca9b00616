"""Rolling back a write that did not complete, as Java does: a `.rollback` instant whose plan
lists the files, then the files, then the failed instant's timeline files, then the rollback's
completion (docs/hudi/services.md#rollback).

Order matters (docs/hudi/format.md#commit-protocol-and-visibility): a data file whose instant has no
timeline file and is older than the timeline counts as committed, so the failed instant's timeline
files go after its data files.  A rollback that dies midway is redone from its plan by the next
writer.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable

from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieTableError
from hoodie_sink.table.format.clustering_plan import is_clustering
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import PARTITION_METAFILE, BaseFile, LogFile, join_partition
from hoodie_sink.table.format.heartbeat import HEARTBEAT_DIR, clustering_runner_gone, is_alive, stop_heartbeat
from hoodie_sink.table.format.log_format import block_instants
from hoodie_sink.table.format.markers import APPEND, delete_markers, list_marked_files, marker_dir
from hoodie_sink.table.format.rollback_metadata import (
    RollbackPlan,
    decode_rollback_plan,
    encode_rollback_metadata,
    encode_rollback_plan,
    plan_rollback,
)
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
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


def files_of_instant(
    storage: Storage, instant: str, written: Iterable[str] = (), action: str | None = None
) -> list[str]:
    """Data files an instant wrote, to delete on its rollback (docs/hudi/mor-rollback.md):
    `written`, the paths its commit metadata's write stats name (a completed instant: restore),
    and its markers (direct or timeline-server based), or, with no marker folder at all, the
    files whose name carries the instant (what Java's listing-based rollback does).
    A log file's name carries its slice's base instant, not the writer's: a deltacommit that
    appended to an older slice is found only through its markers or its write stats, never by
    name.  A compaction writes base files only: the logs named with its instant belong to the
    deltacommits that wrote into its slice."""
    found = set(written)
    if storage.is_dir(marker_dir(instant)):
        for path, io_type in list_marked_files(storage, instant):
            found.update(_appended_logs(storage, instant, path) if io_type == APPEND else [path])
    else:
        found.update(_files_named_with(storage, instant, logs=action != COMPACTION))
    return sorted(found)


def written_files(storage: Storage, instant: Instant) -> list[str]:
    """The files a completed instant's write stats name.  A log file it wrote is deleted whole on
    rollback, so a stat that appended to a log file holding earlier blocks (`logOffset` > 0:
    Java on storage with append) is refused rather than destroying other instants' data."""
    metadata = CommitMetadata.from_json(TimelineStore(storage).read_json(instant))
    out = []
    for stat in metadata.write_stats:
        if not stat.path:
            continue
        if int(stat.extra.get("logOffset") or 0) > 0:
            raise HoodieTableError(
                f"Cannot roll back {instant.action} {instant.timestamp} on {storage.base_uri}: it appended "
                f"to the log file {stat.path} after earlier blocks (logOffset {stat.extra['logOffset']}), "
                "and rolling back such appends (a rollback command block) is not implemented. Help: roll it "
                "back with Apache Hudi (hudi-cli 'commit rollback' or its restore)."
            )
        out.append(stat.path)
    return out


def _appended_logs(storage: Storage, instant: str, marked: str) -> list[str]:
    """The log files a (Java) APPEND marker stands for.  Its name is the slice's base-file-style
    name `<fileId>_<token>_<baseInstant>.parquet` (docs/hudi/format.md#markers), not the log file's: the logs
    of that slice whose blocks all carry the instant are the ones it wrote (on storage without
    append every write makes a new log version).  A log mixing its blocks with others' (an
    append on HDFS) cannot be deleted and is refused."""
    part, name = posixpath.split(marked)
    bf = BaseFile.parse(part, name)
    named = LogFile.parse(part, name) if bf is None else None  # a marker naming the log (1.x)
    if bf is not None:
        slice_id = (bf.file_id, bf.instant)
    elif named is not None:
        slice_id = (named.file_id, named.base_instant)
    else:
        return []
    out = []
    for log_name in storage.list_names(part):
        lf = LogFile.parse(part, log_name)
        if lf is None or (lf.file_id, lf.base_instant) != slice_id:
            continue
        rel = join_partition(part, log_name)
        instants, damaged = block_instants(storage.read_bytes(rel), rel)
        if instant not in instants and not (damaged and not instants):
            continue  # another write's file (a damaged tail after its blocks is that write's)
        if set(instants) != {instant}:  # mixed, or damaged from its first block: whose is it?
            raise HoodieTableError(
                f"Cannot roll back pending instant {instant} on {storage.base_uri}: the log file {rel} it "
                "appended to holds blocks of other instants (or a damaged block), and rolling back "
                "appends (a rollback command block) is not implemented. Help: roll it back with Apache "
                "Hudi (hudi-cli 'commit rollback') before writing with hoodie_sink."
            )
        out.append(rel)
    return out


def _files_named_with(storage: Storage, instant: str, logs: bool = True) -> list[str]:
    found = []
    for rel in storage.walk_files(""):
        if rel.startswith(".hoodie/"):
            continue
        part, name = posixpath.split(rel)
        bf = BaseFile.parse(part, name)
        if bf is not None and bf.instant == instant:
            found.append(rel)
            continue
        lf = LogFile.parse(part, name) if logs else None
        if lf is not None and lf.base_instant == instant:
            found.append(rel)
    return found


def delete_files(storage: Storage, paths: list[str]) -> int:
    deleted = 0
    for rel in paths:
        deleted += storage.delete(rel)
    prune_empty_partitions(storage, {posixpath.dirname(p) for p in paths})
    return deleted


def prune_empty_partitions(storage: Storage, partitions: set[str]) -> None:
    """Remove partition directories that hold nothing but their metadata file."""
    for part in sorted(partitions, key=len, reverse=True):
        if not part:
            continue
        names = storage.list_names(part)
        if names and set(names) <= {PARTITION_METAFILE}:
            storage.delete_dir(part)
            parent = posixpath.dirname(part)
            while parent and not storage.list_names(parent):
                storage.delete_dir(parent)
                parent = posixpath.dirname(parent)


def rollback_instant(
    storage: Storage,
    instant: Instant,
    after: str | None = None,
    keep_plan: bool = False,
    deleted: frozenset[str] = frozenset(),
) -> int:
    """Undo one pending instant as Java does: plan, execute, publish a `.rollback` instant.

    Never a completed one: its writer publishes the completed file and only then drops its
    markers and heartbeat, so a caller that saw the instant pending and then its heartbeat gone
    may be looking at a commit that has just landed (its files are then the table's data).
    `after`: the latest instant time the caller saw (the rollback's time comes after it);
    `keep_plan`: see execute_rollback; `deleted`: files the caller has already deleted (an abort's
    sweep), listed in the rollback but not deleted again."""
    store = TimelineStore(storage)
    if storage.exists(store.path(instant.with_state(COMPLETED))):
        log.info("hoodie: %s %s completed meanwhile: nothing to roll back", instant.action, instant.timestamp)
        return 0
    plan = plan_rollback(instant, files_of_instant(storage, instant.timestamp, action=instant.action))
    rollback = request_rollback(storage, plan, after)
    return execute_rollback(storage, rollback, plan, keep_plan=keep_plan, deleted=deleted)


def request_rollback(storage: Storage, plan: RollbackPlan, after: str | None) -> Instant:
    """`<r>.rollback.requested` with the plan: from here on the rollback is redone from its plan
    by the next writer (ours or Java's) if this one dies."""
    if after is None:
        after = Timeline.load(storage).last_instant_time()
    return TimelineStore(storage).create_requested_at_new_time(
        after, ROLLBACK, encode_rollback_plan(plan, storage.base_uri)
    )


def execute_rollback(
    storage: Storage,
    rollback: Instant,
    plan: RollbackPlan,
    keep_plan: bool = False,
    deleted: frozenset[str] = frozenset(),
) -> int:
    """Run a requested (or redo an inflight) rollback; idempotent, so a crash is simply redone.

    Order of Java 0.15 (`BaseRollbackActionExecutor`): rollback inflight, delete the data files,
    delete the rolled-back instant's pending timeline files, complete the rollback.  The markers
    go just before the completion (Java drops them after it): a crash then leaves no marker
    folder of an instant that is gone, and a redo needs only the plan.  `keep_plan`: a failed
    clustering keeps its requested plan (Java reverts it to requested) and its heartbeat,
    which the caller that took it over beats."""
    started = time.monotonic()
    store = TimelineStore(storage)
    inflight = (
        rollback
        if rollback.state == INFLIGHT
        else store.transition_to_inflight(rollback.with_state(REQUESTED))
    )
    files = list(plan.files)
    # a file already gone (a redo, or `deleted` by the caller) counts as deleted, as in Java
    delete_files(storage, [f for f in files if f not in deleted])
    target = plan.instant_to_rollback
    if keep_plan:
        storage.delete(store.path(Instant(target.timestamp, target.action, INFLIGHT)))
    else:
        store.delete_pending(target.timestamp, target.action)
        stop_heartbeat(storage, target.timestamp)
    delete_markers(storage, target.timestamp)
    taken_ms = int((time.monotonic() - started) * 1000)
    metadata = encode_rollback_metadata(rollback.timestamp, taken_ms, plan, files, [], storage.base_uri)
    metadata_sync.on_rollback(storage, rollback.timestamp, target.timestamp)
    try:
        store.complete(inflight, metadata)
    except HoodieCommitStateUnknown:
        # Another writer that saw this rollback pending redid it from the same plan and published
        # it first (on S3 the completed file is never overwritten, and its metadata differs from
        # ours only in time taken): the rollback is done either way.
        if not storage.exists(store.path(inflight.with_state(COMPLETED))):
            raise
        log.info("hoodie: rollback %s was completed by another writer meanwhile", rollback.timestamp)
        return len(files)
    log.info("hoodie: rolled back %s %s in rollback %s (%d files deleted)", target.action, target.timestamp,
             rollback.timestamp, len(files))  # fmt: skip
    return len(files)


def complete_pending_rollbacks(storage: Storage, timeline: Timeline) -> list[Instant]:
    """Redo every rollback a dead writer (ours or Java's) left requested or inflight, from its
    plan, as Java's next writer does; the instants they roll back."""
    store = TimelineStore(storage)
    done = []
    for rollback in timeline.pending((ROLLBACK,)):
        plan_path = store.path(rollback.with_state(REQUESTED))
        try:
            plan = decode_rollback_plan(storage.read_bytes(plan_path))
        except (FileNotFoundError, ValueError) as e:
            raise HoodieTableError(
                f"Cannot complete the pending rollback {rollback.timestamp} on {storage.base_uri}: its plan "
                f"{storage.full(plan_path)} is unusable ({e}). Help: let Apache Hudi complete it "
                "(any Java write rolls back pending rollbacks), then write again."
            ) from e
        target = plan.instant_to_rollback
        if storage.exists(store.path(target.with_state(COMPLETED))):
            # the instant landed after all (its writer was alive): none of its files may go
            log.warning("hoodie: dropping rollback %s: %s %s is completed", rollback.timestamp, target.action,
                        target.timestamp)  # fmt: skip
            store.delete_pending(rollback.timestamp, ROLLBACK)
            continue
        execute_rollback(storage, rollback, plan, keep_plan=is_clustering(storage, target))
        done.append(target)
    return done


def rollback_failed_writes(
    storage: Storage, timeline: Timeline, keep: set[str] | None = None, config=None
) -> list[Instant]:
    """Roll back every pending write instant of a failed writer, except `keep`.

    A pending instant whose heartbeat is alive may still have a writer (another query, or the
    tasks of this very micro-batch): it is left alone, and rolled back by a later writer once
    its heartbeat has expired (`hoodie.client.heartbeat.interval_in_ms` x misses, as Java).
    A pending clustering is a table service, not a failed write: it is left alone while its
    heartbeat is alive, and otherwise rolled back to its plan (which the next run executes)."""
    cfg = config if config is not None else WriteConfig(path=storage.base_uri)
    interval_s, misses = cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses
    redone = {i.timestamp for i in complete_pending_rollbacks(storage, timeline)}
    last = timeline.last_instant_time()
    rolled = []
    pending = timeline.pending(WRITE_ACTIONS)
    for inst in pending:
        if (keep and inst.timestamp in keep) or inst.timestamp in redone:
            continue
        if is_clustering(storage, inst):
            rollback_failed_clustering(storage, inst, cfg)
            continue
        if is_alive(storage, inst.timestamp, interval_s, misses):
            log.info("hoodie: leaving pending %s %s alone: its writer's heartbeat is alive", inst.action,
                     inst.timestamp)  # fmt: skip
            continue
        rollback_instant(storage, inst, after=last)
        rolled.append(inst)
    _drop_stale_heartbeats(storage, {i.timestamp for i in pending}, interval_s, misses)
    return rolled


def _drop_stale_heartbeats(storage: Storage, pending: set[str], interval_s: float, misses: int) -> None:
    """A task attempt that outlived its instant may beat once more after the commit or abort
    removed the heartbeat: drop such expired heartbeats of instants that are no longer pending."""
    for name in storage.list_names(HEARTBEAT_DIR):
        if name.isdigit() and name not in pending and not is_alive(storage, name, interval_s, misses):
            stop_heartbeat(storage, name)


def rollback_failed_clustering(
    storage: Storage, instant: Instant, cfg: WriteConfig, force: bool = False
) -> bool:
    """Undo the execution of a clustering whose runner is gone (heartbeat left behind, expired): its files,
    markers and inflight file go, its plan stays for the next run.  False if it is alive
    (`force`: the caller has taken the instant over and beats for it already)."""
    if not force and not clustering_runner_gone(
        storage, instant.timestamp, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses
    ):
        return False
    store = TimelineStore(storage)
    if storage.exists(store.path(Instant(instant.timestamp, REPLACE_COMMIT, COMPLETED))):
        return True  # completed after the caller's look at the timeline: nothing to undo, ever
    if not storage.exists(store.path(Instant(instant.timestamp, REPLACE_COMMIT, INFLIGHT))):
        return True  # only planned: nothing to undo
    # a rollback instant as for any write (Java's rollbackInflightClustering), keeping the plan
    rollback_instant(storage, Instant(instant.timestamp, REPLACE_COMMIT, INFLIGHT), keep_plan=True)
    log.info("hoodie: rolled back failed clustering %s to its plan", instant.timestamp)
    return True
