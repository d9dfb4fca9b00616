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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.format.file_group import BaseFile, file_id, new_file_id_prefix
from hoodie_sink.table.format.markers import MERGE, work_dir
from hoodie_sink.table.format.schema import cast_to_storage
from hoodie_sink.table.index.key_index import TagResult, cached_bloom
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, RollingBaseFileWriter, file_schema
from hoodie_sink.table.write.bucket_assigner import Assignment, BucketAssigner
from hoodie_sink.table.write.conflicts import clustering_conflict
from hoodie_sink.table.write.context import (
    TaskIdentity,
    TaskResult,
    WriteContext,
    keygen_for,
    parquet_settings,
    stored_keygen,
)
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.log_writer import (
    LogWrite,
    current_ordering_values,
    current_rows,
    encode_log_upserts,
    log_changes,
    rewritten_slices,
    write_log_file,
)
from hoodie_sink.table.write.merge import (
    DELETE,
    KEY,
    KIND,
    ORDER,
    PART,
    SOFT_DELETE,
    UPSERT,
    data_of,
    merge_file_group,
    reduce_changes,
)

IS_DELETED = "_hoodie_is_deleted"
TAG_ROWS = 2_000_000


@dataclass
class StagedChanges:
    """Changes for a file group that another writer owns, parked on storage for the commit."""

    partition_path: str
    file_id: str
    path: str  # relative to the base path, under the instant's work_dir (never its marker folder)
    rows: int
    owner: bool = False  # changes the owning task already merged (kept for re-merges)
    # merge-on-read: the changes include inserts packed into this small file group, so the commit
    # rewrites its base file (Java's merge handle) instead of adding a log file
    rewrite: bool = False


@dataclass
class UpsertResult(TaskResult):
    staged: list[StagedChanges] = field(default_factory=list)
    owned: list[StagedChanges] = field(default_factory=list)
    inserted_key_logs: list[str] = field(default_factory=list)
    num_missing_deletes: int = 0
    # file groups this task moved keys out of (global index): their change sets are all kept, so
    # the commit can tell which copy of a moved key wins; and logs of the moved keys
    moved_from: list[str] = field(default_factory=list)
    moved_key_logs: list[str] = field(default_factory=list)
    moved_change_logs: list[str] = field(default_factory=list)  # final change sets of those file groups


# Claims, staged changes and key logs live in the instant's work folder, not beside its markers:
# Java's rollback parses every file of a marker folder as a marker and fails on anything else.
def claim_path(instant: str, fid: str) -> str:
    return f"{work_dir(instant)}/claims/{fid}"


def staging_dir(instant: str) -> str:
    return f"{work_dir(instant)}/staging"


