"""The task side of the append operation: log-style data, written as fast as Parquet allows.

No index lookup, no merge into existing files, no small-file packing, no sorting: each task
buffers records per partition (its buckets) and every flush of a bucket opens new file groups,
split at the maximum file size.  A bucket flushes when it passes `bucket_buffer_bytes`, the
largest bucket when the task's buffer passes `task_buffer_bytes`, and every bucket at the end,
so memory stays bounded whatever the input.  This is the append mode of Hudi's Flink writer;
the small files it leaves are what clustering is for.

Keyless tables (no record key field): each record gets the key
``<instant>_<task partition id>_<row number in the task>``, the scheme of Hudi's auto-generated
record keys (``HoodieRecord.generateSequenceId``).  It is unique in the table: the instant is
unique per write and the partition id per task of a write; a retried task attempt numbers the
same input the same way, and only one attempt's files are committed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.file_group import file_id, new_file_id_prefix
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, RollingBaseFileWriter, file_schema
from hoodie_sink.table.write.context import (
    TaskIdentity,
    TaskResult,
    WriteContext,
    keygen_for,
    select_data,
)
from hoodie_sink.table.write.instant_guard import InstantGuard


def generated_keys(instant: str, partition_id: int, first_row: int, n: int) -> pa.Array:
    """Auto-generated record keys for `n` rows numbered from `first_row` in one task."""
    rows = pc.cast(pa.array(np.arange(first_row, first_row + n, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(f"{instant}_{partition_id}_", rows, "")


class AppendTask:
    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.cfg = ctx.config
        self.keyless = not self.cfg.record_key_fields
        self.keygen = keygen_for(ctx)
        self.settings = ctx.plan.parquet
        self.schema = file_schema(ctx.data_schema)
        self.storage = ctx.storage
        self.guard = InstantGuard(self.storage, ctx.instant, ctx.action)
        self.result = TaskResult(ctx.instant, task.partition_id, task.attempt_number)
        self._buckets: dict[str, list[tuple[pa.Table, pa.Array]]] = {}  # partition -> (data, keys)
        self._bucket_bytes: dict[str, int] = {}
        self._buffered = 0
        self._rows = 0
        self._prefix = new_file_id_prefix()
        self._next_file = 0

    def write(self, batches: Iterable[pa.RecordBatch]) -> TaskResult:
        started = time.monotonic()
        for batch in batches:
            if batch.num_rows:
                self._add(batch)
        for part in list(self._buckets):
            self._flush(part)
        pa.default_memory_pool().release_unused()
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        self.result.phase_ms["write"] = self.result.duration_ms  # no index: the whole task writes
        return self.result

    def _add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if self.keyless:
            keys = generated_keys(self.ctx.instant, self.task.partition_id, self._rows, n)
        else:
            keys = self.keygen.record_keys(batch)
        parts = self.keygen.partition_paths(batch)
        data = pa.Table.from_batches(
            [select_data(batch, self.ctx.data_schema, self.ctx.config.fills_missing_columns)]
        )
        self._rows += n
        self.result.num_records += n
        for part, rows, row_keys in _split_by_partition(data, keys, parts):
            self._buckets.setdefault(part, []).append((rows, row_keys))
            size = rows.nbytes
            self._bucket_bytes[part] = self._bucket_bytes.get(part, 0) + size
            self._buffered += size
            if self._bucket_bytes[part] >= self.cfg.bucket_buffer_bytes:
                self._flush(part)
        while self._buffered >= self.cfg.task_buffer_bytes and self._bucket_bytes:
            self._flush(max(self._bucket_bytes, key=lambda b: self._bucket_bytes[b]))

    def _flush(self, part: str) -> None:
        chunks = self._buckets.pop(part, [])
        self._buffered -= self._bucket_bytes.pop(part, 0)
        if not chunks:
            return
        data = pa.concat_tables([d for d, _ in chunks])
        keys = pa.chunked_array([k for _, k in chunks], pa.string()).combine_chunks()

        def new_writer() -> BaseFileWriter:
            fid = file_id(self._prefix, self._next_file)
            self._next_file += 1
            return BaseFileWriter(
                self.storage, part, fid, self.task.token, self.ctx.instant, self.task.partition_id,
                self.schema, self.ctx.avro_with_meta, self.settings, guard=self.guard,
            )  # fmt: skip

        self.result.write_stats.extend(RollingBaseFileWriter(new_writer, self.settings).write_all(data, keys))


def _split_by_partition(data: pa.Table, keys: pa.Array, parts: pa.Array):
    """(partition path, rows, keys) per partition present in the batch, in first-seen order.

    Grouping goes through the dictionary codes of the partition column (a stable integer
    argsort), not a string sort of every row."""
    if len(parts) == 0:
        return
    encoded = pc.dictionary_encode(parts)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    values = encoded.dictionary.to_pylist()
    if len(values) == 1:
        yield values[0], data, keys
        return
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    starts = np.r_[0, bounds]
    ends = np.r_[bounds, len(codes)]
    take = pa.array(order)
    data, keys = data.take(take), keys.take(take)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        yield values[int(sorted_codes[s])], data.slice(s, e - s), keys.slice(s, e - s)
