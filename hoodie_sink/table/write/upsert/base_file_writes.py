"""Copy-on-write writes of an upsert task: a file group it owns merged with its changes into a
new base file version, and inserts written to new file groups."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.file_group import BaseFile, file_id, new_file_id_prefix
from hoodie_sink.table.format.markers import MERGE
from hoodie_sink.table.index.key_index import cached_bloom
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, RollingBaseFileWriter
from hoodie_sink.table.write.context import TaskIdentity, WriteContext
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.log_writer import current_rows
from hoodie_sink.table.write.merge import KEY, KIND, UPSERT, data_of, merge_file_group
from hoodie_sink.table.write.upsert.result import TaskOutputs


class BaseFileWrites:
    def __init__(self, ctx: WriteContext, task: TaskIdentity, guard: InstantGuard, file_schema: pa.Schema,
                 outputs: TaskOutputs):  # fmt: skip
        self.ctx = ctx
        self.task = task
        self.storage = guard.storage  # the task's one storage
        self.guard = guard
        self.file_schema = file_schema
        self.settings = ctx.plan.parquet
        self.outputs = outputs
        self.rule = ctx.plan.merge_rule
        self.append_only = ctx.plan.operation.append_only
        self.base_by_id: dict[str, BaseFile] = {bf.file_id: bf for bf in ctx.base_files}
        self.slices = ctx.slices_by_id
        self._prefix = new_file_id_prefix()
        self._next_file = 0
        self._lock = threading.Lock()  # file numbers, taken by the final flush's threads

    def merge(self, partition_path: str, fid: str, changes: pa.Table) -> None:
        """The file group's next version: its current rows merged with the changes."""
        old_bf = self.base_by_id.get(fid)
        old = current_rows(self.ctx, fid, old_bf, self.file_schema)
        # the old base file's bloom filter holds the old keys, unless logs added keys
        seeds = old_bf is not None and not self._has_logs(fid)
        merged = merge_file_group(
            old, changes, self.rule, self.ctx.instant, self.task.partition_id, append_only=self.append_only
        )
        writer = BaseFileWriter(
            self.storage, partition_path, fid, self.task.token, self.ctx.instant, self.task.partition_id,
            self.file_schema, self.ctx.avro_with_meta, self.settings,
            prev_commit=old_bf.instant if old_bf else "null", io_type=MERGE, guard=self.guard,
            seed_bloom=cached_bloom(self.storage, old_bf.path) if seeds and old_bf else None,
        )  # fmt: skip
        stat = writer.write_all(
            merged.data,
            merged.keys,
            merged.commit_times,
            merged.seqnos,
            num_updates=merged.num_updates,
            bloom_keys=merged.inserted_keys if seeds else None,
        )
        stat.num_inserts = merged.num_inserts
        stat.num_deletes = merged.num_deletes
        self.outputs.add_stats(stat, missing_deletes=merged.num_missing_deletes)

    def write_new(self, partition_path: str, changes: pa.Table) -> None:
        """The inserts of a new-file bucket, in new file groups of the target size."""
        inserts = changes.filter(pc.equal(changes.column(KIND), UPSERT))
        if inserts.num_rows == 0:
            return

        def new_writer() -> BaseFileWriter:
            with self._lock:
                fid = file_id(self._prefix, self._next_file)
                self._next_file += 1
            return BaseFileWriter(
                self.storage, partition_path, fid, self.task.token, self.ctx.instant, self.task.partition_id,
                self.file_schema, self.ctx.avro_with_meta, self.settings, guard=self.guard,
            )  # fmt: skip

        stats = RollingBaseFileWriter(new_writer, self.settings).write_all(
            data_of(inserts), inserts.column(KEY).combine_chunks()
        )
        self.outputs.add_stats(*stats)
        if not self.append_only and not self.ctx.plan.index.bucketed:
            # RollingBaseFileWriter fills files in row order: file k holds the next num_writes rows.
            fids = np.repeat(
                np.array([s.file_id for s in stats], dtype=object), [s.num_writes for s in stats]
            )
            self.outputs.log_inserted_keys(inserts, fids)

    def _has_logs(self, fid: str) -> bool:
        sl = self.slices.get(fid)
        return sl is not None and sl.has_logs
