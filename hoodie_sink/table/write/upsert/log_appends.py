"""Merge-on-read writes of an upsert task: the changes of a file group it owns become a new log
file of the group's latest slice (or, rarely, a rewrite of it: log_changes says when)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from hoodie_sink.table.write.context import TaskIdentity, WriteContext
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.log_writer import LogWrite, encode_log_upserts, log_changes, write_log_file
from hoodie_sink.table.write.upsert.result import TaskOutputs


class LogAppends:
    def __init__(self, ctx: WriteContext, task: TaskIdentity, guard: InstantGuard, outputs: TaskOutputs):
        self.ctx = ctx
        self.task = task
        self.guard = guard
        self.outputs = outputs
        self.storage = guard.storage  # the task's one storage
        self.ordering_field = ctx.plan.merge_rule.ordering_field
        self.slices = ctx.slices_by_id
        # final flush: the buckets that may become log files, and their prepared
        # (target, changes written, encoded records), keyed by file id
        self._candidates: dict[tuple[str, str], Callable[[], pa.Table]] = {}
        self._prepared: dict[str, tuple[LogWrite, pa.Table, pa.Array]] = {}

    def add_candidate(self, key: tuple[str, str], changes: Callable[[], pa.Table]) -> None:
        self._candidates[key] = changes

    def prepare(self, keys: list[tuple[str, str]]) -> None:
        """Decide what the final flush's log files hold and encode their records in one pass
        (write_log_file then only frames and writes them)."""
        logs: list[tuple[LogWrite, pa.Table]] = []
        for key in keys:
            changes = self._candidates.pop(key, None)
            if changes is None:
                continue
            sl = self.slices[key[1]]
            written = log_changes(self.ctx, sl, changes())
            if written is None:
                continue  # the file group is rewritten instead (append decides again)
            logs.append((self._target(key[1]), written))
        if not logs:
            return
        for (target, written), records in zip(
            logs, encode_log_upserts(logs, self.ctx.avro_with_meta), strict=True
        ):
            self._prepared[target.slice.file_id] = (target, written, records)

    def append(self, fid: str, changes: pa.Table) -> bool:
        """Write the changes as a log file; False when the file group must be rewritten instead."""
        prepared = self._prepared.pop(fid, None)
        records = None
        if prepared is not None:
            target, written, records = prepared
        else:
            found = log_changes(self.ctx, self.slices[fid], changes)
            if found is None:
                return False
            target, written = self._target(fid), found
        if written.num_rows:
            stat = write_log_file(
                self.storage, target, written, self.ordering_field, self.ctx.avro_with_meta,
                self.guard, records=records, exclusive=self.ctx.config.occ,
                column_stats=self.ctx.config.log_column_stats,
            )  # fmt: skip
            self.outputs.add_stats(stat)
        return True

    def clear(self) -> None:
        self._candidates.clear()
        self._prepared.clear()

    def _target(self, fid: str) -> LogWrite:
        sl = self.slices[fid]
        return LogWrite(sl, sl.max_version + 1, self.task.token, self.ctx.instant, self.task.partition_id)
