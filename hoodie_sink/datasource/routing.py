"""`hoodie_sink.spark.route`: routing before the sink, as a DataFrame transform
(docs/design/routing.md).  A Python data source cannot ask Spark for an input distribution
(docs/spark/python-datasource.md#no-distribution-requirement), so the routing is put in the query
plan in front of it:

1. the records get their arrival order, then are shuffled by their record key's columns into
   `parallelism` tasks and sorted by them;
2. each task tags its records against the table's latest snapshot (table/write/routing/tag.py);
   the result is checkpointed locally (read twice: counted, then routed);
3. the inserts are counted per partition and planned in the driver (metadata only);
4. each insert gets its planned file group (in Spark SQL: table/write/routing/inserts.py), and
   the records are shuffled by file group and sorted by it, so each file group is in one write
   task and its records arrive together.

Steps 1 to 3 run when the transform is applied (one Spark job), step 4 when the DataFrame is
written.  The table must not change in between: the sink refuses routes computed on an older
snapshot (HoodieWriteConflictError; route again)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping

from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from hoodie_sink.datasource.spark_schema import arrow_to_spark, spark_to_arrow
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.client import micro_batches as streaming
from hoodie_sink.table.client import routing
from hoodie_sink.table.options.write_config import WriteConfig

log = logging.getLogger(__name__)
IDENTIFIER_OPTION = "hoodie.datasource.write.streaming.checkpoint.identifier"
BATCH_ID_OPTION = "hoodie.sink.streaming.batch.id"


def route(
    path: str, options: Mapping[str, str] | None = None, parallelism: int | None = None
) -> Callable[[DataFrame], DataFrame]:
    """A function for `DataFrame.transform` that routes a batch DataFrame to the file groups of
    the Hudi table at `path` (created by the write if absent); write its result with
    `.write.format("hoodie")` and the same options.  `parallelism`: the tasks of the tag step and
    of the write (default: Spark's shuffle partitions, as adaptive execution coalesces them)."""
    opts = dict(options or {})

    def transform(df: DataFrame) -> DataFrame:
        return routed(df, path, opts, parallelism)

    return transform


def routed(df: DataFrame, path: str, options: Mapping[str, str], parallelism: int | None = None) -> DataFrame:
    if df.isStreaming:
        raise HoodieConfigError(
            "hoodie_sink.spark.route routes a batch DataFrame: a stream's routes must be computed per "
            "micro-batch, on the table as that micro-batch finds it. Help: "
            "df.writeStream.foreachBatch(hoodie_sink.spark.micro_batches(path, options))."
        )
    if parallelism is not None and parallelism < 1:
        raise HoodieConfigError(f"route's parallelism must be at least 1, got {parallelism}.")
    # by default Spark's own: spark.sql.shuffle.partitions, coalesced by adaptive execution to
    # partitions of its advisory size (small writes then run in few tasks, large ones in many)
    shuffle = (lambda *cols: (parallelism, *cols)) if parallelism else (lambda *cols: cols)
    cfg = WriteConfig.from_options(options, path=path)
    op = routing.check_routable(cfg)
    nonce = uuid.uuid4().hex
    ctx, fingerprint = routing.routing_context(cfg, spark_to_arrow(df.schema), nonce)
    out_schema = StructType(df.schema.fields + arrow_to_spark(routing.ROUTE_SCHEMA).fields)
    arriving = df.withColumn(routing.ARRIVAL, F.monotonically_increasing_id())
    if routing.adds_file_groups_only(op):  # append, bulk_insert: no lookup, nothing to combine

        def tag_new(batches):
            yield from routing.NewFileGroupTagger(ctx, fingerprint).tag(batches)

        tagged = arriving.mapInArrow(tag_new, out_schema).localCheckpoint(eager=True)
        # bulk_insert writes each file sorted by key; append keeps the input's order
        within = routing.KEY if op.sorts_by_key else routing.ORDER
    else:
        key_columns = [F.col(c) for c in ctx.config.record_key_fields]

        def tag(batches):
            tc = TaskContext.get()
            yield from routing.RouteTagger(ctx, fingerprint, tc.partitionId() if tc else 0).tag(batches)

        tagged = (
            arriving.repartition(*shuffle(*key_columns))
            .sortWithinPartitions(*key_columns)
            .mapInArrow(tag, out_schema)
            .localCheckpoint(eager=True)
        )
        within = None
    counts = {
        row[0]: row[1]
        for row in tagged.where(F.col(routing.FILE_ID).isNull() & F.col(routing.INSERT))
        .groupBy(routing.PARTITION)
        .count()
        .collect()
    }
    if counts:  # each insert's file group, in the JVM: a broadcast of one row per partition
        plan = df.sparkSession.createDataFrame(routing.plan_table(routing.plan_inserts(ctx, counts, nonce)))
        filled = F.expr(routing.FILE_ID_SQL).alias(routing.FILE_ID)
        tagged = tagged.join(F.broadcast(plan), routing.PARTITION, "left").select(
            *[filled if c == routing.FILE_ID else F.col(c) for c in tagged.columns]
        )
    by_file_group = tagged.repartition(*shuffle(F.col(routing.FILE_ID)))
    return by_file_group.sortWithinPartitions(routing.FILE_ID, *([within] if within else []))


def micro_batches(
    path: str, options: Mapping[str, str] | None = None, parallelism: int | None = None
) -> Callable[[DataFrame, int], None]:
    """A function for `DataStreamWriter.foreachBatch` that routes each micro-batch on the table
    as it finds it and writes it with the batch sink, exactly once: the commit records the batch
    id under the stream's checkpoint identifier (option
    hoodie.datasource.write.streaming.checkpoint.identifier; by default derived from the
    `checkpointLocation` or `queryName` given in `options`, as the stream sink does), and a
    batch the table holds already (a replay after a crash) is skipped.  A write that loses a
    conflict to another writer, or finds the table changed since its route, is routed and
    written again, up to hoodie.datasource.write.streaming.retry.count times."""
    opts = dict(options or {})
    identifier = opts.get(IDENTIFIER_OPTION) or streaming.default_identifier(
        {k.lower(): v for k, v in opts.items()}
    )
    cfg = WriteConfig.from_options({**opts, IDENTIFIER_OPTION: identifier}, path=path)
    writer_options = {k: v for k, v in opts.items() if k.lower() not in ("checkpointlocation", "queryname")}

    def write_batch(df: DataFrame, batch_id: int) -> None:
        storage = cfg.storage()
        wait_s = cfg.stream_retry_interval_ms / 1000
        for attempt in range(cfg.stream_retries + 1):
            if streaming.batch_committed(streaming.committed_checkpoints(storage), identifier, batch_id):
                log.info("hoodie: micro-batch %d of %s is committed already; skipped", batch_id, identifier)
                return
            try:
                routed(df, path, opts, parallelism).write.format("hoodie").options(**writer_options).option(
                    IDENTIFIER_OPTION, identifier
                ).option(BATCH_ID_OPTION, str(batch_id)).mode("append").save(path)
                return
            except Exception as e:  # Spark wraps the sink's errors: the conflict is known by its name
                if "HoodieWriteConflictError" not in str(e) or attempt == cfg.stream_retries:
                    raise
                log.warning("hoodie: micro-batch %d of %s: write conflict, routed again in %.1f s (retry %d of %d)",
                            batch_id, identifier, wait_s, attempt + 1, cfg.stream_retries)  # fmt: skip
                time.sleep(wait_s)
                wait_s *= 2

    return write_batch
