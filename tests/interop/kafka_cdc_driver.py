"""The Spark side of the Debezium end-to-end test (test_kafka_debezium.py), in a driver subprocess
that the test kills with SIGKILL and starts again:

    python -m tests.interop.kafka_cdc_driver BOOTSTRAP TOPIC TABLE CHECKPOINT CONTROL_DIR

It runs the README's Kafka-to-lake job (hoodie_sink/kafka_job.py) until CONTROL_DIR/stop exists,
writing CONTROL_DIR/started-<pid>.json once the query runs and stopped-<pid>.json at the end.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from hoodie_sink.kafka_job import start_job
from tests.support import kafka_setup

HEARTBEAT_MS = 1000  # a killed write is rolled back by the restart once 2 beats are missed
MAX_OFFSETS = 150  # messages per micro-batch (over all partitions)


def _write(control: Path, name: str, doc: dict) -> None:
    tmp = control / f"{name}.part"
    tmp.write_text(json.dumps(doc))
    tmp.rename(control / f"{name}.json")


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    bootstrap, topic, table, ckpt, control_dir = argv
    control = Path(control_dir)
    b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.showConsoleProgress", "false"))  # fmt: skip
    for k, v in kafka_setup.spark_kafka_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    extra = {"hoodie.client.heartbeat.interval_in_ms": str(HEARTBEAT_MS)}
    q = start_job(
        spark, bootstrap, topic, table, ckpt, MAX_OFFSETS, extra, {"processingTime": "500 milliseconds"}
    )
    pid = os.getpid()
    _write(control, f"started-{pid}", {"id": str(q.id)})
    while not (control / "stop").exists() and q.isActive:
        time.sleep(0.2)
    error = q.exception()
    q.stop()
    batches = [p["numInputRows"] for p in q.recentProgress]
    _write(control, f"stopped-{pid}", {"batches": batches, "error": None if error is None else str(error)})
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
