"""Savepoints and restore, as Apache Hudi writes them (services doc §6.2, §6.3).

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

from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.heartbeat import is_alive
from hoodie_sink.table.format.rollback_metadata import decode_rollback_metadata
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
    COMPLETED,
    INFLIGHT,
    REQUESTED,
    ROLLBACK,
    WRITE_ACTIONS,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import rollback_instant

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
    """Roll the table back to `savepoint`; returns the instants undone, newest first."""
    storage = _storage(target)
    cfg = config or WriteConfig(path=storage.base_uri)
    store = TimelineStore(storage)
    timeline = Timeline.load(storage)
    if not storage.exists(store.path(Instant(savepoint, SAVEPOINT, COMPLETED))):
        raise HoodieTableError(
            f"Cannot restore {storage.base_uri} to {savepoint}: there is no such savepoint."
        )
    started = time.monotonic()
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
    log.info(
        "hoodie: restored %s to savepoint %s: %d instants rolled back", storage.base_uri, savepoint, len(plan)
    )
    return [ts for ts, _ in plan]


def _plan(storage: Storage, timeline: Timeline, savepoint: str, cfg: WriteConfig) -> list[tuple[str, str]]:
    later = sorted({(i.timestamp, i.action) for i in timeline.instants
                    if i.action in WRITE_ACTIONS and i.timestamp > savepoint}, reverse=True)  # fmt: skip
    for ts, action in later:
        done = storage.exists(TimelineStore(storage).path(Instant(ts, action, COMPLETED)))
        if not done and is_alive(storage, ts, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses):
            raise HoodieTableError(
                f"Cannot restore {storage.base_uri}: {action} {ts} is being written (its heartbeat is alive). "
                "Help: stop the table's writers first."
            )
    return later


def _roll_back(storage: Storage, store: TimelineStore, target: Instant) -> dict | None:
    """Undo one instant of the plan (completed or pending); None when a previous run did."""
    completed = store.path(target)
    inflight = store.path(target.with_state(INFLIGHT))
    requested = store.path(target.with_state(REQUESTED))
    if storage.exists(completed):
        if not storage.exists(inflight):
            storage.write_atomic(inflight, b"")  # a pending state must outlive the completed file
        storage.delete(completed)  # readers stop seeing it here, all at once
    elif not (storage.exists(inflight) or storage.exists(requested)):
        return None
    state = INFLIGHT if storage.exists(inflight) else REQUESTED
    rollback_instant(storage, target.with_state(state))
    done = Timeline.load(storage).completed((ROLLBACK,))
    for rb in reversed(done):
        md = decode_rollback_metadata(storage.read_bytes(store.path(rb)))
        if target.timestamp in (md.get("commitsRollback") or []):
            return md
    return None
