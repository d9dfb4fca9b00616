"""What the commit of a routed write checks, on metadata only (docs/design/routing.md#our-plan).

Claims used to guarantee that one task writes a file group; with a routed input the route's
shuffle does, and this check makes a broken route an error instead of a table with two versions
of a file group.  That every task writes routes made for its operation, on the snapshot the write
began on, each task checks before it writes anything (`check_routed_on`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieCommitError, HoodieConfigError, HoodieWriteConflictError
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


def check_routed_on(ctx: WriteContext, base: pa.Array) -> None:
    """Raises unless every row of a batch (its BASE route column) was routed for this write's
    operation on the snapshot it began on (coordinator.route_fingerprint: "<operation>@<snapshot>")."""
    expected = ctx.routed_on or ""
    if pc.all(pc.equal(base, expected)).as_py():
        return
    seen = sorted(set(pc.unique(base).to_pylist()) - {expected})[0] or "@"
    op, snapshot = seen.split("@", 1)
    want_op, want_snapshot = expected.split("@", 1)
    path = ctx.config.path
    if op != want_op:
        raise HoodieConfigError(
            f"This write's input was routed for operation '{op}', but it is written to {path} as '{want_op}'. "
            "Nothing of this write is committed. Help: route and write with the same options."
        )
    raise HoodieWriteConflictError(
        f"This write's input was routed on the snapshot [{snapshot or 'no table'}] of {path}, but the write "
        f"started on [{want_snapshot or 'no table'}]: another write, compaction or clustering came between, and "
        "the routes may be stale. Nothing of this write is committed. Help: route the input again and write "
        "again (hoodie_sink.spark.micro_batches does this per micro-batch)."
    )
