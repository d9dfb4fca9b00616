"""The route's insert step (docs/design/routing.md#our-plan, step 3): the inserts of the whole
write, counted per partition by the tag tasks, planned once in the driver into small files and
sized new file groups (write/insert_buckets.py), then each insert's file group filled in by the
route's tasks from a hash of its key."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.write_operation import ASSIGNED
from hoodie_sink.table.write.bucket_assigner import small_files_of
from hoodie_sink.table.write.context import WriteContext
from hoodie_sink.table.write.insert_buckets import InsertBuckets, SmallFile, int_spread, plan_insert_buckets
from hoodie_sink.table.write.routing import columns as route


def plan_inserts(ctx: WriteContext, counts: Mapping[str, int], nonce: str) -> InsertBuckets:
    """`counts`: the write's inserts per partition path.  Metadata only: one entry per file
    group that takes inserts.  Append and bulk_insert never rewrite a file: new file groups only."""
    small = (
        {
            part: [SmallFile(bf.file_id, bf.size) for bf in files]
            for part, files in small_files_of(ctx).items()
        }
        if ctx.plan.operation.writer == ASSIGNED
        else {}
    )
    return plan_insert_buckets(counts, small, ctx.plan.sizing, nonce)


def with_insert_file_ids(batch: pa.RecordBatch, buckets: InsertBuckets) -> pa.RecordBatch:
    """The batch with the file group of each of its inserts filled in."""
    names = batch.schema.names
    fid_at = names.index(route.FILE_ID)
    fids = batch.column(fid_at)
    todo = pc.and_(batch.column(names.index(route.INSERT)), pc.is_null(fids))
    if not pc.any(todo).as_py():
        return batch
    rows = pc.indices_nonzero(todo)
    keys = pc.take(batch.column(names.index(route.KEY)), rows)
    # keyless records (append) have no key yet: they are spread by their arrival order
    spread = (
        None
        if keys.null_count < len(keys)
        else int_spread(pc.take(batch.column(names.index(route.ORDER)), rows))
    )
    planned = buckets.file_ids_of(pc.take(batch.column(names.index(route.PARTITION)), rows), keys, spread)
    # scatter: the planned ids at the insert rows, the tagged ids elsewhere
    where = pc.cumulative_sum(pc.cast(todo, pa.int64()))
    at = pc.max_element_wise(pc.subtract(where, 1), 0)  # clipped: rows before the first insert
    filled = pc.if_else(todo, pc.take(planned, at), fids)
    return batch.set_column(fid_at, route.FILE_ID, filled)
