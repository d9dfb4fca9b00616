"""The streaming queries of the kill tests (test_streaming_kill.py, test_stream_pipeline.py).

Each runs first in a driver subprocess (`python -m tests.spark.stream_drivers NAME ARGS...`),
which the test kills with SIGKILL at a crash point, and then again in the tests' shared Spark
session: a restart from the checkpoint is a new query on the same table and checkpoint, and
needs no new JVM (a driver subprocess costs about 10 s of JVM and Python worker start).
"""

from __future__ import annotations

import sys
import time

# a crashed write is rolled back once its heartbeat has expired: interval x 2 tolerated misses
HEARTBEAT_MS = 1000


def wait_out_the_killed_heartbeat() -> None:
    """Before a restart in this process: the killed driver's last beat is older than
    interval x misses (+1 s: S3 gives mtimes in whole seconds), so the restart rolls its
    write back (a restarted driver's JVM start used to pass that time)."""
    time.sleep(HEARTBEAT_MS / 1000 * 2 + 1.2)


def _run_to_the_end(df, path: str, ckpt: str, options: dict[str, str], mode: str = "append") -> None:
    """Write `df` into the hoodie table at `path` until its source is drained (availableNow)."""
    q = (df.writeStream.format("hoodie").outputMode(mode).options(**options)
         .option("hoodie.client.heartbeat.interval_in_ms", str(HEARTBEAT_MS))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start(path))  # fmt: skip
    q.awaitTermination()
    q.stop()


def cdc_into_hoodie(
    spark, src: str, path: str, ckpt: str, table_type: str, extra: dict | None = None
) -> None:
    df = (spark.readStream.schema("id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN")
          .option("maxFilesPerTrigger", 1).parquet(src))  # fmt: skip
    options = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.compact.inline.max.delta.commits": "2",
        # no small-file packing (as Hudi's MOR fixtures): updates of a micro-batch always go to logs
        "hoodie.parquet.small.file.limit": "0",
        **(extra or {}),
    }
    _run_to_the_end(df, path, ckpt, options)


# Hudi's metadata table kept, and compacted every 3 of its deltacommits (a kill test's few batches see one)
METADATA_OPTIONS = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "3"}


def cdc_into_hoodie_with_metadata(spark, src: str, path: str, ckpt: str, table_type: str) -> None:
    """cdc_into_hoodie with Hudi's metadata table kept (the metadata kill tests)."""
    cdc_into_hoodie(spark, src, path, ckpt, table_type, METADATA_OPTIONS)


def cdc_routed_into_hoodie(spark, src: str, path: str, ckpt: str, table_type: str) -> None:
    """The CDC stream of cdc_into_hoodie, each micro-batch routed by hoodie_sink.spark.route and
    written with foreachBatch (hoodie_sink.spark.micro_batches), as issue 27 has users run it."""
    import hoodie_sink.spark

    df = (spark.readStream.schema("id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN")
          .option("maxFilesPerTrigger", 1).parquet(src))  # fmt: skip
    options = {
        "hoodie.table.name": "cdc",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.compact.inline.max.delta.commits": "2",
        "hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS),
        # no small-file packing (as cdc_into_hoodie): updates of a micro-batch always go to logs
        "hoodie.parquet.small.file.limit": "0",
        "checkpointLocation": ckpt,
    }
    q = (df.writeStream.foreachBatch(hoodie_sink.spark.micro_batches(path, options))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start())  # fmt: skip
    q.awaitTermination()
    q.stop()


def events_into_a(spark, src: str, path: str, ckpt: str) -> None:
    """Stage 1 of the pipeline: event files -> table A."""
    df = (
        spark.readStream.schema("id LONG, city STRING, fare DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .parquet(src)
    )
    options = {
        "hoodie.table.name": "events",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
    }
    _run_to_the_end(df, path, ckpt, options)


def totals_into_b(spark, upstream: str, path: str, ckpt: str) -> None:
    """Stage 2: a stream of table A -> the running aggregate per city -> table B (complete mode)."""
    from pyspark.sql import functions as F

    events = (spark.readStream.format("hoodie")
              .option("hoodie.datasource.streaming.max.instants.per.batch", "1").load(upstream))  # fmt: skip
    totals = events.groupBy("city").agg(F.count("*").alias("events"), F.sum("fare").alias("fares"))
    options = {
        "hoodie.table.name": "totals",
        "hoodie.datasource.write.recordkey.field": "city",
        "hoodie.datasource.write.partitionpath.field": "",
    }
    _run_to_the_end(totals, path, ckpt, options, mode="complete")


DRIVERS = {
    f.__name__: f
    for f in (
        cdc_into_hoodie,
        cdc_into_hoodie_with_metadata,
        cdc_routed_into_hoodie,
        events_into_a,
        totals_into_b,
    )
}


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    name, *args = argv
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())  # fmt: skip
    DRIVERS[name](spark, *args)
    print("DONE")


if __name__ == "__main__":
    main(sys.argv[1:])
