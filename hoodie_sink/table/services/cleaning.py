"""Cleaning: delete the file slices no query within the retention needs, as Hudi's cleaner.

Timeline (docs/hudi/services.md#cleaning): `<t>.clean.requested` (the plan) -> `<t>.clean.inflight` (the same
bytes) -> the deletes -> `<t>.clean` (what was deleted).  A clean that died midway is finished
from its plan by the next one (deleting is idempotent).  Readers never look at clean instants;
they only notice files gone, which is why a slice goes only when no snapshot within the
retention can need it (docs/hudi/services.md#clean-retention):

- KEEP_LATEST_COMMITS / KEEP_LATEST_BY_HOURS: the earliest commit to retain (ECTR) is the
  N-th newest completed commit (or the first within the last H hours), never later than the
  oldest pending write.  In every file group the latest slice stays, and so does the newest
  slice older than the ECTR (what a query as of the ECTR reads); older slices go.  A file
  group replaced by a replacecommit older than the ECTR goes whole.
- KEEP_LATEST_FILE_VERSIONS: the newest N slices of every group stay; replaced groups go.
- Never: a savepointed file, a file group under pending clustering or compaction, a file of a
  write that is not committed (pending writes are rolled back, never cleaned).

Planning is pure (`earliest_commit_to_retain`, `plan_clean`); `run_clean` does the I/O.  With
`hoodie.cleaner.incremental.mode` (default) a clean lists only the partitions written since the
previous clean's ECTR, so a clean after every micro-batch costs the same however old the table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.avro_container import decode_record
from hoodie_sink.table.format.clean_metadata import (
    KEEP_LATEST_BY_HOURS,
    KEEP_LATEST_COMMITS,
    KEEP_LATEST_FILE_VERSIONS,
    CleanerPlan,
    decode_clean_metadata,
    decode_cleaner_plan,
    encode_clean_metadata,
    encode_cleaner_plan,
)
from hoodie_sink.table.format.clustering_plan import file_groups_under_clustering
from hoodie_sink.table.format.file_group import FileGroup, FileSlice, Listing
from hoodie_sink.table.format.fs_view import list_table_files, replacing_instants
from hoodie_sink.table.format.timeline.instant import (
    CLEAN,
    COMPACTION,
    INFLIGHT,
    REQUESTED,
    WRITE_ACTIONS,
    Instant,
    format_instant,
)
from hoodie_sink.table.format.timeline.timeline import (
    ActiveTimeline,
    Timeline,
    TimelineStore,
    commit_metadata,
)
from hoodie_sink.table.metadata import sync as metadata_sync
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.service_lock import service_lock
from hoodie_sink.table.services.savepoint import savepointed_files
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
GroupKey = tuple[str, str]  # (partition path, file id)


@dataclass(frozen=True)
class CleanConfig:
    policy: str = KEEP_LATEST_COMMITS
    commits_retained: int = 10
    file_versions_retained: int = 3
    hours_retained: int = 24
    incremental: bool = True

    @staticmethod
    def of(cfg: WriteConfig) -> CleanConfig:
        return CleanConfig(cfg.cleaner_policy, cfg.cleaner_commits_retained, cfg.cleaner_file_versions_retained,
                           cfg.cleaner_hours_retained, cfg.cleaner_incremental)  # fmt: skip


@dataclass(frozen=True)
class CleanResult:
    instant: str | None  # the new clean's instant; None when nothing was to delete
    files_deleted: int
    files_failed: int
    partitions_listed: int
    resumed: tuple[str, ...]  # pending cleans finished first
    seconds: float


# ------------------------------------------------------------------------------ planning (pure)


def earliest_commit_to_retain(
    timeline: Timeline, cfg: CleanConfig, now_instant: str | None = None
) -> Instant | None:
    """The ECTR of docs/hudi/services.md#clean-retention; None when the policy keeps everything
    (too few commits) or has no ECTR (KEEP_LATEST_FILE_VERSIONS).  `now_instant`: now minus the
    retained hours, as an instant time in the timeline's zone (KEEP_LATEST_BY_HOURS)."""
    completed = timeline.completed()
    ectr: Instant | None
    if cfg.policy == KEEP_LATEST_COMMITS:
        if len(completed) <= cfg.commits_retained:
            return None
        ectr = completed[len(completed) - cfg.commits_retained]
    elif cfg.policy == KEEP_LATEST_BY_HOURS:
        if now_instant is None:
            raise ValueError("KEEP_LATEST_BY_HOURS needs the cut-off instant")
        ectr = next((i for i in completed if i.timestamp >= now_instant), None)
        if ectr is None:
            return None
    else:
        return None
    pending = [i.timestamp for i in timeline.pending((*WRITE_ACTIONS, COMPACTION))]
    if pending and ectr.timestamp > pending[0]:
        # a pending write may still read (merge from) slices as of its start: keep them
        before = [i for i in completed if i.timestamp < pending[0]]
        return before[-1] if before else None
    return ectr