class UpsertTask:
    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        self.task = task
        self.cfg = ctx.config
        self.keygen = keygen_for(ctx)
        self.settings = parquet_settings(ctx)
        self.file_schema = file_schema(ctx.data_schema)
        self.rule = ctx.merge_rule
        self.precombine = self.rule.ordering_field
        # a record is its key under a global index, its (key, partition path) pair otherwise
        self.per_partition = not ctx.index.is_global
        self.storage = ctx.storage
        self.guard = InstantGuard(self.storage, ctx.instant, ctx.action)
        self.base_by_id: dict[str, BaseFile] = {bf.file_id: bf for bf in ctx.base_files}
        self.append_only = ctx.operation.append_only
        # merge-on-read: changes of an existing file group go to a new log file of its latest
        # slice, unless inserts were packed into it (a small base file without logs: rewritten)
        self.mor = ctx.merge_on_read
        self.slices = ctx.slices_by_id
        self._rewrite: set[str] = rewritten_slices(ctx)
        self._slices_with_deletes = [s.file_id for s in ctx.log_slices if s.has_deletes]
        self._repeated: set[str] = set()  # file groups holding a changed key more than once
        self.stored_keygen = stored_keygen(ctx)
        # None: the index looks nothing up (BUCKET: the assigner hashes keys into buckets)
        self.locator = ctx.index.locator(self.storage, list(ctx.base_files), self.stored_keygen)
        self.assigner = BucketAssigner(ctx, self._try_claim)
        self.result = UpsertResult(ctx.instant, task.partition_id, task.attempt_number)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0  # untagged input, besides the bucket buffers: memory <= 1.5x budget
        self._row_base = task.partition_id << 40  # arrival order across tasks: (partition, row)
        self._rows_seen = 0
        self._buckets: dict[tuple[str, str], list[pa.Table]] = {}  # (partition, bucket id) -> changes
        self._bucket_bytes: dict[tuple[str, str], int] = {}
        self._buffered = 0
        self._claimed: set[str] = set()
        self._contended: set[str] = set()  # file groups another task also changes
        # merge-on-read, final flush: the buckets that may become log files, and their prepared
        # (target, changes written, encoded records), keyed by file id
        self._log_candidates: dict[tuple[str, str], Callable[[], pa.Table]] = {}
        self._prepared: dict[str, tuple[LogWrite, pa.Table, pa.Array]] = {}
        self._written: set[str] = set()  # file groups this task already wrote a version of
        self._moved_from: set[str] = set()  # file groups this task moved keys out of
        self._prefix = new_file_id_prefix()
        self._next_file = 0
        self._flushes = 0
        self._logs = 0
        self._lock = threading.Lock()  # result lists and counters, shared by the final flush's threads

    # -- input ---------------------------------------------------------------------------
    def write(self, batches: Iterable[pa.RecordBatch]) -> UpsertResult:
        started = time.monotonic()
        for batch in batches:
            if batch.num_rows:
                self._pending.append(self._changes(batch))
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

    def _changes(self, batch: pa.RecordBatch) -> pa.Table:
        n = batch.num_rows
        keys = self.keygen.record_keys(batch)
        parts = self.keygen.partition_paths(batch)
        allow_missing = self.ctx.operation.deletes or self.cfg.set_null_for_missing_columns
        data = _select(batch, self.ctx.data_schema, allow_missing=allow_missing)
        if self.ctx.operation.deletes:
            kinds = np.full(n, DELETE, dtype=np.int8)
        elif IS_DELETED in batch.schema.names:
            flag = pc.fill_null(batch.column(batch.schema.get_field_index(IS_DELETED)), False)
            kinds = np.where(np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool), SOFT_DELETE, UPSERT)
        else:
            kinds = np.full(n, UPSERT, dtype=np.int8)
        order = np.arange(self._rows_seen, self._rows_seen + n, dtype=np.int64) + self._row_base
        self._rows_seen += n
        cols = list(data.columns) + [keys, parts, pa.array(order), pa.array(kinds.astype(np.int8))]
        names = list(data.schema.names) + [KEY, PART, ORDER, KIND]
        return pa.Table.from_arrays(cols, names=names)

    # -- tagging and bucketing -----------------------------------------------------------
    def _tag_pending(self) -> None:
        if not self._pending:
            return
        changes = pa.concat_tables(self._pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        if self.append_only:  # insert: no de-duplication, no lookup; small files first
            assignment = Assignment()
            self.assigner.assign_inserts(assignment, changes)
        elif self.locator is None:
            assignment = self.assigner.assign_for_bucket_index(self._reduce(changes))
        else:
            changes = self._reduce(changes)
            tag_started = time.perf_counter()
            changes, tags = self._locate(changes)
            tag_ms = int((time.perf_counter() - tag_started) * 1000)
            self.result.phase_ms["tag"] = self.result.phase_ms.get("tag", 0) + tag_ms
            # commit-time ordering (OverwriteWithLatestAvroPayload): the stored record never wins
            stored_ordering = self._stored_ordering if self.rule.event_time else None
            stored_in_place = None
            if self.mor and self.rule.event_time:
                stored_in_place = self._stored_in_place(changes, tags)
                changes, tags = self._without_stored_winners(changes, tags)
            assignment = self.assigner.assign(changes, tags, stored_ordering, stored_in_place)
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
            rel = self._write_log("moved", pa.table({KEY: assignment.moved_keys}))
            self.result.moved_key_logs.append(rel)
        if not self.append_only:
            for _part, fid, rows in assignment.small_file_inserts:
                self._rewrite.add(fid)
                self._log_inserted_keys(rows, np.full(rows.num_rows, fid, dtype=object))
            dels = assignment.unmatched_deletes
            if dels is not None and dels.num_rows:
                self._log_inserted_keys(dels, np.full(dels.num_rows, None, dtype=object))
        for key, rows in assignment.buckets.items():
            if not key[1].startswith(Assignment.NEW) and not self.append_only:
                self._claim_early(key[1])
            self._buckets.setdefault(key, []).append(rows)
            self._bucket_bytes[key] = self._bucket_bytes.get(key, 0) + rows.nbytes
            self._buffered += rows.nbytes
            if self._bucket_bytes[key] >= self.cfg.bucket_buffer_bytes:
                self._flush_bucket(key)
        while self._buffered >= self.cfg.task_buffer_bytes and self._bucket_bytes:
            self._flush_bucket(max(self._bucket_bytes, key=lambda b: self._bucket_bytes[b]))

    def _locate(self, changes: pa.Table) -> tuple[pa.Table, TagResult]:
        """Tag every change with the file group holding its key.  A key stored in several file
        groups (bulk_insert and insert keep duplicates) gets one change per file group, as Hudi's
        bloom index tags every one, so an upsert or delete changes every copy.  A merge-on-read
        file group holding a changed key twice is rewritten, not given a log: a log record meets
        one base copy only in every reader (docs/hudi/duplicate-keys.md)."""
        assert self.locator is not None, "the index looks keys up"
        located = self.locator.locate(
            changes.column(KEY).combine_chunks(), changes.column(PART).combine_chunks()
        )
        if len(located.record) != changes.num_rows:
            changes = changes.take(pa.array(located.record))
        if len(located.repeated):
            repeated = set(located.repeated.to_pylist())
            self._repeated |= repeated
            if self.mor:
                self._rewrite |= repeated
        return changes, located.tags

    def _reduce(self, changes: pa.Table) -> pa.Table:
        return reduce_changes(changes, self.rule, per_partition=self.per_partition)

    def _stored_ordering(self, rows: pa.Table, file_ids: pa.Array) -> pa.Array:
        assert self.precombine is not None, "only called with a precombine field"
        value_type = rows.schema.field(self.precombine).type
        keys = rows.column(KEY).combine_chunks()
        assert self.locator is not None, "the index looks keys up"
        values = self.locator.stored_values(keys, file_ids, self.precombine, value_type)
        if self.mor:  # the logs hold newer values than the base files
            values = current_ordering_values(self.ctx, keys, file_ids, values, self.file_schema)
        return values

    def _stored_in_place(self, changes: pa.Table, tags: TagResult) -> pa.Array | None:
        """Global index with update.partition.path: the keys stored (also) in their record's
        partition, taken before _without_stored_winners drops the changes a stored copy beats: a
        record moving out of another partition is not inserted where its key is stored already
        (bucket_assigner._one_insert_per_key), whether that copy takes the record or beats it."""
        if not self.ctx.index.moves_partitions(self.cfg.update_partition_path):
            return None
        here = pc.and_(pc.is_valid(tags.file_id), pc.equal(tags.partition_path, changes.column(PART)))
        return changes.column(KEY).filter(pc.fill_null(here, False)).combine_chunks()

    def _without_stored_winners(self, changes: pa.Table, tags: TagResult) -> tuple[pa.Table, TagResult]:
        """Merge-on-read, event-time ordering: drop the changes that the stored record beats, as a
        copy-on-write merge would (a log keeps what readers let win, and no more).  The base file's
        value stands for the stored one (our logs only hold records that beat it), except in slices
        whose logs hold deletes: there log_changes decides (a key deleted and written again)."""
        found = pc.is_valid(tags.file_id)
        if not pc.any(found).as_py():
            return changes, tags
        # and not in file groups holding a key twice: there the rewrite compares every copy
        merged_here = pa.array(self._slices_with_deletes + sorted(self._repeated), pa.string())
        checked = pc.and_(found, pc.invert(pc.is_in(tags.file_id, value_set=merged_here)))
        rows = changes.filter(checked)
        if rows.num_rows == 0:
            return changes, tags
        precombine = self.precombine
        assert precombine is not None, "only called with a precombine field"
        value_type = changes.schema.field(precombine).type
        assert self.locator is not None, "the index looks keys up"
        stored = self.locator.stored_values(
            rows.column(KEY).combine_chunks(), tags.file_id.filter(checked), precombine, value_type
        )
        kinds = np.asarray(rows.column(KIND).to_numpy(), dtype=np.int8)
        # the delete operation ignores ordering
        loses = self.rule.strictly_greater(stored, rows.column(precombine)) & (kinds < DELETE)
        if not loses.any():
            return changes, tags
        drop = np.zeros(changes.num_rows, dtype=bool)
        drop[np.flatnonzero(np.asarray(checked.to_numpy(zero_copy_only=False), dtype=bool))[loses]] = True
        keep = pa.array(~drop)
        return changes.filter(keep), TagResult(
            tags.file_id.filter(keep), tags.partition_path.filter(keep), tags.base_instant.filter(keep)
        )

    def _try_claim(self, fid: str) -> bool:
        if fid in self._claimed:
            return fid not in self._written
        claim = claim_path(self.ctx.instant, fid)
        if self.storage.create_if_absent(claim, self.task.token.encode()):
            self.guard.wrote(claim)
            self._claimed.add(fid)
            return True
        return False

    def _claim_early(self, fid: str) -> None:
        """Claim a file group as soon as a change for it is tagged, not when it is flushed: a
        task that loses the claim marks the file group contended right away, so its owner, which
        usually flushes at the end, stages instead of merging a version the commit would redo."""
        if fid in self._claimed or fid in self._contended:
            return
        if not self._try_claim(fid):
            self._contended.add(fid)
            contended = claim_path(self.ctx.instant, fid) + ".contended"
            self.storage.create_if_absent(contended)
            self.guard.wrote(contended)

    def _is_contended(self, fid: str) -> bool:
        return fid in self._contended or self.storage.exists(claim_path(self.ctx.instant, fid) + ".contended")

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
        sizes = {key: self._bucket_bytes.get(key, 0) for key in self._buckets}
        planned: list[tuple[tuple[str, str], Callable[[], None]] | None] = [
            (key, job)
            for key in list(self._buckets)
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
                self._prepare_logs([key for key, _ in chunk])
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
            self._log_candidates.clear()
            self._prepared.clear()

    def _prepare_logs(self, keys: list[tuple[str, str]]) -> None:
        """Merge-on-read: decide what the final flush's log files hold and encode their records in
        one pass (write_log_file then only frames and writes them)."""
        logs: list[tuple[LogWrite, pa.Table]] = []
        for key in keys:
            changes = self._log_candidates.pop(key, None)
            if changes is None:
                continue
            sl = self.slices[key[1]]
            written = log_changes(self.ctx, sl, changes())
            if written is None:
                continue  # the file group is rewritten instead (_append_log decides again)
            target = LogWrite(
                sl, sl.max_version + 1, self.task.token, self.ctx.instant, self.task.partition_id
            )
            logs.append((target, written))
        if not logs:
            return
        for (target, written), records in zip(
            logs, encode_log_upserts(logs, self.ctx.avro_with_meta), strict=True
        ):
            self._prepared[target.slice.file_id] = (target, written, records)

    def _plan_flush(self, key: tuple[str, str], final: bool) -> Callable[[], None] | None:
        """Take a bucket's changes out of the buffer and decide what to do with them."""
        parts = self._buckets.pop(key, [])
        self._buffered -= self._bucket_bytes.pop(key, 0)
        if not parts:
            return None
        partition_path, bucket = key
        self._flushes += 1
        flush_no = self._flushes

        computed: list[pa.Table] = []

        def changes() -> pa.Table:  # computed once: the final flush's log preparation needs them too
            if not computed:
                table = pa.concat_tables(parts)
                computed.append(table if self.append_only else self._reduce(table))
            return computed[0]

        if bucket.startswith(Assignment.NEW):
            return lambda: self._write_new(partition_path, changes())
        if self._try_claim(bucket) and (self.append_only or not self._is_contended(bucket)):
            self._written.add(bucket)
            # The changes are kept for a re-merge at the commit in case another task stages
            # changes for this file group, unless no other writer exists and this is the task's
            # last flush (the engine's single-task write).
            keep = not self.append_only and not (final and self.task.only_task)
            if final and self.mor and bucket not in self._rewrite and bucket in self.slices:
                self._log_candidates[key] = changes

            def merge_or_stage() -> None:
                # Contention is checked again when the job runs: another task may have tagged
                # changes for this file group since, and the commit would then redo our merge.
                if not self.append_only and not self.task.only_task and self._is_contended(bucket):
                    self._stage(partition_path, bucket, changes(), flush_no)
                elif self.mor and bucket not in self._rewrite and bucket in self.slices:
                    self._append_log(partition_path, bucket, changes(), flush_no, keep)
                else:
                    self._merge_in_task(partition_path, bucket, changes(), flush_no, keep)

            return merge_or_stage
        return lambda: self._stage(partition_path, bucket, changes(), flush_no)

    def _merge_in_task(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, keep: bool
    ) -> None:
        old_bf = self.base_by_id.get(fid)
        old = current_rows(self.ctx, fid, old_bf, self.file_schema)
        # the old base file's bloom filter holds the old keys, unless logs added keys
        seeds = old_bf is not None and not self._has_logs(fid)
        merged = merge_file_group(
            old,
            changes,
            self.rule,
            self.ctx.instant,
            self.task.partition_id,
            append_only=self.append_only,
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
        with self._lock:
            self.result.num_missing_deletes += merged.num_missing_deletes
            self.result.write_stats.append(stat)
        self._after_owner_write(partition_path, fid, changes, flush_no, keep)

    def _append_log(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, keep: bool
    ) -> None:
        """Merge-on-read: the changes become a new log file of the file group's latest slice
        (or, rarely, a rewrite of it: log_changes says when)."""
        sl = self.slices[fid]
        prepared = self._prepared.pop(fid, None)
        records = None
        if prepared is not None:
            target, written, records = prepared
        else:
            written = log_changes(self.ctx, sl, changes)
            if written is None:
                self._merge_in_task(partition_path, fid, changes, flush_no, keep)
                return
            target = LogWrite(
                sl, sl.max_version + 1, self.task.token, self.ctx.instant, self.task.partition_id
            )
        if written.num_rows:
            stat = write_log_file(
                self.storage, target, written, self.precombine, self.ctx.avro_with_meta, self.guard,
                records=records, exclusive=self.ctx.config.occ,
            )  # fmt: skip
            with self._lock:
                self.result.write_stats.append(stat)
        self._after_owner_write(partition_path, fid, changes, flush_no, keep)

    def _has_logs(self, fid: str) -> bool:
        sl = self.slices.get(fid)
        return sl is not None and sl.has_logs

    def _after_owner_write(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, keep: bool
    ) -> None:
        if keep:
            self._stage(partition_path, fid, changes, flush_no, owner=True)
        elif fid in self._moved_from:
            # keys moved out of this file group: the commit needs every change of theirs to know
            # which copy wins (another flush of this task may have updated them here); the change
            # set is final (nothing re-merges it), so its ranking columns are enough
            cols = [c for c in (KEY, PART, ORDER, KIND, self.precombine) if c in changes.column_names]
            rel = self._write_log("moves", changes.select(cols))
            with self._lock:
                self.result.moved_change_logs.append(rel)

    def _stage(
        self, partition_path: str, fid: str, changes: pa.Table, flush_no: int, owner: bool = False
    ) -> None:
        self.guard.check()
        rel = f"{staging_dir(self.ctx.instant)}/{fid}/{self.task.token}-{flush_no}.parquet"
        with self.storage.open_output(rel) as out:
            pq.write_table(changes, out, compression="lz4")
        self.guard.wrote(rel)
        staged = StagedChanges(
            partition_path, fid, rel, changes.num_rows, owner, rewrite=fid in self._rewrite
        )
        with self._lock:
            (self.result.owned if owner else self.result.staged).append(staged)

    def _write_new(self, partition_path: str, changes: pa.Table) -> None:
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
        with self._lock:
            self.result.write_stats.extend(stats)
        if not self.append_only and not self.ctx.index.bucketed:
            # RollingBaseFileWriter fills files in row order: file k holds the next num_writes rows.
            fids = np.repeat(
                np.array([s.file_id for s in stats], dtype=object), [s.num_writes for s in stats]
            )
            self._log_inserted_keys(inserts, fids)

    def _log_inserted_keys(self, inserts: pa.Table, fids: np.ndarray) -> None:
        """Record (key, partition, order, file) of new keys for the commit's duplicate check."""
        cols = {KEY: inserts.column(KEY), PART: inserts.column(PART), ORDER: inserts.column(ORDER),
                KIND: inserts.column(KIND), "_hf": pa.array(fids, pa.string())}  # fmt: skip
        if self.precombine:
            cols[self.precombine] = inserts.column(self.precombine)
        rel = self._write_log("inserted", pa.table(cols))
        with self._lock:
            self.result.inserted_key_logs.append(rel)

    def _write_log(self, kind: str, table: pa.Table) -> str:
        with self._lock:
            self._logs += 1
            log_no = self._logs
        rel = f"{work_dir(self.ctx.instant)}/{kind}/{self.task.token}-{log_no}.parquet"
        with self.storage.open_output(rel) as out:
            pq.write_table(table, out, compression="lz4")
        self.guard.wrote(rel)
        return rel


def _select(batch: pa.RecordBatch, schema: pa.Schema, allow_missing: bool = False) -> pa.RecordBatch:
    cols, names = [], []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        if i < 0:
            if not allow_missing:
                raise HoodieSchemaError(f"Input batch lacks column '{f.name}' of the write schema.")
            cols.append(pa.nulls(batch.num_rows, f.type))
        else:
            cols.append(batch.column(i))
        names.append(f.name)
    picked = pa.RecordBatch.from_arrays(cols, names=names)
    return cast_to_storage(picked, schema)
