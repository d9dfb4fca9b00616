"""What the commit of a routed write checks, on metadata only (docs/design/routing.md#our-plan).

Claims used to guarantee that one task writes a file group; with a routed input the route's
shuffle does, and this check makes a broken route an error instead of a table with two versions
of a file group.  (That every task wrote against the snapshot the write began on is checked in
the tasks, routing/task.py, before anything is written.)"""

from __future__ import annotations

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.write.context import TaskResult, WriteContext


def checked_routed_stats(ctx: WriteContext, results: list[TaskResult]) -> list[WriteStat]:
    """The write stats of every task; raises if a file group was written by two tasks."""
    writer: dict[str, int] = {}
    for r in results:
        for s in r.write_stats:
            first = writer.setdefault(s.file_id, r.partition_id)
            if first != r.partition_id:
                raise HoodieCommitError(
                    f"File group {s.file_id} (partition '{s.partition_path}') of {ctx.config.path} was written by "
                    f"two tasks of routed write {ctx.instant} (Spark partitions {first} and {r.partition_id}): the "
                    "input was not routed by file group. Nothing of this write is committed. Help: write the "
                    "DataFrame hoodie_sink.spark.route returns as it is, without repartitioning it."
                )
    return [s for r in results for s in r.write_stats]
