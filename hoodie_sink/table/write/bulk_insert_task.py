"""The task side of bulk_insert and insert_overwrite(_table): key, buffer, sort, write new file groups.

No index lookup and no small-file packing (insert and upsert go through the bucket assigner,
upsert_task.py).

Each task buffers incoming Arrow batches (with their record keys and partition paths) until
the buffer passes its byte budget or the input ends, then flushes: one sort by (partition
path, record key) for bulk_insert, a stable grouping by partition for insert_overwrite, and a rolling
file writer per partition that opens a new file group at the maximum file size.  Memory is
bounded by the budget whatever the size of the input.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.file_group import file_id, new_file_id_prefix
from hoodie_sink.table.write.base_file_writer import (
    BaseFileWriter,
    RollingBaseFileWriter,
    file_schema,
)
from hoodie_sink.table.write.context import (
    TaskIdentity,
    TaskResult,
    WriteContext,
    keygen_for,
    select_data,
)
from hoodie_sink.table.write.instant_guard import InstantGuard


class BulkInsertTask:
    """Writes one task's share of a bulk_insert or insert_overwrite into new file groups."""

    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.keygen = keygen_for(ctx)
        self.settings = ctx.plan.parquet
        self.schema = file_schema(ctx.data_schema)
        self.sort_by_key = ctx.plan.operation.sorts_by_key
        self._prefix = new_file_id_prefix()
        self._next_file = 0
        self._buffer: list[tuple[pa.RecordBatch, pa.Array, pa.Array]] = []
        self._buffered_bytes = 0
        self.result = TaskResult(ctx.instant, task.partition_id, task.attempt_number)
        self._guard: InstantGuard | None = None

    def write(self, batches: Iterable[pa.RecordBatch]) -> TaskResult:
        started = time.monotonic()
        storage = self.ctx.storage
        self._storage = storage
        self._guard = InstantGuard(storage, self.ctx.instant, self.ctx.action)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self.add(batch)
            if self._buffered_bytes >= self.ctx.config.task_buffer_bytes:
                self.flush()
        self.flush()
        pa.default_memory_pool().release_unused()  # idle workers need not keep the peak
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        self.result.phase_ms["write"] = self.result.duration_ms  # no index: the whole task writes
        return self.result

    def add(self, batch: pa.RecordBatch) -> None:
        data = select_data(batch, self.ctx.data_schema, self.ctx.config.fills_missing_columns)
        keys = self.keygen.record_keys(batch)
        parts = self.keygen.partition_paths(batch)
        self._buffer.append((data, keys, parts))
        self._buffered_bytes += data.nbytes
        self.result.num_records += batch.num_rows

    def flush(self) -> None:
        if not self._buffer:
            return
        data = pa.Table.from_batches([b for b, _, _ in self._buffer], schema=self.ctx.data_schema)
        keys = pa.chunked_array([k for _, k, _ in self._buffer], type=pa.string())
        parts = pa.chunked_array([p for _, _, p in self._buffer], type=pa.string())
        self._buffer.clear()
        self._buffered_bytes = 0

        sort_keys = [("p", "ascending"), ("k", "ascending")] if self.sort_by_key else [("p", "ascending")]
        order = pc.sort_indices(pa.table({"p": parts, "k": keys}), sort_keys=sort_keys)
        data, keys, parts = (
            data.take(order),
            keys.take(order).combine_chunks(),
            parts.take(order).combine_chunks(),
        )
        ends = pc.run_end_encode(parts)
        run_ends = ends.run_ends.to_pylist()
        values = ends.values.to_pylist()
        start = 0
        for end, part in zip(run_ends, values, strict=True):
            self._write_partition(part, data.slice(start, end - start), keys.slice(start, end - start))
            start = end

    def _write_partition(self, partition_path: str, data: pa.Table, keys: pa.Array) -> None:
        def new_writer() -> BaseFileWriter:
            fid = file_id(self._prefix, self._next_file)
            self._next_file += 1
            return BaseFileWriter(
                self._storage, partition_path, fid, self.task.token, self.ctx.instant,
                self.task.partition_id, self.schema, self.ctx.avro_with_meta, self.settings,
                guard=self._guard,
            )  # fmt: skip

        self.result.write_stats.extend(RollingBaseFileWriter(new_writer, self.settings).write_all(data, keys))
