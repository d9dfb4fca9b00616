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


def cdc_into_hoodie(spark, src: str, path: str, ckpt: str, table_type: str) -> None:
    df = (spark.readStream.schema("id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN")
          .option("maxFilesPerTrigger", 1).parquet(src))  # fmt: skip
    q = (df.writeStream.format("hoodie").option("hoodie.datasource.write.recordkey.field", "id")
         .option("hoodie.datasource.write.partitionpath.field", "city")
         .option("hoodie.datasource.write.precombine.field", "ts")
         .option("hoodie.datasource.write.table.type", table_type)
         .option("hoodie.compact.inline.max.delta.commits", "2")
         # no small-file packing (as Hudi's MOR fixtures): updates of a micro-batch always go to logs
         .option("hoodie.parquet.small.file.limit", "0")
         .option("hoodie.client.heartbeat.interval_in_ms", str(HEARTBEAT_MS))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start(path))  # fmt: skip
    q.awaitTermination()
    q.stop()


def events_into_a(spark, src: str, path: str, ckpt: str) -> None:
    """Stage 1 of the pipeline: event files -> table A."""
    df = (
        spark.readStream.schema("id LONG, city STRING, fare DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .parquet(src)
    )
    q = (df.writeStream.format("hoodie").option("hoodie.table.name", "events")
         .option("hoodie.datasource.write.recordkey.field", "id")
         .option("hoodie.datasource.write.partitionpath.field", "city")
         .option("hoodie.client.heartbeat.interval_in_ms", str(HEARTBEAT_MS))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start(path))  # fmt: skip
    q.awaitTermination()
    q.stop()


def totals_into_b(spark, upstream: str, path: str, ckpt: str) -> None:
    """Stage 2: a stream of table A -> the running aggregate per city -> table B (complete mode)."""
    from pyspark.sql import functions as F

    events = (spark.readStream.format("hoodie")
              .option("hoodie.datasource.streaming.max.instants.per.batch", "1").load(upstream))  # fmt: skip
    totals = events.groupBy("city").agg(F.count("*").alias("events"), F.sum("fare").alias("fares"))
    q = (totals.writeStream.format("hoodie").outputMode("complete").option("hoodie.table.name", "totals")
         .option("hoodie.datasource.write.recordkey.field", "city")
         .option("hoodie.datasource.write.partitionpath.field", "")
         .option("hoodie.client.heartbeat.interval_in_ms", str(HEARTBEAT_MS))
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start(path))  # fmt: skip
    q.awaitTermination()
    q.stop()


DRIVERS = {f.__name__: f for f in (cdc_into_hoodie, events_into_a, totals_into_b)}


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
