"""Routing of the operations that only add file groups: append and bulk_insert
(docs/design/routing.md#operations-that-only-add-file-groups).

They look nothing up and combine nothing, so the route needs no shuffle by key, keeps nothing, and
sends to Python only the columns that partition paths and record keys are derived from
(`record_locations`, a scalar Arrow UDF: the other columns stay in the JVM).  A first pass counts
the records of each partition path; the route plans sized new file groups for the whole write from
those counts (inserts.py, with no small files to fill: these operations never rewrite a file);
then, in one pipeline with the write, Spark SQL gives each record its file group and the records
are shuffled by file group.  The sink's task (`NewFileGroupTask`) then streams each file
group it gets into its base file, as the unrouted append and bulk_insert tasks write theirs;
without the route each of those tasks opens its own file groups in every partition it sees.

Keyless tables (append without a record key): the route leaves the key null, spreads the records
over the planned file groups by their arrival order, and the writing task generates the keys,
as the unrouted append task does (append_task.generated_keys)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.keygen import top_level_columns
from hoodie_sink.table.write.append_task import generated_keys
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, RollingBaseFileWriter, file_schema
from hoodie_sink.table.write.context import TaskIdentity, TaskResult, WriteContext, keygen_for, select_data
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.routing import columns as route
from hoodie_sink.table.write.routing.checks import check_routed_on


def location_source_columns(ctx: WriteContext) -> list[str]:
    """The top-level columns a record's partition path and record key are derived from (`a.b`
    reads `a`): all that the route's Python step is given."""
    return top_level_columns((*ctx.plan.keygen.partition_fields, *ctx.config.record_key_fields))


LOCATION_TYPE = pa.struct([("partition", pa.string()), ("key", pa.string())])


def record_locations(ctx: WriteContext, batch: pa.RecordBatch) -> pa.StructArray:
    """The partition path and record key (null for a keyless record) of each record of `batch`
    (its location source columns), as the write's key generator derives them."""
    keygen = keygen_for(ctx)
    n = batch.num_rows
    keys = pa.nulls(n, pa.string()) if not ctx.config.record_key_fields else keygen.record_keys(batch)
    parts = keygen.partition_paths(batch) if ctx.plan.keygen.partition_fields else pa.repeat(pa.scalar(""), n)
    return pa.StructArray.from_arrays([parts, keys], fields=list(LOCATION_TYPE))


class NewFileGroupTask:
    """The sink's task for a routed append or bulk_insert: every file group it gets is new and in
    no other task, its records arrive together (bulk_insert's sorted by key), and each is streamed
    into base files: the planned file id, then "<its uuid>-1", "-2"... should the records outgrow
    the maximum file size.  Memory: one row group being collected."""

    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.keyless = not ctx.config.record_key_fields
        self.fill_missing = ctx.config.fills_missing_columns
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
        if fid is None:
            raise HoodieTableError(
                f"Records of partition '{partition_path}' reached the write without a planned file group: the "
                "route counted its input's partitions in one pass and tagged it in another, and the input changed "
                "in between (a DataFrame that is not deterministic). Nothing of this write is committed. Help: "
                "persist or checkpoint the DataFrame before hoodie_sink.spark.route."
            )
        if fid in self._written or fid in self.ctx.slices_by_id:
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
