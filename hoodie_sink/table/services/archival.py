"""Archival: move old instants out of `.hoodie/` so that the active timeline, which every write
lists and every reader loads, stays small however long a table lives (docs/hudi/services.md#archival).

When the completed commits pass `hoodie.keep.max.commits`, the oldest are archived, keeping
`hoodie.keep.min.commits`, but never:
- at or past the last completed commit before the oldest pending write (readers treat any file
  older than the active timeline as committed: a failed write's files would come back);
- at or past the first savepoint (restore needs the instants after it);
- at or past the last clean's earliest commit to retain (time travel and incremental reads in
  the retained window need those instants);
- at or past a replacecommit whose replaced file groups still have files (without the
  replacecommit both readers would show the replaced rows again).
Clean and rollback instants past `max` are archived down to the newest `min`, per action.

Each run writes one new archive file (`.commits_.archive.<N>_1-0-1`, N one more than the last:
local disks and object stores cannot append), then deletes the archived instants' requested and
inflight files, then their completed files one by one oldest first (a crash midway leaves a
timeline without holes).  A crash after the archive file and before the deletes: the next run
finds those instants in the newest archive file and only deletes them.
Planning is pure (`plan_archival`); `run_archival` does the I/O.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from hoodie_sink.table.format.archived_timeline import (
    ArchivedInstant,
    archive_file_name,
    archive_file_number,
    archived_entry,
    decode_archive_file,
    encode_archive_blocks,
)
from hoodie_sink.table.format.clean_metadata import decode_clean_metadata
from hoodie_sink.table.format.fs_view import list_table_files, replacing_instants
from hoodie_sink.table.format.markers import TEMP_DIR
from hoodie_sink.table.format.metadata_instants import latest_compaction_time
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.timeline.instant import (
    CLEAN,
    COMPACTION,
    COMPLETED,
    INFLIGHT,
    REQUESTED,
    ROLLBACK,
    WRITE_ACTIONS,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import META_DIR, ActiveTimeline, Timeline, TimelineStore
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.metadata.writer import metadata_lock
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.service_lock import service_lock
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
SAVEPOINT = "savepoint"
_STATE_ORDER = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}


@dataclass(frozen=True)
class ArchivalConfig:
    min_commits: int = 20
    max_commits: int = 30
    batch: int = 10

    @staticmethod
    def of(cfg: WriteConfig) -> ArchivalConfig:
        return ArchivalConfig(cfg.keep_min_commits, cfg.keep_max_commits, cfg.archival_batch)


@dataclass(frozen=True)
class ArchivalResult:
    archive_file: str | None
    instants: int  # instants archived (each with all its state files)
    state_files: int
    seconds: float


# ------------------------------------------------------------------------------ planning (pure)


def plan_archival(
    timeline: Timeline,
    cfg: ArchivalConfig,
    clean_ectr: str | None = None,
    live_replacecommits: frozenset[str] = frozenset(),
    keep_from: str | None = None,
) -> list[str]:
    """Instant times to archive, oldest first.  `clean_ectr`: the last completed clean's earliest
    commit to retain; `live_replacecommits`: completed replacecommits whose replaced file groups
    still have files on storage; `keep_from`: commits at or after it stay (the metadata table's)."""
    commits = timeline.completed()
    out: list[str] = []
    if len(commits) > cfg.max_commits:
        limit = min(x for x in (_commit_limit(timeline, clean_ectr), keep_from, "9" * 20) if x is not None)
        for inst in commits[: len(commits) - cfg.min_commits]:
            if (limit is not None and inst.timestamp >= limit) or inst.timestamp in live_replacecommits:
                break
            out.append(inst.timestamp)
    for action in (CLEAN, ROLLBACK):
        done = timeline.completed((action,))
        if len(done) > cfg.max_commits:
            out += [i.timestamp for i in done[: len(done) - cfg.min_commits]]
    return sorted(out)


def _commit_limit(timeline: Timeline, clean_ectr: str | None) -> str | None:
    """Commits at or after this instant stay active (None: no limit)."""
    limits = []
    pending = timeline.pending((*WRITE_ACTIONS, COMPACTION))
    if pending:
        before = [i.timestamp for i in timeline.completed() if i.timestamp < pending[0].timestamp]
        limits.append(before[-1] if before else pending[0].timestamp)
    savepoints = timeline.completed((SAVEPOINT,)) + timeline.pending((SAVEPOINT,))
    if savepoints:
        limits.append(min(s.timestamp for s in savepoints))
    if clean_ectr:
        limits.append(clean_ectr)
    return min(limits) if limits else None


# ---------------------------------------------------------------------------------------- I/O


def archive_dir(storage: Storage) -> str:
    return f"{META_DIR}/{read_table_config(storage).archive_folder}"


def load_archived_timeline(target: str | Storage) -> list[ArchivedInstant]:
    """Every archived state file, ours and Java's, sorted by instant (for the CLI and audits;
    writes and reads never load it)."""
    storage = target if isinstance(target, Storage) else Storage(target)
    folder = archive_dir(storage)
    out: list[ArchivedInstant] = []
    for name in storage.list_names(folder):
        if archive_file_number(name) is not None:
            out += decode_archive_file(
                storage.read_bytes(f"{folder}/{name}"), storage.full(f"{folder}/{name}")
            )
    return sorted(out, key=lambda e: (e.instant.timestamp, e.instant.action, _STATE_ORDER[e.instant.state]))


def run_archival(target: str | Storage, cfg: ArchivalConfig | None = None) -> ArchivalResult:
    storage = target if isinstance(target, Storage) else Storage(target)
    cfg = cfg or ArchivalConfig()
    started = time.monotonic()
    with service_lock(storage, "archive", "archive the timeline"):
        timeline = ActiveTimeline.load(storage)
        to_archive = plan_archival(timeline, cfg, _last_clean_ectr(storage, timeline),
                                   _live_replacecommits(storage, timeline))  # fmt: skip
        if metadata_sync.is_kept(storage):
            to_archive = _before_metadata_compaction(storage, to_archive)
            with metadata_lock(storage):
                archive_metadata_table(storage, cfg, timeline)
        result = _archive(storage, timeline, to_archive, cfg, started)
    if result.instants:
        log.info(
            "hoodie: archived %d instants (%d timeline files) of %s into %s in %.2fs",
            result.instants, result.state_files, storage.base_uri, result.archive_file, result.seconds,
        )  # fmt: skip
    return result


def _archive(
    storage: Storage, timeline: Timeline, to_archive: list[str], cfg: ArchivalConfig, started: float
) -> ArchivalResult:
    """Move the state files of `to_archive` into a new archive file, then delete them."""
    if not to_archive:
        return ArchivalResult(None, 0, 0, time.monotonic() - started)
    order = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2}  # as the instant lived: requested first
    states = [s for ts in to_archive for s in sorted(timeline.states_of(ts), key=lambda i: order[i.state])]
    folder = archive_dir(storage)
    names = storage.list_names(folder)
    numbers = [n for n in (archive_file_number(x) for x in names) if n is not None]
    already = _in_newest_archive(storage, folder, names, numbers)
    fresh = [s for s in states if (s.timestamp, s.action, s.state) not in already]
    name = None
    if fresh:
        entries = [archived_entry(s, _content(storage, s), _mtime(storage, s)) for s in fresh]
        name = archive_file_name(max(numbers, default=0) + 1)
        storage.mkdirs(folder)
        storage.write_atomic(f"{folder}/{name}", encode_archive_blocks(entries, cfg.batch))
    _delete_archived(storage, states)
    return ArchivalResult(name, len(to_archive), len(states), time.monotonic() - started)