def plan_clean(
    groups: Iterable[FileGroup],
    replaced: dict[GroupKey, str],
    cfg: CleanConfig,
    ectr: str | None,
    savepointed: frozenset[str] = frozenset(),
    untouchable: frozenset[GroupKey] = frozenset(),
) -> dict[str, tuple[str, ...]]:
    """Files to delete per partition (relative paths).  `groups`: every file group with its
    committed slices (oldest first), replaced ones included; `replaced`: group -> the completed
    replacecommit that replaced it; `untouchable`: groups under pending clustering/compaction."""
    if cfg.policy != KEEP_LATEST_FILE_VERSIONS and ectr is None:
        return {}
    out: dict[str, list[str]] = {}
    for fg in groups:
        key = (fg.partition_path, fg.file_id)
        if key in untouchable or not fg.slices:
            continue
        if key in replaced:
            doomed = fg.slices if cfg.policy == KEEP_LATEST_FILE_VERSIONS or replaced[key] < ectr else []  # type: ignore[operator]
        elif cfg.policy == KEEP_LATEST_FILE_VERSIONS:
            doomed = fg.slices[: max(0, len(fg.slices) - cfg.file_versions_retained)]
        else:
            # the newest slice before the ECTR serves queries as of the ECTR (and may be the latest)
            doomed = [s for s in fg.slices if s.base_instant < ectr][:-1]  # type: ignore[operator]
        for sl in doomed:
            files = _slice_files(sl)
            if savepointed.intersection(files):
                continue
            out.setdefault(fg.partition_path, []).extend(files)
    return {p: tuple(sorted(f)) for p, f in out.items()}


def _slice_files(sl: FileSlice) -> list[str]:
    files = [sl.base_file.path] if sl.base_file is not None else []
    return files + [lf.path for lf in sl.log_files]


def committed_file_groups(listing: Listing, timeline: Timeline) -> list[FileGroup]:
    """Every file group with its committed slices, replaced groups included (the cleaner's view:
    files of pending or failed writes are the rollback's, never the cleaner's)."""
    slices: dict[tuple[str, str, str], FileSlice] = {}
    for bf in listing.base_files:
        if timeline.is_committed(bf.instant):
            slices[(bf.partition_path, bf.file_id, bf.instant)] = FileSlice(
                bf.partition_path, bf.file_id, bf.instant, base_file=bf
            )
    for lf in sorted(listing.log_files):
        if timeline.is_committed(lf.base_instant):
            key = (lf.partition_path, lf.file_id, lf.base_instant)
            slices.setdefault(key, FileSlice(*key)).log_files.append(lf)
    groups: dict[GroupKey, FileGroup] = {}
    for (part, fid, _), sl in sorted(slices.items()):
        groups.setdefault((part, fid), FileGroup(part, fid)).slices.append(sl)
    return list(groups.values())


# ---------------------------------------------------------------------------------------- I/O


def run_clean(target: str | Storage, cfg: CleanConfig | None = None) -> CleanResult:
    """Finish pending cleans, then plan and execute a new one if anything is to delete."""
    storage = target if isinstance(target, Storage) else Storage(target)
    cfg = cfg or CleanConfig()
    started = time.monotonic()
    with service_lock(storage, "clean", "clean"):
        timeline = ActiveTimeline.load(storage)  # under the lock: every earlier clean is on it
        resumed = tuple(_finish_pending(storage, timeline))
        if resumed:
            timeline = ActiveTimeline.load(storage)
        plan, listed = _plan(storage, timeline, cfg)
        if plan is None:
            return CleanResult(None, 0, 0, listed, resumed, time.monotonic() - started)
        store = TimelineStore(storage)
        content = encode_cleaner_plan(plan, storage.base_uri)
        requested = store.create_requested_at_new_time(timeline.last_instant_time(), CLEAN, content)
        deleted, failed = _execute(storage, store, requested, plan, started)
    result = CleanResult(requested.timestamp, deleted, failed, listed, resumed, time.monotonic() - started)
    log.info("hoodie: clean %s of %s deleted %d files (%d failed) in %.2fs, %d partitions listed",
             result.instant, storage.base_uri, deleted, failed, result.seconds, listed)  # fmt: skip
    return result


def _finish_pending(storage: Storage, timeline: Timeline) -> list[str]:
    store = TimelineStore(storage)
    done = []
    for inst in timeline.pending((CLEAN,)):
        path = store.path(inst.with_state(REQUESTED))
        try:
            plan = decode_cleaner_plan(storage.read_bytes(path))
        except (FileNotFoundError, ValueError, KeyError) as e:
            raise HoodieTableError(
                f"Cannot finish the pending clean {inst.timestamp} on {storage.base_uri}: its plan "
                f"{storage.full(path)} is unusable ({e}). Help: remove the clean's requested and inflight "
                "files (no data file is lost: a clean only deletes)."
            ) from e
        _execute(
            storage,
            store,
            inst.with_state(REQUESTED),
            plan,
            time.monotonic(),
            inflight=inst.state != REQUESTED,
        )
        done.append(inst.timestamp)
    return done


