"""The sink's task for a routed input (docs/design/routing.md#our-plan, step 4): every file group
it gets is in no other task, and its records arrive together (the route sorts them by file
group), tagged and combined already.  So the task looks nothing up, claims nothing and stages
nothing: each file group is written once, as soon as its last record has arrived, by the
unrouted task's own writers (a copy-on-write merge or a new file group, or a merge-on-read log
file).  Memory: the file groups being written, up to the task's buffer budget, and the one
being collected."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.write.base_file_writer import file_schema
from hoodie_sink.table.write.context import TaskIdentity, WriteContext, select_data
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.log_writer import rewritten_slices
from hoodie_sink.table.write.merge import KEY, KIND, ORDER, PART, reduce_changes
from hoodie_sink.table.write.routing import columns as route
from hoodie_sink.table.write.routing.checks import check_routed_on
from hoodie_sink.table.write.upsert.base_file_writes import BaseFileWrites
from hoodie_sink.table.write.upsert.log_appends import LogAppends
from hoodie_sink.table.write.upsert.result import TaskOutputs, UpsertResult


class RoutedTask:
    def __init__(self, ctx: WriteContext, task: TaskIdentity):
        self.ctx = ctx
        cfg = ctx.config
        guard = InstantGuard(ctx.storage, ctx.instant, ctx.action)
        self.rewrite: set[str] = rewritten_slices(ctx)
        self.outputs = TaskOutputs(ctx.storage, ctx.instant, task, guard, ctx.plan.merge_rule.ordering_field,
                                   self.rewrite)  # fmt: skip
        self.result: UpsertResult = self.outputs.result
        self.base_files = BaseFileWrites(ctx, task, guard, file_schema(ctx.data_schema), self.outputs)
        self.logs = LogAppends(ctx, task, guard, self.outputs)
        self.append_only = ctx.plan.operation.append_only
        self.per_partition = not ctx.plan.index.is_global
        self.fill_missing = ctx.plan.operation.deletes or cfg.fills_missing_columns
        self.slices = ctx.slices_by_id
        self.budget = cfg.task_buffer_bytes
        self.threads = max(1, cfg.merge_threads)
        self._written: set[str | None] = set()
        self._fid: str | None = None
        self._parts: list[tuple[pa.Table, bool, bool]] = []  # (changes, has inserts, rewrite)
        self._started = False
        self._running: deque[tuple[Future, int]] = deque()

    def write(self, batches: Iterable[pa.RecordBatch]) -> UpsertResult:
        started = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hoodie-routed")
        try:
            for batch in batches:
                if batch.num_rows:
                    self.result.num_records += batch.num_rows
                    self._take(batch, pool)
            self._finish(pool)
            while self._running:
                self._running.popleft()[0].result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        pa.default_memory_pool().release_unused()
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        self.result.phase_ms["write"] = self.result.duration_ms
        return self.result

    def _take(self, batch: pa.RecordBatch, pool: ThreadPoolExecutor) -> None:
        names = batch.schema.names
        check_routed_on(self.ctx, batch.column(names.index(route.BASE)))
        changes = self._changes(batch)
        fids = batch.column(names.index(route.FILE_ID))
        inserts = np.asarray(batch.column(names.index(route.INSERT)))
        rewrites = np.asarray(batch.column(names.index(route.REWRITE)))
        runs = pc.run_end_encode(fids)
        start = 0
        for end, fid in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
            if fid != self._fid or not self._started:
                self._finish(pool)
                if fid in self._written:
                    raise HoodieTableError(
                        f"The routed input of this task holds the records of file group {fid} in two runs: it was "
                        "reordered after hoodie_sink.spark.route (which sorts each task's records by file group). "
                        "Nothing of this write is committed. Help: write the routed DataFrame as route returns it."
                    )
                self._fid, self._started = fid, True
            self._parts.append(
                (
                    changes.slice(start, end - start),
                    bool(inserts[start:end].any()),
                    bool(rewrites[start:end].any()),
                )
            )
            start = end

    def _changes(self, batch: pa.RecordBatch) -> pa.Table:
        """The change table of the routed rows: data columns and the route's key, partition,
        arrival order and kind (merge.py's columns)."""
        data = select_data(batch, self.ctx.data_schema, self.fill_missing)
        names = batch.schema.names
        cols = list(data.columns) + [batch.column(names.index(c))
                                     for c in (route.KEY, route.PARTITION, route.ORDER, route.KIND)]  # fmt: skip
        return pa.Table.from_arrays(cols, names=[*data.schema.names, KEY, PART, ORDER, KIND])

    def _finish(self, pool: ThreadPoolExecutor) -> None:
        """The collected file group is complete: write it, in the pool, within the budget."""
        if not self._parts:
            return
        fid, parts = self._fid, self._parts
        self._parts = []
        self._written.add(fid)
        changes = pa.concat_tables([p for p, _, _ in parts])
        inserts = any(i for _, i, _ in parts)
        rewrite = any(r for _, _, r in parts)
        size = changes.nbytes
        while self._running and sum(b for _, b in self._running) + size > self.budget:
            self._running.popleft()[0].result()
        self._running.append((pool.submit(self._write_file_group, fid, changes, inserts, rewrite), size))
        # a failed write fails the task now, not at its end
        while self._running and self._running[0][0].done():
            self._running.popleft()[0].result()

    def _write_file_group(self, fid: str | None, changes: pa.Table, inserts: bool, rewrite: bool) -> None:
        if fid is None:  # deletes of keys the table does not hold
            self.outputs.add_stats(missing_deletes=changes.num_rows)
            return
        if not self.append_only:
            # a key's records in two chunks of the route are combined here
            changes = reduce_changes(changes, self.ctx.plan.merge_rule, per_partition=self.per_partition)
        partition_path = changes.column(PART)[0].as_py()
        logged = (
            self.ctx.plan.merge_on_read
            and not inserts
            and not rewrite
            and fid not in self.rewrite
            and fid in self.slices
        )
        if not (logged and self.logs.append(fid, changes)):
            self.base_files.merge(partition_path, fid, changes)