def archive_metadata_table(storage: Storage, cfg: ArchivalConfig, data: Timeline) -> ArchivalResult | None:
    """The metadata table's own timeline, archived as Java's writers do it (HoodieTimelineArchiver
    on the metadata table; docs/hudi/metadata-table-protocol.md#table-services): with one more commit
    kept than the data table, and never an instant at or after its latest compaction (the blocks of
    the latest slice need their initialisation or compaction instant) or at or after the data
    table's earliest active instant (a rollback on the data table may still need to undo its
    deltacommit)."""
    mdt = metadata_storage(storage)
    timeline = ActiveTimeline.load(mdt)
    compacted = latest_compaction_time(timeline)
    if compacted is None:
        return None
    earliest = min((i.timestamp for i in data.instants), default=compacted)
    mdt_cfg = ArchivalConfig(cfg.min_commits + 1, cfg.max_commits + 1, cfg.batch)
    to_archive = plan_archival(timeline, mdt_cfg, keep_from=min(compacted, earliest))
    return _archive(mdt, timeline, to_archive, mdt_cfg, time.monotonic())


def _before_metadata_compaction(storage: Storage, to_archive: list[str]) -> list[str]:
    """With a metadata table, only instants older than its latest compaction may leave the active
    timeline (Java's HoodieTimelineArchiver): a reader applies a metadata log block only while its
    data instant is on the active timeline (format/metadata_instants.py), so archiving one whose
    blocks no compaction has folded into a base file would drop its files from the listing."""
    if not to_archive:
        return to_archive
    compacted = latest_compaction_time(Timeline.load(metadata_storage(storage)))
    if compacted is None:
        log.info("hoodie: not archiving %s: its metadata table has no compaction yet", storage.base_uri)
        return []
    return [ts for ts in to_archive if ts < compacted]


