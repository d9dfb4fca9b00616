"""`hoodie_sink.spark.route`: routing before the sink, as a DataFrame transform
(docs/design/routing.md).  A Python data source cannot ask Spark for an input distribution
(docs/spark/python-datasource.md#no-distribution-requirement), so the routing is put in the query
plan in front of it:

1. the records get their arrival order, then are shuffled by their record key's columns into
   `parallelism` tasks (with RECORD_INDEX: by the key's record-index file group,
   table/write/routing/index_groups.py) and sorted by them;
2. each task tags its records against the table's latest snapshot (table/write/routing/tag.py);
   the result is checkpointed locally (read twice: counted, then routed);
3. the inserts are counted per partition and planned in the driver (metadata only), and each
   file group is given a write task (table/write/routing/write_tasks.py);
4. each insert gets its planned file group (in Spark SQL: table/write/routing/inserts.py), and
   the records are shuffled to their file group's task and sorted by file group, so each file
   group is in one write task and its records arrive together.

Append and bulk_insert skip steps 1 and 2 (table/write/routing/new_file_groups.py).

Steps 1 to 3 run when the transform is applied (one Spark job), step 4 when the DataFrame is
written.  The table must not change in between: the sink refuses routes computed on an older
snapshot (HoodieWriteConflictError; route again)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
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
    of the write (default: Spark's shuffle partitions, as adaptive execution coalesces them, for
    the tag step; Spark's default parallelism, at most one task per file group, for the write)."""
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
    return routed_with_config(df, WriteConfig.from_options(options, path=path), parallelism)


def routed_with_config(df: DataFrame, cfg: WriteConfig, parallelism: int | None = None) -> DataFrame:
    """`routed`, for settings resolved already (the Table's MERGE routes its changes with the
    DML's own: datasource/dml.py)."""
    if parallelism is not None and parallelism < 1:
        raise HoodieConfigError(f"route's parallelism must be at least 1, got {parallelism}.")
    # by default Spark's own: spark.sql.shuffle.partitions, coalesced by adaptive execution to
    # partitions of its advisory size (small writes then run in few tasks, large ones in many)
    shuffle = (lambda *cols: (parallelism, *cols)) if parallelism else (lambda *cols: cols)
    op = routing.check_routable(cfg)
    nonce = uuid.uuid4().hex
    ctx, fingerprint = routing.routing_context(cfg, spark_to_arrow(df.schema), nonce)
    if routing.adds_file_groups_only(op):  # append, bulk_insert: no lookup, nothing to combine
        tagged, inserts = _located(df, ctx, fingerprint)
        records: dict[str, int] = {}
        # bulk_insert writes each file sorted by key, as Hudi's bulk_insert sorts
        within = [routing.KEY] if op.sorts_by_key else []
    else:
        tagged, records, inserts = _tagged(df, ctx, fingerprint, shuffle)
        within = []
    if inserts:  # each insert's file group, in the JVM: a broadcast of one row per partition
        buckets = routing.plan_inserts(ctx, inserts, nonce)
        for planned in buckets.by_partition.values():
            for fid, n in zip(planned.file_ids, planned.records, strict=True):
                records[fid] = records.get(fid, 0) + n
        plan = df.sparkSession.createDataFrame(routing.plan_table(buckets))
        filled = F.expr(routing.FILE_ID_SQL).alias(routing.FILE_ID)
        tagged = tagged.join(F.broadcast(plan), routing.PARTITION, "left").select(
            *[filled if c == routing.FILE_ID else F.col(c) for c in tagged.columns]
        )
    return _by_write_task(tagged, ctx, records, parallelism).sortWithinPartitions(routing.FILE_ID, *within)


def _tagged(
    df: DataFrame, ctx, fingerprint: str, shuffle
) -> tuple[DataFrame, dict[str, int], dict[str, int]]:
    """Keyed operations: the records shuffled by key, tagged against the snapshot and kept (a local
    checkpoint); the records of each file group and the inserts of each partition."""
    key_columns = [F.col(c) for c in ctx.config.record_key_fields]
    out_schema = StructType(df.schema.fields + arrow_to_spark(routing.ROUTE_SCHEMA).fields)

    def tag(batches):
        tc = TaskContext.get()
        yield from routing.RouteTagger(ctx, fingerprint, tc.partitionId() if tc else 0).tag(batches)

    arrived = df.withColumn(routing.ARRIVAL, F.monotonically_increasing_id())
    groups = routing.record_index_groups(ctx)
    if groups is None:
        by_key = arrived.repartition(*shuffle(*key_columns))
    else:  # RECORD_INDEX: each tag task gets the keys of a few index file groups (index_groups.py)
        grouped = StructType(arrived.schema.fields + arrow_to_spark(routing.GROUP_SCHEMA).fields)

        def group(batches):
            for batch in batches:
                yield routing.with_index_group(ctx, groups, batch)

        by_key = (
            arrived.mapInArrow(group, grouped).repartition(*shuffle(F.col(routing.GROUP))).drop(routing.GROUP)
        )
    tagged = by_key.sortWithinPartitions(*key_columns).mapInArrow(tag, out_schema).localCheckpoint(eager=True)
    records: dict[str, int] = {}
    inserts: dict[str, int] = {}
    # one small job over the kept result
    for fid, part, insert, n in (
        tagged.groupBy(routing.FILE_ID, routing.PARTITION, routing.INSERT).count().collect()
    ):
        if fid is not None:
            records[fid] = records.get(fid, 0) + n
        elif insert:
            inserts[part] = inserts.get(part, 0) + n
    return tagged, records, inserts


