"""`df.writeStream.format("hoodie")`: one instant per micro-batch, exactly once.

Spark constructs this writer twice per micro-batch in two processes (one pickled to the
tasks, one for the commit), so the constructor only parses options.  The batch's instant is
begun by its first task with rows (hoodie_sink.table.write.streaming); the commit finds it through
the task messages and publishes it with the checkpoint, atomically.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from hoodie_sink.config import WriteConfig
from hoodie_sink.datasource.batch_writer import refuse_conflict_retries, task_identity
from hoodie_sink.datasource.report_log import show_reports_on_stderr
from hoodie_sink.datasource.spark_schema import spark_to_arrow
from hoodie_sink.table import client
from hoodie_sink.table.write import streaming
from hoodie_sink.table.write.context import TaskResult
from hoodie_sink.table.write.streaming import BatchRef

log = logging.getLogger("hoodie_sink.stream")


@dataclass
class StreamCommitMessage(WriterCommitMessage):
    ref: BatchRef | None = None
    result: TaskResult | None = None
    skipped: bool = False  # the batch was already committed: nothing written
    rows: int = 0
    extra: dict = field(default_factory=dict)


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

        result = client.write_task(ctx, task_identity(), batches())
        return StreamCommitMessage(ref, result, rows=result.num_records)

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
        checkpoints = streaming.committed_checkpoints(storage)  # one timeline load for both uses
        if streaming.batch_committed(checkpoints, self.identifier, batchId):
            client.abort(ctx)  # a replay raced a commit: drop the duplicate
            return
        # raises HoodieCommitStateUnknown if the commit may have landed: Spark then calls abort,
        # which deletes nothing once the completed file exists, and a restart replays this batch,
        # which is skipped if its checkpoint is committed
        extra = streaming.with_checkpoint(checkpoints, self.identifier, batchId)
        client.complete(
            ctx,
            [m.result for m in written if m.result is not None],
            extra,
            label=f"micro-batch {batchId} of {self.identifier}",
        )
        streaming.forget_batch(storage, ref)

    def abort(self, messages, batchId: int) -> None:
        storage = self.cfg_storage()
        refs = {m.ref for m in messages if isinstance(m, StreamCommitMessage) and m.ref is not None}
        for ref in refs:
            ctx = streaming.load_context(storage, ref)
            if ctx is not None:
                client.abort(ctx)
                streaming.forget_batch(storage, ref)

    def cfg_storage(self):
        from hoodie_sink.table.storage import Storage

        return Storage(self.cfg.path)
