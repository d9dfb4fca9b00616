"""`df.write.format("hoodie")`: the batch writer.

Spark calls `DataSource.writer()` once, in a driver-side Python worker; that instance is
pickled to every task and is also the one whose `commit`/`abort` run.  So the instant is
started in the constructor (before any task writes), tasks write and report, and the commit
publishes.  Everything that can refuse the input is checked in the constructor, so a bad
option or schema fails the query before any data file exists (docs/spark/python-datasource.md#batch-writes).
"""

from __future__ import annotations

import logging

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter
from pyspark.sql.types import StructType

from hoodie_sink.datasource.messages import HoodieCommitMessage, results_of
from hoodie_sink.datasource.report_log import show_reports_on_stderr
from hoodie_sink.datasource.spark_schema import spark_to_arrow
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieConfigError
from hoodie_sink.table import client
from hoodie_sink.table.client import TaskIdentity, routing
from hoodie_sink.table.client import micro_batches as streaming
from hoodie_sink.table.options.write_config import WriteConfig

log = logging.getLogger(__name__)


def refuse_conflict_retries(cfg: WriteConfig) -> None:
    """A Spark write cannot be run again from its commit hook: Spark would have to re-run the tasks."""
    if cfg.conflict_retries:
        raise HoodieConfigError(
            "Option 'hoodie.write.num.retries.on.conflict.failures' is not supported on Spark writes: the "
            "DataSource's commit cannot re-run the write's tasks. Help: retry the write in the job on "
            "HoodieWriteConflictError (nothing of a write that lost a conflict is committed), or use "
            "hoodie_sink.write, which retries."
        )


def task_identity() -> TaskIdentity:
    tc = TaskContext.get()
    if tc is None:
        return TaskIdentity()
    return TaskIdentity(tc.partitionId(), tc.stageId(), tc.taskAttemptId(), tc.attemptNumber())


class HoodieBatchWriter(DataSourceArrowWriter):
    def __init__(self, options, schema: StructType, overwrite: bool):
        cfg = WriteConfig.from_options(dict(options), overwrite=overwrite)
        refuse_conflict_retries(cfg)
        # foreachBatch micro-batches: the identity their checkpoints are recorded under
        self.identifier = cfg.checkpoint_identifier or streaming.default_identifier(dict(options))
        arrow_schema = spark_to_arrow(schema)
        if routing.is_routed(arrow_schema):  # the output of hoodie_sink.spark.route
            routing.check_routable(cfg)
            self.ctx = client.begin(cfg, routing.user_schema(arrow_schema), routed=True)
        else:
            self.ctx = client.begin(cfg, arrow_schema)

    def write(self, iterator) -> HoodieCommitMessage:
        return HoodieCommitMessage(client.write_task(self.ctx, task_identity(), iterator))

    def commit(self, messages) -> None:
        show_reports_on_stderr()
        extra, label = None, "write"
        batch_id = self.ctx.config.foreach_batch_id
        if batch_id is not None:  # a micro-batch written by hoodie_sink.spark.micro_batches
            adds = streaming.micro_batch_commit(self.ctx.storage, self.identifier, batch_id)
            if adds is None:
                log.info(
                    "hoodie: micro-batch %d already committed for %s; dropped", batch_id, self.identifier
                )
                client.abort(self.ctx)  # a replay raced a commit: drop the duplicate
                return
            extra, label = adds
        try:
            client.complete(self.ctx, results_of(messages), extra, label=label)
        except HoodieCommitStateUnknown:
            raise  # maybe landed: keep every file (Spark's abort below finds the commit or fails to look)
        except BaseException:
            client.abort(self.ctx)
            raise

    def abort(self, messages) -> None:
        # Spark also calls this after a failed commit; client.abort deletes nothing if it landed.
        client.abort(self.ctx)
