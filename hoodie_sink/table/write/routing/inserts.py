"""The route's insert step (docs/design/routing.md#our-plan, step 3): the inserts of the whole
write, counted per partition by the tag tasks, planned once in the driver into small files and
sized new file groups (write/insert_buckets.py), then each insert's file group filled in by the
route's tasks from a hash of its key, in Spark SQL (FILE_ID_SQL over `plan_table`: no pass of
the rows through Python)."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from hoodie_sink.table.format.write_operation import ASSIGNED
from hoodie_sink.table.write.bucket_assigner import small_files_of
from hoodie_sink.table.write.context import WriteContext
from hoodie_sink.table.write.insert_buckets import InsertBuckets, SmallFile, plan_insert_buckets
from hoodie_sink.table.write.routing import columns as route

PLAN_INSERTS, PLAN_ENDS, PLAN_FILE_IDS = "_hoodie_plan_inserts", "_hoodie_plan_ends", "_hoodie_plan_file_ids"
PLAN_SCHEMA = pa.schema([(route.PARTITION, pa.string()), (PLAN_INSERTS, pa.int64()),
                         (PLAN_ENDS, pa.list_(pa.int64())), (PLAN_FILE_IDS, pa.list_(pa.string()))])  # fmt: skip
# An insert's spread: Spark's xxhash64 (seed 42) of its record key, or of its arrival order
# written in decimal for a keyless record.  Its share of the partition's range is the spread
# modulo the partition's inserts; its bucket the first whose end is above the share.
SPREAD_SQL = f"xxhash64(coalesce({route.KEY}, cast({route.ORDER} as string)))"
FILE_ID_SQL = (
    f"CASE WHEN {route.FILE_ID} IS NULL AND {route.INSERT} THEN element_at({PLAN_FILE_IDS}, "
    f"size(filter({PLAN_ENDS}, e -> e <= pmod({SPREAD_SQL}, {PLAN_INSERTS}))) + 1) ELSE {route.FILE_ID} END"
)


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


def plan_table(buckets: InsertBuckets) -> pa.Table:
    """One row per partition with inserts (PLAN_SCHEMA): the route joins it to its rows (a broadcast:
    one row per partition) and applies the bucket rule of insert_buckets.py with FILE_ID_SQL."""
    parts = sorted(buckets.by_partition)
    rows = [buckets.by_partition[p] for p in parts]
    return pa.Table.from_arrays(
        [pa.array(parts, pa.string()), pa.array([b.inserts for b in rows], pa.int64()),
         pa.array([list(b.ends) for b in rows], pa.list_(pa.int64())),
         pa.array([list(b.file_ids) for b in rows], pa.list_(pa.string()))],
        schema=PLAN_SCHEMA,
    )  # fmt: skip
