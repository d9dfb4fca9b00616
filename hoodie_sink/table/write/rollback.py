"""Rolling back a write that did not complete: delete its files, then its timeline files.

Order matters (format doc §3.4): a data file whose instant has no timeline file and is older
than the timeline counts as committed, so the pending timeline files go last.
"""

from __future__ import annotations

import logging
import posixpath

from hoodie_sink.config import WriteConfig
from hoodie_sink.table.format.clustering_plan import is_clustering
from hoodie_sink.table.format.file_group import PARTITION_METAFILE, BaseFile, LogFile
from hoodie_sink.table.format.heartbeat import HEARTBEAT_DIR, clustering_runner_gone, is_alive, stop_heartbeat
from hoodie_sink.table.format.markers import delete_markers, list_marked_files, marker_dir
from hoodie_sink.table.format.timeline.instant import (
    COMPLETED,
    INFLIGHT,
    REPLACE_COMMIT,
    WRITE_ACTIONS,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


def files_of_instant(storage: Storage, instant: str) -> list[str]:
    """Data files an instant may have written: its markers, or (no markers) a listing."""
    if storage.is_dir(marker_dir(instant)):
        return [path for path, _ in list_marked_files(storage, instant)]
    found = []
    for rel in storage.walk_files(""):
        if rel.startswith(".hoodie/"):
            continue
        part, name = posixpath.split(rel)
        bf = BaseFile.parse(part, name)
        if bf is not None and bf.instant == instant:
            found.append(rel)
            continue
        lf = LogFile.parse(part, name)
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


def rollback_instant(storage: Storage, instant: Instant) -> int:
    """Undo one pending instant.  Idempotent: a rollback that crashes is simply redone.

    Never a completed one: its writer publishes the completed file and only then drops its
    markers and heartbeat, so a caller that saw the instant pending and then its heartbeat gone
    may be looking at a commit that has just landed (its files are then the table's data)."""
    store = TimelineStore(storage)
    if storage.exists(store.path(instant.with_state(COMPLETED))):
        log.info("hoodie: %s %s completed meanwhile: nothing to roll back", instant.action, instant.timestamp)
        return 0
    files = files_of_instant(storage, instant.timestamp)
    deleted = delete_files(storage, files)
    delete_markers(storage, instant.timestamp)
    TimelineStore(storage).delete_pending(instant.timestamp, instant.action)
    stop_heartbeat(storage, instant.timestamp)
    log.info(
        "hoodie: rolled back pending %s %s (%d files deleted)", instant.action, instant.timestamp, deleted
    )
    return deleted


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
    rolled = []
    pending = timeline.pending(WRITE_ACTIONS)
    for inst in pending:
        if keep and inst.timestamp in keep:
            continue
        if is_clustering(storage, inst):
            rollback_failed_clustering(storage, inst, cfg)
            continue
        if is_alive(storage, inst.timestamp, interval_s, misses):
            log.info("hoodie: leaving pending %s %s alone: its writer's heartbeat is alive", inst.action,
                     inst.timestamp)  # fmt: skip
            continue
        rollback_instant(storage, inst)
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
    deleted = delete_files(storage, files_of_instant(storage, instant.timestamp))
    delete_markers(storage, instant.timestamp)
    storage.delete(store.path(Instant(instant.timestamp, REPLACE_COMMIT, INFLIGHT)))
    log.info(
        "hoodie: rolled back failed clustering %s to its plan (%d files deleted)", instant.timestamp, deleted
    )
    return True