def _content(storage: Storage, state: Instant) -> bytes:
    """A state file's bytes; a compaction's inflight (empty) stands for its plan, as in Java."""
    if state.action == COMPACTION and state.state == INFLIGHT:
        state = state.with_state(REQUESTED)
    return storage.read_bytes(TimelineStore(storage).path(state))


def _last_clean_ectr(storage: Storage, timeline: Timeline) -> str | None:
    last = timeline.latest_completed((CLEAN,))
    if last is None:
        return None
    md = decode_clean_metadata(storage.read_bytes(TimelineStore(storage).path(last)))
    return md.get("earliestCommitToRetain") or last.timestamp  # FILE_VERSIONS: keep from the clean


def _live_replacecommits(storage: Storage, timeline: ActiveTimeline) -> frozenset[str]:
    """Completed replacecommits with a replaced file group that still has files (listing only the
    partitions they name)."""
    replaced: dict[str, set[tuple[str, str]]] = {}
    for group, ts in replacing_instants(storage, timeline).items():
        replaced.setdefault(ts, set()).add(group)
    if not replaced:
        return frozenset()
    partitions = sorted({p for groups in replaced.values() for p, _ in groups})
    listing = list_table_files(storage, [p for p in partitions if p] if all(partitions) else None)
    present = {(f.partition_path, f.file_id) for f in listing.base_files}
    present |= {(f.partition_path, f.file_id) for f in listing.log_files}
    return frozenset(ts for ts, groups in replaced.items() if groups & present)


def _in_newest_archive(storage: Storage, folder: str, names: list[str], numbers: list[int]) -> set[tuple]:
    """(time, action, state) of the entries of the newest archive file: a run that died after
    writing it and before deleting the instants left them on the active timeline too."""
    if not numbers:
        return set()
    newest = next(n for n in names if archive_file_number(n) == max(numbers))
    entries: list[ArchivedInstant] = decode_archive_file(storage.read_bytes(f"{folder}/{newest}"), newest)
    return {(e.instant.timestamp, e.instant.action, e.instant.state) for e in entries}


def _mtime(storage: Storage, instant: Instant) -> str | None:
    """The state file's transition time as Java records it: its modification time (UTC)."""
    try:
        mtime = storage.fs.get_file_info(storage.full(TimelineStore(storage).path(instant))).mtime
    except OSError:
        return None
    if not isinstance(mtime, datetime):
        return None
    return mtime.astimezone(timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]


def _delete_archived(storage: Storage, states: list[Instant]) -> None:
    store = TimelineStore(storage)
    for s in states:
        if s.state != COMPLETED:
            storage.delete(store.path(s))
    for s in sorted((s for s in states if s.state == COMPLETED), key=lambda i: i.timestamp):
        storage.delete(store.path(s))
    for ts in sorted({s.timestamp for s in states}):
        marker_dir = posixpath.join(TEMP_DIR, ts)
        if storage.is_dir(marker_dir):
            storage.delete_dir(marker_dir)
