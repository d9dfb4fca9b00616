"""Write conflicts: a write may not publish new versions of file groups that a pending clustering
will replace (hoodie.clustering.updates.strategy=reject).  Checked by tasks early and by the
coordinator at the commit point."""

from __future__ import annotations

from hoodie_sink.errors import HoodieWriteConflictError
from hoodie_sink.table.format.clustering_plan import file_groups_under_clustering
from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.timeline.instant import REPLACE_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.write.context import WriteContext


def check_clustering_conflicts(ctx: WriteContext, stats: list[WriteStat]) -> None:
    """Refuse to publish new versions of file groups that a clustering scheduled since this
    write began will replace (or has replaced): the clustering rewrites their old version and
    would drop these changes (Hudi's reject-updates strategy, checked again at the commit)."""
    rewritten = {(s.partition_path, s.file_id) for s in stats if s.prev_commit not in (None, "", "null")}
    if not rewritten:
        return
    storage = ctx.storage
    timeline = Timeline.load(storage)
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
