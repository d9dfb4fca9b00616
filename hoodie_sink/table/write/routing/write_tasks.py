"""Which write task of a routed write takes each file group (docs/design/routing.md#write-tasks):
planned in the driver from the tag step's counts, so that the tasks get about the same work.

A hash of the file id spreads file groups over the tasks only as well as chance does: 20 file
groups in 2 tasks were measured split 15 to 5, and the write took as long as the larger share.
Here each file group's work is estimated (the bytes it writes: its records at the table's average
record size, plus, on copy-on-write, the base file its merge rewrites), and the file groups are
dealt out largest first, each to the task with the least work so far (the LPT rule: within 4/3
of the best possible longest task).  Metadata only: one entry per file group the write touches."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from hoodie_sink.table.write.context import WriteContext


def assign_write_tasks(ctx: WriteContext, records: Mapping[str, int], tasks: int) -> dict[str, int]:
    """The task (0 to `tasks` - 1) of each file group; `records`: the records routed to each."""
    if tasks < 1:
        raise ValueError(f"a routed write needs at least one write task, got {tasks}")
    record_bytes = max(ctx.plan.sizing.avg_record_size, 1)
    rewritten = {} if ctx.plan.merge_on_read else {bf.file_id: bf.size for bf in ctx.base_files}
    work = sorted(
        ((n * record_bytes + rewritten.get(fid, 0), fid) for fid, n in records.items()), reverse=True
    )
    loads = [(0, t) for t in range(tasks)]  # (work so far, task): a min-heap
    out: dict[str, int] = {}
    for size, fid in work:
        load, task = heapq.heappop(loads)
        out[fid] = task
        heapq.heappush(loads, (load + size, task))
    return out