def _execute(
    storage: Storage, store: TimelineStore, requested: Instant, plan: CleanerPlan, started: float,
    inflight: bool = False,
) -> tuple[int, int]:  # fmt: skip
    content = encode_cleaner_plan(plan, storage.base_uri)
    current = requested.with_state(INFLIGHT) if inflight else store.transition_to_inflight(requested, content)
    files = [f for rels in plan.files.values() for f in rels]

    def delete(rel: str) -> str | None:
        try:
            storage.delete(rel)  # a file already gone (a redo) counts as deleted, as in Java
            return None
        except OSError as e:
            log.warning("hoodie: clean %s could not delete %s: %s", requested.timestamp, storage.full(rel), e)
            return rel

    with ThreadPoolExecutor(max_workers=8) as pool:  # object stores: one request per file
        failed = {f for f in pool.map(delete, files) if f is not None}
    deleted = set(files) - failed
    taken_ms = int((time.monotonic() - started) * 1000)
    metadata_sync.on_clean(storage, requested.timestamp, deleted)
    store.complete(current, encode_clean_metadata(requested.timestamp, taken_ms, plan, deleted, failed))
    return len(deleted), len(failed)


def _plan(storage: Storage, timeline: ActiveTimeline, cfg: CleanConfig) -> tuple[CleanerPlan | None, int]:
    cutoff = None
    if cfg.policy == KEEP_LATEST_BY_HOURS:
        now = datetime.now(timezone.utc) - timedelta(hours=cfg.hours_retained)
        cutoff = format_instant(now, TimelineStore(storage).zone)
    ectr = earliest_commit_to_retain(timeline, cfg, cutoff)
    if cfg.policy != KEEP_LATEST_FILE_VERSIONS and ectr is None:
        return None, 0
    replaced = replacing_instants(storage, timeline)
    partitions = _partitions_to_scan(storage, timeline, cfg, ectr)
    listing = list_table_files(storage, sorted(partitions) if partitions is not None else None)
    groups = committed_file_groups(listing, timeline)
    untouchable = frozenset(file_groups_under_clustering(storage, timeline)) | _under_compaction(
        storage, timeline
    )
    files = plan_clean(groups, replaced, cfg, ectr.timestamp if ectr else None,
                       savepointed_files(storage, timeline), untouchable)  # fmt: skip
    listed = len(partitions) if partitions is not None else len(listing.partitions)
    if not files:
        return None, listed
    latest = timeline.latest_completed()
    plan = CleanerPlan(
        policy=cfg.policy,
        earliest_to_retain=(ectr.timestamp, ectr.action) if ectr else None,
        last_completed_commit=latest.timestamp if latest else "",
        files=files,
    )
    return plan, listed


def _partitions_to_scan(
    storage: Storage, timeline: ActiveTimeline, cfg: CleanConfig, ectr: Instant | None
) -> set[str] | None:
    """The partitions written by completed commits in [previous clean's ECTR, new ECTR): only
    there can a slice have become deletable since.  None: list the whole table."""
    if not cfg.incremental or cfg.policy == KEEP_LATEST_FILE_VERSIONS or ectr is None:
        return None
    last_clean = timeline.latest_completed((CLEAN,))
    if last_clean is None:
        return None
    previous = decode_clean_metadata(storage.read_bytes(TimelineStore(storage).path(last_clean)))
    prev_ectr = previous.get("earliestCommitToRetain") or ""
    completed = timeline.completed()
    if not prev_ectr or not completed or prev_ectr < completed[0].timestamp:
        return None  # no previous ECTR, or it left the active timeline: we cannot tell what changed
    out: set[str] = set()
    for inst in completed:
        if prev_ectr <= inst.timestamp < ectr.timestamp:
            md = commit_metadata(storage, timeline, inst)
            out.update(md.partition_to_write_stats())
            out.update(md.partition_to_replace_file_ids or {})
    return out


def _under_compaction(storage: Storage, timeline: Timeline) -> frozenset[GroupKey]:
    """File groups of pending compaction plans (Java-written MOR tables): their slices stay."""
    out: set[GroupKey] = set()
    store = TimelineStore(storage)
    for inst in timeline.pending((COMPACTION,)):
        try:
            record = decode_record(storage.read_bytes(store.path(inst.with_state(REQUESTED))))
        except (FileNotFoundError, ValueError) as e:
            raise HoodieTableError(
                f"Cannot clean {storage.base_uri}: the plan of pending compaction {inst.timestamp} is unreadable "
                f"({e}), so the file groups it needs are unknown. Help: complete or roll back the compaction "
                "with Apache Hudi first."
            ) from e
        out.update((op.get("partitionPath") or "", op["fileId"]) for op in record.get("operations") or [])
    return frozenset(out)
