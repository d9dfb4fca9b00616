"""The task side of upsert and delete: tag, assign to buckets, buffer, merge or stage.

Flow (the design of Hudi's Flink writer, fitted to Spark tasks that cannot shuffle: a Python
writer cannot ask for its input to be partitioned by key,
docs/spark/python-datasource.md#no-distribution-requirement):
1. Incoming batches are keyed and collected until `TAG_ROWS` rows or half the task's buffer
   budget, then tagged in one vectorised index lookup (each lookup probes every candidate
   file's keys once, so fewer, larger lookups are cheaper): each record is an update of an
   existing file group or an insert.
2. The bucket assigner puts every record in a bucket: the file group holding its key, a small
   file group of its partition that this task claims for inserts, or a new file group.
3. Buckets buffer records and flush when one passes its size, when the task's buffer passes
   its budget (the largest bucket goes first), and at the end.
4. A flush of an existing file group needs to own it: the task claims the file group with a
   create-if-absent file; the owner merges old base file + changes into a new version right
   here.  A task that loses the claim (another task owns it, or it already wrote it in an
   earlier flush) stages its changes; the commit merges staged changes on top.  So the result
   is correct for any partitioning of the input, and costs nothing extra when the input is
   partitioned by key (no staging at all).
5. Keys inserted into new file groups are logged, so the commit can find a new key that two
   tasks (or two flushes) both inserted and keep only the winner.

The jobs live in upsert/: incoming.py (batches -> changes), tagging.py and stored_records.py
(steps 1-2), bucket_buffer.py (3), claims.py (4), base_file_writes.py (copy-on-write merges, new
file groups) and log_appends.py (merge-on-read logs), result.py (what the commit gets: stats,
staged changes, key logs).  This class holds the order of the steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from hoodie_sink.table.write.base_file_writer import file_schema
from hoodie_sink.table.write.bucket_assigner import Assignment, BucketAssigner
from hoodie_sink.table.write.conflicts import clustering_conflict
from hoodie_sink.table.write.context import TaskIdentity, WriteContext, keygen_for, stored_keygen
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.log_writer import rewritten_slices
from hoodie_sink.table.write.upsert.base_file_writes import BaseFileWrites
from hoodie_sink.table.write.upsert.bucket_buffer import BucketBuffer
from hoodie_sink.table.write.upsert.claims import FileGroupClaims
from hoodie_sink.table.write.upsert.incoming import IncomingChanges
from hoodie_sink.table.write.upsert.log_appends import LogAppends
from hoodie_sink.table.write.upsert.result import TaskOutputs, UpsertResult
from hoodie_sink.table.write.upsert.stored_records import StoredRecords
from hoodie_sink.table.write.upsert.tagging import Tagging

TAG_ROWS = 2_000_000


class UpsertTask:
    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.cfg = ctx.config
        self.append_only = ctx.plan.operation.append_only
        self.mor = ctx.plan.merge_on_read
        self.slices = ctx.slices_by_id
        storage = ctx.storage
        guard = InstantGuard(storage, ctx.instant, ctx.action)
        schema = file_schema(ctx.data_schema)
        # merge-on-read: changes of an existing file group go to a new log file of its latest
        # slice, unless inserts were packed into it (a small base file without logs: rewritten)
        self.rewrite: set[str] = rewritten_slices(ctx)
        self.outputs = TaskOutputs(
            storage, ctx.instant, task, guard, ctx.plan.merge_rule.ordering_field, self.rewrite
        )
        self.result: UpsertResult = self.outputs.result
        self.incoming = IncomingChanges(keygen_for(ctx), ctx.data_schema, ctx.plan.operation.deletes,
                                        self.cfg.fills_missing_columns, task.partition_id,
                                        self.cfg.path if self.cfg.debezium else None)  # fmt: skip
        self.claims = FileGroupClaims(storage, ctx.instant, task.token, guard)
        locator = ctx.plan.index.locator(storage, list(ctx.base_files), stored_keygen(ctx))
        stored = StoredRecords(ctx, locator, schema) if locator is not None else None
        self.tagging = Tagging(ctx, BucketAssigner(ctx, self.claims.try_claim), locator, stored, self.rewrite,
                               self.result.phase_ms)  # fmt: skip
        self.buffer = BucketBuffer(self.cfg.bucket_buffer_bytes, self.cfg.task_buffer_bytes)
        self.base_files = BaseFileWrites(ctx, task, guard, schema, self.outputs)
        self.logs = LogAppends(ctx, task, guard, self.outputs)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0  # untagged input, besides the bucket buffers: memory <= 1.5x budget
        self._moved_from: set[str] = set()  # file groups this task moved keys out of
        self._flushes = 0

    # -- input ---------------------------------------------------------------------------
    def write(self, batches: Iterable[pa.RecordBatch]) -> UpsertResult:
        started = time.monotonic()
        for batch in batches:
            if batch.num_rows:
                self._pending.append(self.incoming.of(batch))
                self._pending_rows += batch.num_rows
                self._pending_bytes += self._pending[-1].nbytes
                self.result.num_records += batch.num_rows
                if self._pending_rows >= TAG_ROWS or self._pending_bytes >= self.cfg.task_buffer_bytes // 2:
                    self._tag_pending()
        self._tag_pending()
        self._flush_all()
        pa.default_memory_pool().release_unused()  # idle workers need not keep the peak
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        tag_ms = self.result.phase_ms.get("tag", 0)
        self.result.phase_ms["write"] = max(0, self.result.duration_ms - tag_ms)
        return self.result

    # -- tagging and bucketing -----------------------------------------------------------
    def _tag_pending(self) -> None:
        if not self._pending:
            return
        changes = pa.concat_tables(self._pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        assignment = self.tagging.assign(changes)
        clustering = self.ctx.clustering_file_groups
        if clustering:
            hit = {(part, fid): clustering[(part, fid)] for part, fid in assignment.buckets
                   if (part, fid) in clustering}  # fmt: skip
            if hit:
                raise clustering_conflict(self.cfg.path, hit)
        self.result.num_missing_deletes += assignment.missing_deletes
        new_sources = assignment.moved_from - self._moved_from
        self._moved_from |= new_sources
        self.result.moved_from.extend(sorted(new_sources))
        if assignment.moved_keys is not None and len(assignment.moved_keys):
            self.outputs.log_moved_keys(assignment.moved_keys)
        if not self.append_only:
            for _part, fid, rows in assignment.small_file_inserts:
                self.rewrite.add(fid)
                self.outputs.log_inserted_keys(rows, np.full(rows.num_rows, fid, dtype=object))
            dels = assignment.unmatched_deletes
            if dels is not None and dels.num_rows:
                self.outputs.log_inserted_keys(dels, np.full(dels.num_rows, None, dtype=object))
        for key, rows in assignment.buckets.items():
            if not key[1].startswith(Assignment.NEW) and not self.append_only:
                self.claims.claim_early(key[1])
            if self.buffer.add(key, rows):
                self._flush_bucket(key)
        while (largest := self.buffer.largest_over_budget()) is not None:
            self._flush_bucket(largest)

    # -- flushing ------------------------------------------------------------------------
    def _flush_bucket(self, key: tuple[str, str]) -> None:
        job = self._plan_flush(key, final=False)
        if job is not None:
            job()

    def _flush_all(self) -> None:
        """End of the task: every bucket flushes once.  The decisions (claims, flush numbers) are
        taken here in order; the merges and writes run in a pool of `merge_threads`, since
        pyarrow releases the GIL while it reads, takes and encodes.  Each running job holds one
        file group (old version, changes, new version) in memory."""
        sizes = {key: self.buffer.size(key) for key in self.buffer.buckets()}
        planned: list[tuple[tuple[str, str], Callable[[], None]] | None] = [
            (key, job)
            for key in self.buffer.buckets()
            if (job := self._plan_flush(key, final=True)) is not None
        ]
        threads = min(max(1, self.cfg.merge_threads), len(planned))
        pool = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hoodie-merge")
            if threads > 1
            else None
        )
        try:
            # in chunks of about one bucket's budget: the logs of a chunk are encoded together
            # (the encoded records are a second copy of the chunk's changes while it is written)
            start, chunk_bytes = 0, 0
            for i, entry in enumerate(planned):
                assert entry is not None
                chunk_bytes += sizes.get(entry[0], 0)
                if chunk_bytes < self.cfg.bucket_buffer_bytes and i < len(planned) - 1:
                    continue
                chunk = [e for e in planned[start : i + 1] if e is not None]
                self.logs.prepare([key for key, _ in chunk])
                if pool is None:
                    for _, job in chunk:
                        job()
                else:  # the first failure fails the task (the others finish or fail too)
                    for future in [pool.submit(job) for _, job in chunk]:
                        future.result()
                # the jobs hold their changes: let them go once written
                planned[start : i + 1] = [None] * (i + 1 - start)
                del chunk
                start, chunk_bytes = i + 1, 0
        finally:
            if pool is not None:
                pool.shutdown()
            self.logs.clear()

    def _plan_flush(self, key: tuple[str, str], final: bool) -> Callable[[], None] | None:
        """Take a bucket's changes out of the buffer and decide what to do with them."""
        parts = self.buffer.pop(key)
        if not parts:
            return None
        partition_path, bucket = key
        self._flushes += 1
        flush_no = self._flushes

        computed: list[pa.Table] = []

        def changes() -> pa.Table:  # computed once: the final flush's log preparation needs them too
            if not computed:
                table = pa.concat_tables(parts)
                computed.append(table if self.append_only else self.tagging.reduce(table))
            return computed[0]

        if bucket.startswith(Assignment.NEW):
            return lambda: self.base_files.write_new(partition_path, changes())
        if self.claims.try_claim(bucket) and (self.append_only or not self.claims.is_contended(bucket)):
            self.claims.written.add(bucket)
            # The changes are kept for a re-merge at the commit in case another task stages
            # changes for this file group, unless no other writer exists and this is the task's
            # last flush (the engine's single-task write).
            keep = not self.append_only and not (final and self.task.only_task)
            if final and self._logged(bucket):
                self.logs.add_candidate(key, changes)

            def merge_or_stage() -> None:
                # Contention is checked again when the job runs: another task may have tagged
                # changes for this file group since, and the commit would then redo our merge.
                if not self.append_only and not self.task.only_task and self.claims.is_contended(bucket):
                    self.outputs.stage(partition_path, bucket, changes(), flush_no)
                    return
                # merge-on-read: a log file, unless the file group is rewritten (or log_changes
                # finds it must be); copy-on-write: a new base file version
                if not (self._logged(bucket) and self.logs.append(bucket, changes())):
                    self.base_files.merge(partition_path, bucket, changes())
                self._after_owner_write(partition_path, bucket, changes(), flush_no, keep)

            return merge_or_stage
        return lambda: self.outputs.stage(partition_path, bucket, changes(), flush_no)

    def _logged(self, fid: str) -> bool:
        """Merge-on-read: the file group's changes go to a log file of its latest slice."""
        return self.mor and fid not in self.rewrite and fid in self.slices

    def _after_owner_write(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, keep: bool
    ) -> None:
        if keep:
            self.outputs.stage(partition_path, fid, changes, flush_no, owner=True)
        elif fid in self._moved_from:
            # keys moved out of this file group: the commit needs every change of theirs to know
            # which copy wins (another flush of this task may have updated them here)
            self.outputs.log_final_changes(changes)
