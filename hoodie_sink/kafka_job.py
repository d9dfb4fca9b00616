"""The Kafka-to-lake job of the README ("Kafka to the lake") and of `./run.sh demo --kafka`: a
Debezium topic read with Spark's Kafka source, flattened with `hoodie_sink.spark.debezium_changes`,
routed and written per micro-batch into a merge-on-read table with PostgresDebeziumAvroPayload
(docs/hudi/debezium.md), exactly once (`hoodie_sink.spark.micro_batches`).

Also what the demo and the end-to-end test (tests/interop/test_kafka_debezium.py) need around it: a
synthetic Debezium change stream of an `accounts` table (Kafka messages keyed by the primary key,
so each key's events are in one partition in LSN order, as Debezium's are) and the table it implies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping

# Spark's Kafka source, as users bring it (docs/spark/kafka.md#versions-tried)
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
ROW_DDL = "id BIGINT, region STRING, owner STRING, balance BIGINT"
REGIONS = ("emea", "amer", "apac")
TABLE_OPTIONS = {
    "hoodie.table.name": "accounts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload",
    "hoodie.datasource.write.precombine.field": "_event_lsn",
}


def start_job(spark, bootstrap: str, topic: str, table: str, checkpoint: str, max_offsets: int,
              extra: Mapping[str, str] | None = None, trigger: Mapping | None = None):  # fmt: skip
    """Start the streaming query (returns it): Kafka -> Debezium flattening -> routed MOR upserts."""
    import hoodie_sink.spark

    options = {**TABLE_OPTIONS, **(extra or {})}
    changes = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .transform(hoodie_sink.spark.debezium_changes(ROW_DDL))
    )
    writer = changes.writeStream.foreachBatch(
        hoodie_sink.spark.micro_batches(table, {**options, "checkpointLocation": checkpoint})
    ).option("checkpointLocation", checkpoint)
    return writer.trigger(**(trigger or {"processingTime": "1 second"})).start()


# -- a synthetic Debezium stream and the table it implies -------------------------------------


class ChangeStream:
    """Debezium change events (JSON, schemas.enable=false) of an accounts table: creates, updates
    and deletes of `keys` keys, re-creates after deletes, LSNs increasing."""

    def __init__(self, keys: int, seed: int = 7):
        self.rng = random.Random(seed)
        self.keys = keys
        self.live: dict[int, dict] = {}
        self.lsn = 1000

    def events(self, n: int) -> list[tuple[str, str]]:
        """n (Kafka key, value) messages."""
        out = []
        for _ in range(n):
            self.lsn += self.rng.randrange(1, 50)
            k = self.rng.randrange(self.keys)
            before = self.live.get(k)
            if before is None:
                op, after = "c", self._row(k)
            elif self.rng.random() < 0.15:
                op, after = "d", None
            else:
                op, after = "u", {**before, "balance": self.rng.randrange(10_000), "owner": self._owner()}
            if after is None:
                self.live.pop(k)
            else:
                self.live[k] = after
            value = {"op": op, "before": before, "after": after, "ts_ms": 1_700_000_000_000 + self.lsn,
                     "source": {"name": "pg", "schema": "public", "ts_ms": 1_700_000_000_000 + self.lsn,
                                "txId": self.lsn // 7, "lsn": self.lsn, "xmin": None}}  # fmt: skip
            out.append((json.dumps({"id": k}), json.dumps(value)))
        return out

    def _owner(self) -> str:
        return self.rng.choice(("ana", "bo", "chen", "dara", "eli", "femi"))

    def _row(self, k: int) -> dict:
        return {"id": k, "region": REGIONS[k % len(REGIONS)], "owner": self._owner(),
                "balance": self.rng.randrange(10_000)}  # fmt: skip


def table_of(values: Iterable[str | bytes | None]) -> dict[int, dict]:
    """The table a topic's messages imply (the model), computed from the values alone: per key,
    the event with the highest LSN; gone if it is a delete.  Each row with the LSN and op."""
    last: dict[int, dict] = {}
    for v in values:
        if v is None:
            continue  # a tombstone
        e = json.loads(v)
        row = e["before"] if e["op"] == "d" else e["after"]
        lsn = e["source"]["lsn"]
        if row["id"] not in last or lsn >= last[row["id"]]["_event_lsn"]:
            last[row["id"]] = {**row, "_event_lsn": lsn, "_change_operation_type": e["op"]}
    return {k: r for k, r in last.items() if r["_change_operation_type"] != "d"}
