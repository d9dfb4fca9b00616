"""`df.writeStream.format("hoodie")`: one instant per micro-batch, exactly once.

Spark constructs this writer twice per micro-batch in two processes (one pickled to the
tasks, one for the commit; docs/spark/python-datasource.md#streaming-writes), so the constructor
only parses options.  The batch's instant is begun by its first task with rows
(hoodie_sink.table.client.micro_batches); the commit finds it through the task messages and
publishes it with the checkpoint, atomically.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from hoodie_sink.datasource.batch_writer import refuse_conflict_retries, task_identity
from hoodie_sink.datasource.report_log import show_reports_on_stderr
from hoodie_sink.datasource.spark_schema import spark_to_arrow
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieWriteConflictError
from hoodie_sink.table import client
from hoodie_sink.table.client import TaskIdentity, TaskResult
from hoodie_sink.table.client import micro_batches as streaming
from hoodie_sink.table.client.micro_batches import BatchRef
from hoodie_sink.table.options.write_config import WriteConfig

log = logging.getLogger("hoodie_sink.stream")


@dataclass
class StreamCommitMessage(WriterCommitMessage):
    ref: BatchRef | None = None
    result: TaskResult | None = None
    skipped: bool = False  # the batch was already committed: nothing written
    rows: int = 0
    input_path: str | None = None  # OCC: the task's input, kept for a retry after a lost conflict
    extra: dict = field(default_factory=dict)


def spooled(
    storage, path: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Pass the batches on while keeping a copy at `path` (an Arrow IPC stream)."""
    with storage.open_output(path) as sink, pa.ipc.new_stream(sink, schema) as out:
        for batch in batches:
            out.write_batch(batch)
            yield batch


def read_spooled(storage, paths: list) -> Iterator[pa.RecordBatch]:
    for path in paths:
        with storage.open_input_file(path) as source:
            yield from pa.ipc.open_stream(source)


class HoodieStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options, schema, overwrite: bool):
        opts = dict(options)
        self.cfg = WriteConfig.from_options(opts, overwrite=overwrite, streaming=True)
        refuse_conflict_retries(self.cfg)
        self.identifier = self.cfg.checkpoint_identifier or streaming.default_identifier(opts)
        self.arrow_schema = spark_to_arrow(schema)

    def write(self, iterator) -> StreamCommitMessage:
        tc = TaskContext.get()
        if tc is None:
            raise RuntimeError("hoodie: the stream writer runs in a Spark task only")
        batch = tc.getLocalProperty("streaming.sql.batchId")
        if batch is None:
            raise RuntimeError("hoodie: the task has no streaming batch id (streaming.sql.batchId)")
        batch_id = int(batch)
        run_id = (
            tc.getLocalProperty("spark.jobGroup.id") or tc.getLocalProperty("sql.streaming.queryId") or "run"
        )
        ref = BatchRef(self.identifier, batch_id, run_id)
        first = next(iterator, None)
        while first is not None and first.num_rows == 0:
            first = next(iterator, None)
        if first is None:
            return StreamCommitMessage(ref)  # an empty task begins nothing
        ctx = streaming.begin_batch(self.cfg, self.arrow_schema, ref)
        if ctx is None:
            return StreamCommitMessage(ref, skipped=True)

        def batches():
            yield first
            yield from iterator

        identity = task_identity()
        if not self.spools:
            result = client.write_task(ctx, identity, batches())
            return StreamCommitMessage(ref, result, rows=result.num_records)
        spool = f"{ref.input_dir}/{identity.token}.arrow"
        result = client.write_task(ctx, identity, spooled(ctx.storage, spool, first.schema, batches()))
        return StreamCommitMessage(ref, result, rows=result.num_records, input_path=spool)

    @property
    def spools(self) -> bool:
        return self.cfg.occ and self.cfg.stream_retries > 0

    def commit(self, messages, batchId: int) -> None:
        show_reports_on_stderr()
        msgs = [m for m in messages if isinstance(m, StreamCommitMessage)]
        written = [m for m in msgs if m.result is not None]
        if not written:
            if any(m.skipped for m in msgs):
                log.info("hoodie: micro-batch %d already committed for %s; skipped", batchId, self.identifier)
            return  # empty micro-batch: no commit
        ref = written[0].ref
        assert ref is not None, "a written task message names its micro-batch"
        storage = self.cfg_storage()
        ctx = streaming.load_context(storage, ref)
        if ctx is None:
            raise RuntimeError(f"hoodie: no write context for micro-batch {batchId} ({ref.ctx_path})")
        adds = streaming.micro_batch_commit(storage, self.identifier, batchId)
        if adds is None:
            client.abort(ctx)  # a replay raced a commit: drop the duplicate
            return
        # raises HoodieCommitStateUnknown if the commit may have landed: Spark then calls abort,
        # which deletes nothing once the completed file exists, and a restart replays this batch,
        # which is skipped if its checkpoint is committed
        extra, label = adds
        try:
            client.complete(ctx, [m.result for m in written if m.result is not None], extra, label=label)
        except HoodieWriteConflictError as conflict:
            if not self.spools:
                raise
            client.abort(ctx)  # nothing of it landed; the retries write the batch on new instants
            try:
                self._retry(storage, batchId, [m.input_path for m in written], conflict, label)
            finally:
                streaming.forget_batch(storage, ref)
            return
        streaming.forget_batch(storage, ref)

    def _retry(
        self, storage, batch_id: int, inputs: list[str | None], conflict: HoodieWriteConflictError, label: str
    ) -> None:
        """Write a micro-batch that lost a conflict again, here in the commit's process, from the
        input its tasks kept: each try is a new write planned on the timeline that holds the other
        writer's commit, with the batch's checkpoint, so a replay after a crash still skips it."""
        if None in inputs:
            raise conflict  # a task kept no input (cannot happen while spools is on)
        wait_s = self.cfg.stream_retry_interval_ms / 1000
        for attempt in range(1, self.cfg.stream_retries + 1):
            log.warning("hoodie: %s lost a write conflict; retry %d of %d in %.1f s: %s", label, attempt,
                        self.cfg.stream_retries, wait_s, conflict)  # fmt: skip
            time.sleep(wait_s)
            wait_s *= 2
            adds = streaming.micro_batch_commit(storage, self.identifier, batch_id)
            if adds is None:
                return
            ctx = client.begin(self.cfg, self.arrow_schema)
            try:
                result = client.write_task(ctx, TaskIdentity(only_task=True), read_spooled(storage, inputs))
                extra = adds[0]
                client.complete(ctx, [result], extra, label=f"{label} (retry {attempt})")
                return
            except HoodieWriteConflictError as again:
                client.abort(ctx, settle_seconds=0)
                conflict = again
            except HoodieCommitStateUnknown:
                raise
            except BaseException:
                client.abort(ctx, settle_seconds=0)
                raise
        raise conflict

    def abort(self, messages, batchId: int) -> None:
        storage = self.cfg_storage()
        refs = {m.ref for m in messages if isinstance(m, StreamCommitMessage) and m.ref is not None}
        for ref in refs:
            ctx = streaming.load_context(storage, ref)
            if ctx is not None:
                client.abort(ctx)
                streaming.forget_batch(storage, ref)

    def cfg_storage(self):
        return self.cfg.storage()
