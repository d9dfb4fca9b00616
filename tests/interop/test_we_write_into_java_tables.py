"""We upsert, delete and cluster tables that Apache Hudi (Java) created with ITS defaults (metadata
table on, timeline-server markers, its heartbeats, a JVM zone west of UTC and so instants in local
time), Java reads and writes again, for several alternating rounds; every reader agrees with a
model after each step."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.properties import parse_properties
from tests.interop.compare import assert_readers_agree, assert_timeline_agrees
from tests.interop.conftest import ZONES

pytestmark = [pytest.mark.compat, pytest.mark.interop]

ARROW = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
SCHEMA = "id LONG, city STRING, ts LONG, fare DOUBLE"
BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
# Hudi 1.x upgrades a v6 table to v8 on its first write unless told not to, and creates v8 tables
JAVA_KEEP_V6 = {"1.1.1": {"hoodie.write.auto.upgrade": "false", "hoodie.write.table.version": "6"}}
CITIES = ("sf", "nyc", "chennai", "austin")


def city(i: int) -> str:
    return CITIES[i % len(CITIES)]


class Rounds:
    """Random keyed batches (updates of stored keys, new keys, deletes, late records) and the
    model of what the table holds: per key, the row of the latest event time (ts) when the table's
    payload class is DefaultHoodieRecordPayload, else (Java 0.15's default,
    OverwriteWithLatestAvroPayload, also when hoodie.properties names none) the last written row
    (ts only picks among a batch's duplicates)."""

    def __init__(self, seed: int, path: Path):
        self.path = path
        self.rng = random.Random(seed)
        self.by_key: dict[int, dict] = {}
        self.next_id = 0
        self.clock = 10

    def upserts(self, n_new: int, n_updates: int, duplicates: int = 5) -> list[dict]:
        self.clock += 1
        stored = sorted(self.by_key)
        ids = self.rng.sample(stored, min(n_updates, len(stored))) + list(
            range(self.next_id, self.next_id + n_new)
        )
        self.next_id += n_new
        batch = []
        for i in ids:
            late = self.rng.random() < 0.15  # an older event: loses against the stored row
            ts = self.clock - 5 if late else self.clock
            batch.append({"id": i, "city": city(i), "ts": ts, "fare": round(self.rng.uniform(1, 100), 2)})
        batch += [dict(r) for r in self.rng.sample(batch, min(duplicates, len(batch)))]  # in-batch duplicates
        event_time = self._event_time()
        for r in batch:
            old = self.by_key.get(r["id"])
            if old is None or not event_time or r["ts"] >= old["ts"]:
                self.by_key[r["id"]] = r
        return batch

    def _event_time(self) -> bool:
        props = self.path / ".hoodie" / "hoodie.properties"
        if not props.exists():  # the first batch: new keys only, either way
            return True
        payload = parse_properties(props.read_text(encoding="latin-1")).get(
            "hoodie.compaction.payload.class", ""
        )
        return payload.endswith("DefaultHoodieRecordPayload")

    def deletes(self, n: int) -> list[dict]:
        ids = self.rng.sample(sorted(self.by_key), min(n, len(self.by_key)))
        gone = [self.by_key.pop(i) for i in ids]
        return gone + [{"id": 10**9 + k, "city": "sf", "ts": 0, "fare": 0.0} for k in range(2)]  # absent keys

    def rows(self) -> list[dict]:
        return list(self.by_key.values())


def ours(spark, path, batch: list[dict], operation: str = "upsert", **extra: str) -> None:
    spark.createDataFrame(batch, SCHEMA).repartition(3).write.format("hoodie").options(
        **BASE, **extra
    ).option("hoodie.datasource.write.operation", operation).mode("append").save(str(path))


def theirs(java, path, batch: list[dict], operation: str = "upsert") -> None:
    opts = {**BASE, **JAVA_KEEP_V6.get(java.version, {}), "hoodie.datasource.write.operation": operation}
    java.write(path, pa.Table.from_pylist(batch, schema=ARROW), opts)


def all_agree(java, path, model: Rounds) -> None:
    assert_readers_agree(java.read(path), path, model.rows())


@pytest.mark.parametrize("version,seed", [("0.15.0", 1), ("1.1.1", 2)])
def test_alternating_rounds_on_a_table_java_created_with_its_defaults(
    spark, request, tmp_path, writers_zone, version, seed
):
    java = request.getfixturevalue("java_local" if version == "0.15.0" else "java_local_1x")
    writers_zone(ZONES[version])
    path = tmp_path / "t"
    model = Rounds(seed, path)
    theirs(
        java, path, model.upserts(n_new=300, n_updates=0, duplicates=0), "insert"
    )  # insert keeps duplicates
    assert (path / ".hoodie" / "metadata").is_dir(), "Java's defaults build the metadata table"
    props = java.call("properties", path=str(path))
    assert "hoodie.table.timeline.timezone" not in props or props["hoodie.table.timeline.timezone"] == "LOCAL"

    for round_no in range(3):
        ours(spark, path, model.upserts(n_new=40, n_updates=60))
        ours(spark, path, model.deletes(15), "delete")
        if round_no == 1:
            hoodie_sink.cluster(
                str(path),
                {**BASE, "hoodie.clustering.plan.strategy.small.file.limit": str(64 << 20)},
                spark=spark,
            )
        all_agree(java, path, model)
        theirs(java, path, model.upserts(n_new=30, n_updates=50))
        theirs(java, path, model.deletes(10), "delete")
        all_agree(java, path, model)
    ours(spark, path, model.upserts(n_new=10, n_updates=10))
    all_agree(java, path, model)
    instants = assert_timeline_agrees(java, path)
    assert instants == sorted(instants) and len(instants) >= 14
