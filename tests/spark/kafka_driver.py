"""The Spark side of the Kafka test (test_kafka_source.py), in a driver subprocess of its own.

Spark's Kafka source comes as users bring it, `spark.jars.packages` (with the Ivy cache set-up
filled, tests/support/kafka_setup.py): a JVM takes its packages when it starts, so the tests' shared
Spark session, started without them, cannot read Kafka; this driver's JVM can.

    python -m tests.spark.kafka_driver BOOTSTRAP TOPIC TABLE CHECKPOINT CONTROL_DIR

It writes what it found into CONTROL_DIR as JSON files, in this order:
- batch.json: `spark.read.format("kafka")` of the whole topic (partition, offset, key, value of each
  message) and of a range given by per-partition `startingOffsets` / `endingOffsets`;
- available_now.json: a streaming read with `availableNow` into a hoodie table has ended (its
  progress: input rows per micro-batch);
- running.json: the same query (same checkpoint) runs again with a 1 s processing-time trigger;
  it runs until the test writes CONTROL_DIR/stop, through a broker restart;
- stopped.json: the query has stopped (its last progress, its exception if any).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.support import kafka_setup

# the hoodie table: one row per message, keyed by its place in the topic
OPTIONS = {
    "hoodie.table.name": "events",
    "hoodie.datasource.write.recordkey.field": "msg_id",
    "hoodie.datasource.write.partitionpath.field": "kafka_partition",
    "hoodie.datasource.write.precombine.field": "kafka_offset",
}


T0 = time.monotonic()


def _write(control: Path, name: str, doc: dict) -> None:
    """`doc` and `at`, the seconds since the driver started, into CONTROL_DIR/name.json."""
    tmp = control / f"{name}.part"
    tmp.write_text(json.dumps({**doc, "at": round(time.monotonic() - T0, 1)}))
    tmp.rename(control / f"{name}.json")


def _messages(df) -> list[dict]:
    rows = df.selectExpr(
        "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
    )
    return [r.asDict() for r in rows.orderBy("partition", "offset").collect()]


def _as_rows(df):
    return df.selectExpr(
        "concat(topic, '-', partition, '-', offset) AS msg_id",
        "CAST(partition AS STRING) AS kafka_partition",
        "offset AS kafka_offset",
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "timestamp AS kafka_ts",
    )


def run(spark, bootstrap: str, topic: str, table: str, ckpt: str, control: Path) -> None:
    kafka = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    whole = _messages(spark.read.format("kafka").options(**kafka).load())
    # per partition: partition 0 from offset 2, partition 1 from the start, partition 2 up to offset 3
    starting = json.dumps({topic: {"0": 2, "1": -2, "2": -2}})  # -2: earliest, -1: latest
    ending = json.dumps({topic: {"0": -1, "1": -1, "2": 3}})
    ranged = spark.read.format("kafka").options(**kafka).option("startingOffsets", starting)
    ranged_rows = _messages(ranged.option("endingOffsets", ending).load())
    _write(control, "batch", {"whole": whole, "ranged": ranged_rows})

    def query(trigger: dict):
        df = spark.readStream.format("kafka").options(**kafka).option("startingOffsets", "earliest").load()
        return (_as_rows(df).writeStream.format("hoodie").options(**OPTIONS)
                .option("checkpointLocation", ckpt).trigger(**trigger).start(table))  # fmt: skip

    q = query({"availableNow": True})
    q.awaitTermination()
    _write(control, "available_now", {"batches": [p["numInputRows"] for p in q.recentProgress]})

    q = query({"processingTime": "1 second"})
    _write(control, "running", {"id": str(q.id)})
    while not (control / "stop").exists() and q.isActive:
        time.sleep(0.2)
    error = q.exception()
    q.stop()
    _write(control, "stopped", {"batches": [p["numInputRows"] for p in q.recentProgress],
                                "error": None if error is None else str(error)})  # fmt: skip


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    bootstrap, topic, table, ckpt, control = argv
    b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.showConsoleProgress", "false"))  # fmt: skip
    for k, v in kafka_setup.spark_kafka_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    run(spark, bootstrap, topic, table, ckpt, Path(control))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
