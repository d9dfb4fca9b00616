"""Write conflicts: a write may not publish new versions of file groups that a pending clustering
will replace (hoodie.clustering.updates.strategy=reject).  Checked by tasks early and by the
coordinator at the commit point.

Under optimistic concurrency control, also Java's SimpleConcurrentFileWritesConflictResolutionStrategy,
checked at the commit under the table lock: a write conflicts with a write completed since it
began (after the last write completed then, or pending then) or a compaction scheduled after it,
when both changed a file group (partition path, file id).  Inserts into new file groups never
conflict (their file ids are new); inserts packed into an existing small file do."""

from __future__ import annotations

from hoodie_sink.errors import HoodieWriteConflictError
from hoodie_sink.table.format.clustering_plan import file_groups_under_clustering
from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.compaction_plan import decode_compaction_plan
from hoodie_sink.table.format.timeline.instant import COMPACTION, REPLACE_COMMIT, REQUESTED, WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.write.context import WriteContext


def check_clustering_conflicts(
    ctx: WriteContext, stats: list[WriteStat], timeline: Timeline | None = None
) -> None:
    """Refuse to publish new versions of file groups that a clustering scheduled since this
    write began will replace (or has replaced): the clustering rewrites their old version and
    would drop these changes (Hudi's reject-updates strategy, checked again at the commit)."""
    rewritten = {(s.partition_path, s.file_id) for s in stats if s.prev_commit not in (None, "", "null")}
    if not rewritten:
        return
    storage = ctx.storage
    timeline = timeline if timeline is not None else Timeline.load(storage)
    conflicts = {
        fg: ts for fg, ts in file_groups_under_clustering(storage, timeline).items() if fg in rewritten
    }
    store = TimelineStore(storage)
    for inst in timeline.completed((REPLACE_COMMIT,)):
        if inst.timestamp > ctx.instant:
            md = CommitMetadata.from_json(store.read_json(inst))
            for part, ids in (md.partition_to_replace_file_ids or {}).items():
                conflicts.update({(part, f): inst.timestamp for f in ids if (part, f) in rewritten})
    if conflicts:
        raise clustering_conflict(ctx.config.path, conflicts)


def clustering_conflict(path: str, conflicts: dict[tuple[str, str], str]) -> HoodieWriteConflictError:
    (part, fid), ts = min(conflicts.items())
    return HoodieWriteConflictError(
        f"The write changes {len(conflicts)} file group(s) of the table at {path} that clustering "
        f"{ts} is rewriting (e.g. file group {fid} in partition '{part}'); updates and deletes of file "
        "groups under pending clustering are refused (hoodie.clustering.updates.strategy=reject). Nothing "
        "of this write was committed. Help: retry after the clustering completes, or cluster only "
        "partitions that take no updates (hoodie.clustering.plan.strategy.partition.regex.pattern)."
    )


def check_concurrent_writes(ctx: WriteContext, stats: list[WriteStat], timeline: Timeline) -> None:
    """Refuse to publish when a write that completed since this one began changed a file group this
    one changed too (the later commit would hide the other's changes).  Run under the table lock, on
    a `timeline` loaded under it."""
    ours = {(s.partition_path, s.file_id) for s in stats}
    if not ours:
        return
    storage = ctx.storage
    store = TimelineStore(storage)
    since = set(ctx.pending_at_begin)
    for inst in timeline.completed(WRITE_ACTIONS):
        if inst.timestamp == ctx.instant:
            continue
        if not (ctx.last_completed is None or inst.timestamp > ctx.last_completed or inst.timestamp in since):
            continue
        md = CommitMetadata.from_json(store.read_json(inst))
        theirs = {(s.partition_path, s.file_id) for s in md.write_stats}
        theirs |= {(p, f) for p, ids in (md.partition_to_replace_file_ids or {}).items() for f in ids}
        if md.compacted and inst.timestamp < ctx.instant:
            continue  # a compaction planned before this write: Java lets it pass (our logs follow it)
        _raise_if_overlap(ctx, ours & theirs, inst.timestamp, inst.action)
    for inst in timeline.pending((COMPACTION,)):  # compactions scheduled after this write began
        if inst.timestamp > ctx.instant:
            plan = decode_compaction_plan(storage.read_bytes(store.path(inst.with_state(REQUESTED))))
            _raise_if_overlap(
                ctx, ours & {(op.partition_path, op.file_id) for op in plan}, inst.timestamp, "compaction"
            )


def _raise_if_overlap(ctx: WriteContext, overlap: set[tuple[str, str]], instant: str, action: str) -> None:
    if not overlap:
        return
    part, fid = min(overlap)
    raise HoodieWriteConflictError(
        f"Write {ctx.instant} on {ctx.config.path} conflicts with {action} {instant}, which changed "
        f"{len(overlap)} of the same file group(s) since this write began (e.g. file group {fid} in partition "
        f"'{part}'): java.util.ConcurrentModificationException: Cannot resolve conflicts for overlapping "
        "writes. Nothing of this write was committed (its files are rolled back); it is safe to retry."
    )
