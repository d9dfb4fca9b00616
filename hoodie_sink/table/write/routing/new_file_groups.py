"""Routing of the operations that only add file groups: append and bulk_insert
(docs/design/routing.md#operations-that-only-add-file-groups).

They look nothing up and combine nothing, so the route needs no shuffle by key: each task of the
user's input tags its records where they are (`NewFileGroupTagger`: partition path, record key,
arrival order), the route plans sized new file groups for the whole write from the counts per
partition (inserts.py, with no small files to fill: these operations never rewrite a file), and
shuffles the records by file group.  The sink's task (`NewFileGroupTask`) then streams each file
group it gets into its base file, as the unrouted append and bulk_insert tasks write theirs;
without the route each of those tasks opens its own file groups in every partition it sees.

Keyless tables (append without a record key): the route leaves the key null, spreads the records
over the planned file groups by their arrival order, and the writing task generates the keys,
as the unrouted append task does (append_task.generated_keys)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.write.append_task import generated_keys
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, RollingBaseFileWriter, file_schema
from hoodie_sink.table.write.context import TaskIdentity, TaskResult, WriteContext, keygen_for, select_data
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.merge import UPSERT
from hoodie_sink.table.write.routing import columns as route
from hoodie_sink.table.write.routing.checks import check_routed_on


class NewFileGroupTagger:
    """The tag step of an append or bulk_insert route, in one task of the user's input."""

    def __init__(self, ctx: WriteContext, fingerprint: str):
        self.keygen = keygen_for(ctx)
        self.keyless = not ctx.config.record_key_fields
        self.fingerprint = fingerprint

    def tag(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The task's rows (the user's columns and ARRIVAL) with the route columns, file id unset."""
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            arrival = batch.schema.get_field_index(route.ARRIVAL)
            keys = pa.nulls(n, pa.string()) if self.keyless else self.keygen.record_keys(batch)
            cols = [batch.column(i) for i in range(batch.num_columns) if i != arrival] + [
                pa.nulls(n, pa.string()),
                self.keygen.partition_paths(batch),
                keys,
                batch.column(arrival),
                pa.repeat(pa.scalar(UPSERT, pa.int8()), n),
                pa.repeat(pa.scalar(True), n),
                pa.repeat(pa.scalar(False), n),
                pa.repeat(pa.scalar(self.fingerprint, pa.string()), n),
            ]
            names = [n for n in batch.schema.names if n != route.ARRIVAL] + list(route.ROUTE_COLUMNS)
            yield pa.RecordBatch.from_arrays(cols, names=names)


class NewFileGroupTask:
    """The sink's task for a routed append or bulk_insert: every file group it gets is new and in
    no other task, its records arrive together (bulk_insert's sorted by key), and each is streamed
    into base files: the planned file id, then "<its uuid>-1", "-2"... should the records outgrow
    the maximum file size.  Memory: one row group being collected."""

    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.keyless = not ctx.config.record_key_fields
        self.fill_missing = ctx.config.set_null_for_missing_columns
        self.schema = file_schema(ctx.data_schema)
        self.settings = ctx.plan.parquet
        self.guard = InstantGuard(ctx.storage, ctx.instant, ctx.action)
        self.result = TaskResult(ctx.instant, task.partition_id, task.attempt_number)
        self._written: set[str] = set()
        self._fid: str | None = None
        self._writer: RollingBaseFileWriter | None = None
        self._held: list[tuple[pa.Table, pa.Array]] = []
        self._held_bytes = 0

    def write(self, batches: Iterable[pa.RecordBatch]) -> TaskResult:
        started = time.monotonic()
        try:
            for batch in batches:
                if batch.num_rows:
                    self._take(batch)
            self._close_file_group()
        except BaseException:
            if self._writer is not None:
                self._writer.abort()
            raise
        pa.default_memory_pool().release_unused()
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        self.result.phase_ms["write"] = self.result.duration_ms
        return self.result

    def _take(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        check_routed_on(self.ctx, batch.column(names.index(route.BASE)))
        data = pa.Table.from_batches([select_data(batch, self.ctx.data_schema, self.fill_missing)])
        if self.keyless:
            keys = generated_keys(
                self.ctx.instant, self.task.partition_id, self.result.num_records, batch.num_rows
            )
        else:
            keys = batch.column(names.index(route.KEY))
        self.result.num_records += batch.num_rows
        parts = batch.column(names.index(route.PARTITION))
        runs = pc.run_end_encode(batch.column(names.index(route.FILE_ID)))
        start = 0
        for end, fid in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
            if self._writer is None or fid != self._fid:
                self._open_file_group(fid, parts[start].as_py())
            self._hold(data.slice(start, end - start), keys.slice(start, end - start))
            start = end

    def _open_file_group(self, fid: str | None, partition_path: str) -> None:
        self._close_file_group()
        if fid is None or fid in self._written or fid in self.ctx.slices_by_id:
            raise HoodieTableError(
                f"The routed input of this task holds records of file group {fid} that are not one run of new "
                "records: it was reordered or filtered after hoodie_sink.spark.route. Nothing of this write is "
                "committed. Help: write the routed DataFrame as route returns it."
            )
        self._written.add(fid)
        self._fid = fid
        prefix, numbers = fid.rsplit("-", 1)[0], iter(range(1 << 30))

        def new_writer() -> BaseFileWriter:
            return BaseFileWriter(
                self.ctx.storage, partition_path, f"{prefix}-{next(numbers)}", self.task.token, self.ctx.instant,
                self.task.partition_id, self.schema, self.ctx.avro_with_meta, self.settings, guard=self.guard,
            )  # fmt: skip

        self._writer = RollingBaseFileWriter(new_writer, self.settings)

    def _hold(self, data: pa.Table, keys: pa.Array) -> None:
        """Rows go to the file a row group at a time (Spark hands them over in small batches)."""
        self._held.append((data, keys))
        self._held_bytes += data.nbytes
        if self._held_bytes >= self.settings.row_group_bytes:
            self._flush()

    def _flush(self) -> None:
        if self._held and self._writer is not None:
            data = pa.concat_tables([d for d, _ in self._held])
            keys = pa.chunked_array([k for _, k in self._held], pa.string()).combine_chunks()
            self._writer.write(data, keys)
        self._held, self._held_bytes = [], 0

    def _close_file_group(self) -> None:
        self._flush()
        if self._writer is not None:
            self.result.write_stats.extend(self._writer.close())
            self._writer = None
