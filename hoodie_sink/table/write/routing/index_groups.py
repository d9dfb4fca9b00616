"""The route's tag shuffle for the record index (docs/design/routing.md#record-index-tag-shuffle).

A route shuffles records by key before its tag step, so that every key is tagged in one task.
With RECORD_INDEX a task's look-up reads the record-index blocks its keys can lie in; with keys
hashed by Spark, every task holds keys of every record-index file group, and a batch of random
keys makes every task read nearly the whole index: N tag tasks, N times the index.  Shuffling by
the key's record-index file group instead (Hudi's own hash, `metadata_keys.file_group_indexes`)
gives each task the keys of a few file groups only, so the index is read about once per write,
as Hudi's Spark writer reads it (it partitions its look-up by file group too).  The file group
is a function of the key, so a key's records still meet in one task."""

from __future__ import annotations

import pyarrow as pa

from hoodie_sink.table.format.metadata_keys import file_group_indexes
from hoodie_sink.table.write.context import WriteContext, keygen_for

GROUP = "_hoodie_route_index_group"


def record_index_groups(ctx: WriteContext) -> int | None:
    """The record index's file-group count when the write tags through it, else None (another
    index, or a table whose record index is not built yet).  Metadata only."""
    return ctx.plan.index.lookup_groups(ctx.storage)


def with_index_group(ctx: WriteContext, groups: int, batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with its keys' record-index file groups (int32) in column GROUP, vectorised."""
    keys = keygen_for(ctx).record_keys(batch)
    return batch.append_column(GROUP, pa.array(file_group_indexes(keys, groups), pa.int32()))
