"""The task side of insert and bulk_insert: key, buffer, sort, write files.

Each task buffers incoming Arrow batches (with their record keys and partition paths) until
the buffer passes its byte budget or the input ends, then flushes: one sort by (partition
path, record key) for bulk_insert, a stable grouping by partition for insert, and a rolling
file writer per partition that opens a new file group at the maximum file size.  Memory is
bounded by the budget whatever the size of the input.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.commit import WriteContext
from hoodie_sink.table.file_group import file_id, new_file_id_prefix, write_token
from hoodie_sink.table.instant_guard import InstantGuard
from hoodie_sink.table.keygen import KeyGenerator, keygen_config_of
from hoodie_sink.table.metadata import WriteStat
from hoodie_sink.table.schema import cast_to_storage
from hoodie_sink.table.writers.base_file import (
    BaseFileWriter,
    ParquetSettings,
    RollingBaseFileWriter,
    file_schema,
)


@dataclass(frozen=True)
class TaskIdentity:
    partition_id: int = 0
    stage_id: int = 0
    task_attempt_id: int = 0
    attempt_number: int = 0
    only_task: bool = False  # the write's sole task (the engine API): nobody else can contend

    @property
    def token(self) -> str:
        return write_token(self.partition_id, self.stage_id, self.task_attempt_id)


@dataclass
class TaskResult:
    """The commit message of one task attempt."""

    instant: str
    partition_id: int
    attempt_number: int
    write_stats: list[WriteStat] = field(default_factory=list)
    num_records: int = 0
    duration_ms: int = 0


def keygen_for(ctx: WriteContext) -> KeyGenerator:
    return KeyGenerator(keygen_config_of(ctx.config))


def parquet_settings(ctx: WriteContext) -> ParquetSettings:
    return parquet_settings_of(ctx.config)


def parquet_settings_of(c: WriteConfig) -> ParquetSettings:
    return ParquetSettings(
        compression=c.compression,
        max_file_size=c.max_file_size,
        row_group_bytes=c.row_group_bytes,
        bloom_type=c.bloom_type,
        bloom_num_entries=c.bloom_num_entries,
        bloom_fpp=c.bloom_fpp,
        bloom_max_entries=c.bloom_max_entries,
    )


class InsertTask:
    """Writes one task's share of an insert or bulk_insert into new file groups."""

    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.keygen = keygen_for(ctx)
        self.settings = parquet_settings(ctx)
        self.schema = file_schema(ctx.data_schema)
        self.sort_by_key = ctx.config.operation in ("bulk_insert",)
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
        return self.result

    def add(self, batch: pa.RecordBatch) -> None:
        data = select_data(batch, self.ctx.data_schema, self.ctx.config.set_null_for_missing_columns)
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
        data, keys, parts = data.take(order), keys.take(order).combine_chunks(), parts.take(order).combine_chunks()
        ends = pc.run_end_encode(parts)
        run_ends = ends.run_ends.to_pylist()
        values = ends.values.to_pylist()
        start = 0
        for end, part in zip(run_ends, values):
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


def select_data(batch: pa.RecordBatch, schema: pa.Schema, fill_missing: bool = False) -> pa.RecordBatch:
    """The data columns of `batch` in table order, cast to the storage types.  `fill_missing`
    (hoodie.write.set.null.for.missing.columns) writes nulls for columns the batch lacks."""
    missing = [n for n in schema.names if n not in batch.schema.names]
    if missing and not fill_missing:
        raise HoodieSchemaError(f"Input batch lacks column(s) {', '.join(missing)} of the write schema.")
    cols = [batch.column(i) if (i := batch.schema.get_field_index(f.name)) >= 0 else pa.nulls(batch.num_rows, f.type)
            for f in schema]  # fmt: skip
    picked = pa.RecordBatch.from_arrays(cols, names=schema.names)
    return cast_to_storage(picked, schema)