def _located(df: DataFrame, ctx, fingerprint: str) -> tuple[DataFrame, dict[str, int]]:
    """Append and bulk_insert: every record an insert with its partition path and key; and the
    records of each partition path, counted by a first pass (only the location's columns go to
    Python).  The records themselves are located again in one pipeline with the write: nothing
    is kept."""
    located = _record_locations(df, ctx)
    inserts: dict[str, int] = dict(
        df.select(located.getField("partition").alias("p")).groupBy("p").count().collect()
    )
    tagged = df.withColumn(_LOCATION, located).select(
        *[F.col(c) for c in df.columns],
        F.lit(None).cast("string").alias(routing.FILE_ID),
        F.col(_LOCATION).getField("partition").alias(routing.PARTITION),
        F.col(_LOCATION).getField("key").alias(routing.KEY),
        F.monotonically_increasing_id().alias(routing.ORDER),
        F.lit(0).cast("tinyint").alias(routing.KIND),  # an upsert of a new record
        F.lit(True).alias(routing.INSERT),
        F.lit(False).alias(routing.REWRITE),
        F.lit(fingerprint).alias(routing.BASE),
    )
    return tagged, inserts


def _by_write_task(tagged: DataFrame, ctx, records: dict[str, int], parallelism: int | None) -> DataFrame:
    """The rows shuffled to the write task planned for their file group (routing/write_tasks.py;
    a broadcast of one row per file group)."""
    spark = tagged.sparkSession
    tasks = parallelism or max(1, min(len(records), spark.sparkContext.defaultParallelism))
    task_of = routing.assign_write_tasks(ctx, records, tasks)
    lands_on = _keys_landing_on(spark, tasks)
    placement = spark.createDataFrame(
        pa.table({routing.FILE_ID: pa.array(list(task_of), pa.string()),
                  _TASK: pa.array([lands_on[t] for t in task_of.values()], pa.int64())})
    )  # fmt: skip
    placed = tagged.join(F.broadcast(placement), routing.FILE_ID, "left").select(*tagged.columns, _TASK)
    return placed.repartition(tasks, F.col(_TASK)).drop(_TASK)


_LOCATION = "_hoodie_route_location"


def _record_locations(df: DataFrame, ctx) -> Column:
    """A struct (partition path, record key) per record, derived in Python by the write's key
    generator from the columns it reads alone (a scalar Arrow UDF: the others stay in the JVM)."""
    columns = routing.location_source_columns(ctx)
    if not columns:  # keyless and not partitioned
        return F.struct(F.lit("").alias("partition"), F.lit(None).cast("string").alias("key"))

    # routing.LOCATION_TYPE; the type hints make it a scalar UDF (PySpark's stubs want the
    # functionType argument, which PySpark then warns is not preferred)
    @F.arrow_udf("struct<partition: string, key: string>")  # type: ignore[call-overload]
    def locate(*arrays: pa.Array) -> pa.Array:
        batch = pa.RecordBatch.from_arrays(list(arrays), names=columns)
        return routing.record_locations(ctx, batch)

    return locate(*[F.col(c) for c in columns])


_TASK = "_hoodie_route_task"  # the route's last shuffle puts each row on the task of this key
_LANDING: dict[int, list[int]] = {}


def _keys_landing_on(spark, tasks: int) -> list[int]:
    """For each task t of a shuffle into `tasks` partitions by one bigint column, a value Spark
    puts on partition t: a hash partitioning sends v to pmod(hash(v), tasks) (Murmur3, seed 42,
    the SQL `hash`), so the smallest such v per partition is looked up once, by Spark itself."""
    if tasks not in _LANDING:
        found = dict(
            spark.range(0, 64 * tasks)
            .groupBy(F.pmod(F.hash("id"), F.lit(tasks)).alias("t"))
            .agg(F.min("id"))
            .collect()
        )
        if len(found) != tasks:
            raise RuntimeError(f"no bigint lands on {tasks - len(found)} of {tasks} shuffle partitions")
        _LANDING[tasks] = [found[t] for t in range(tasks)]
    return _LANDING[tasks]


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
