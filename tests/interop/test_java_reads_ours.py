"""Apache Hudi (Java) reads every table the sink writes, and agrees with hudi-rs, our reader and
the data written: each operation, index, key generator, both partition styles, after clustering,
after a rolled-back write, after a streaming query; snapshot, time travel and the timeline as
hudi-cli lists it (commits show, latest file slices).  Where Java then writes into the table with
the same settings, its keys land on ours (an upsert updates, never duplicates)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table import client
from hoodie_sink.table.format.heartbeat import release_heartbeat
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.context import TaskIdentity
from tests.interop.compare import assert_readers_agree, assert_time_travel_agrees, assert_timeline_agrees
from tests.support import faulty_source
from tests.support.streams import stream_files

pytestmark = [pytest.mark.compat, pytest.mark.interop]

SCHEMA = "id LONG, city STRING, ts LONG, fare DOUBLE"
ARROW = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
CITIES = ("sf", "nyc", "chennai")


def rows(ids, ts: int, city_shift: int = 0) -> list[dict]:
    return [
        {"id": i, "city": CITIES[(i + city_shift) % 3], "ts": ts, "fare": round(i * 1.5 + ts, 2)} for i in ids
    ]


class Model:
    """What the table must hold: the latest row per key (event-time order by ts)."""

    def __init__(self) -> None:
        self.by_key: dict[int, dict] = {}

    def upsert(self, batch: list[dict]) -> None:
        for r in batch:
            old = self.by_key.get(r["id"])
            if old is None or r["ts"] >= old["ts"]:
                self.by_key[r["id"]] = r

    def delete(self, ids) -> None:
        for i in ids:
            self.by_key.pop(i, None)

    def rows(self) -> list[dict]:
        return list(self.by_key.values())


def ours(spark, path, batch: list[dict], options: dict, mode: str = "append") -> None:
    df = spark.createDataFrame(batch, SCHEMA) if batch else spark.createDataFrame([], SCHEMA)
    df.repartition(2).write.format("hoodie").options(**options).mode(mode).save(str(path))


def java_agrees(java_hudi, path, model: Model | list[dict], path_valued: tuple[str, ...] = ()) -> None:
    expected = model.rows() if isinstance(model, Model) else model
    assert_readers_agree(java_hudi.read(path), path, expected, path_valued)


def java_options(options: dict, **extra: str) -> dict:
    """Java writes with its defaults but the table's settings (Java checks them against
    hoodie.properties); the metadata table stays off on our tables."""
    return {**options, "hoodie.metadata.enable": "false", **extra}


# -- each operation in turn, then time travel and the timeline ----------------------------------
def test_java_reads_each_operation_in_turn(spark, any_java_hudi, tmp_path):
    java_hudi = any_java_hudi
    path, model = tmp_path / "t", Model()
    steps: list[str] = []

    def step(batch, operation, mode="append"):
        ours(spark, path, batch, {**BASE, "hoodie.datasource.write.operation": operation}, mode)
        steps.append(operation)

    first = rows(range(200), ts=1)
    step(first, "bulk_insert")
    model.upsert(first)
    java_agrees(java_hudi, path, model)

    more = rows(range(200, 260), ts=1)
    step(more, "insert")
    model.upsert(more)
    java_agrees(java_hudi, path, model)

    changed = rows(range(0, 80, 2), ts=2) + rows(range(260, 280), ts=2)
    step(changed, "upsert")
    model.upsert(changed)
    java_agrees(java_hudi, path, model)
    after_upsert = model.rows()

    step(rows(range(1, 61, 2), ts=3), "delete")
    model.delete(range(1, 61, 2))
    java_agrees(java_hudi, path, model)

    logs = rows(range(600, 640), ts=3)  # append: no index, no merge, new file groups
    step(logs, "append")
    model.upsert(logs)
    java_agrees(java_hudi, path, model)

    sf_only = [r for r in rows(range(1000, 1030), ts=4) if r["city"] == "sf"]
    step(sf_only, "insert_overwrite")
    model.by_key = {k: r for k, r in model.by_key.items() if r["city"] != "sf"}
    model.upsert(sf_only)
    java_agrees(java_hudi, path, model)

    instants = assert_timeline_agrees(java_hudi, path)
    assert len(instants) == len(steps)
    assert_time_travel_agrees(java_hudi, path, instants[2], after_upsert)

    last = rows(range(5000, 5040), ts=5)
    step(last, "insert_overwrite_table", mode="overwrite")
    java_agrees(java_hudi, path, last)
    assert_timeline_agrees(java_hudi, path)


# -- each index: Java reads, then upserts with the same index, and the keys still land once ------
INDEXES = [
    {"hoodie.index.type": "BLOOM"},
    {"hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true"},
    {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"},
]
INDEX_IDS = ["bloom", "global_bloom", "bucket"]


@pytest.mark.parametrize("index", INDEXES, ids=INDEX_IDS)
def test_java_reads_and_upserts_each_index(spark, java_hudi, tmp_path, index):
    path, model, opts = tmp_path / "t", Model(), {**BASE, **index}
    for batch in (rows(range(100), 1), rows(range(50, 150), 2)):
        ours(spark, path, batch, opts)
        model.upsert(batch)
    if index["hoodie.index.type"] == "GLOBAL_BLOOM":  # keys move partition
        moved = rows(range(0, 30), ts=3, city_shift=1)
        ours(spark, path, moved, opts)
        model.upsert(moved)
    java_agrees(java_hudi, path, model)

    theirs = rows(range(140, 170), ts=9, city_shift=0)
    java_hudi.write(path, pa.Table.from_pylist(theirs, schema=ARROW), java_options(opts))
    model.upsert(theirs)
    java_agrees(java_hudi, path, model)
    assert_timeline_agrees(java_hudi, path)


# -- each key generator and partition style ------------------------------------------------------
KEYGENS = {
    "simple_hive": {"hoodie.datasource.write.hive_style_partitioning": "true"},
    "complex_plain": {
        "hoodie.datasource.write.recordkey.field": "id,city",
        "hoodie.datasource.write.partitionpath.field": "city,ts",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
    },
    "nonpartitioned": {
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    },
    "timestamp": {
        "hoodie.datasource.write.partitionpath.field": "ts",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.timezone": "UTC",
    },
}


@pytest.mark.parametrize("keygen", list(KEYGENS))
def test_java_reads_and_upserts_each_key_generator(spark, java_hudi, tmp_path, keygen):
    path, model = tmp_path / "t", Model()
    opts = {**BASE, **KEYGENS[keygen]}
    day = 86_400_000
    # the ordering field doubles as a partition field in two key generators: an update keeps it
    first = [{**r, "ts": (r["id"] % 3) * day} for r in rows(range(60), 0)]
    ours(spark, path, first, opts)
    model.upsert(first)
    update = [{**r, "fare": -r["fare"]} for r in first[::3]]
    ours(spark, path, update, opts)
    model.upsert(update)
    path_valued = ("ts",) if keygen == "timestamp" else ()
    java_agrees(java_hudi, path, model, path_valued)

    theirs = [{**r, "fare": r["fare"] + 1000} for r in first[1::4]]
    java_hudi.write(path, pa.Table.from_pylist(theirs, schema=ARROW), java_options(opts))
    model.upsert(theirs)
    java_agrees(java_hudi, path, model, path_valued)


# -- after clustering, a failed write, a crashed write rolled back, and a streaming query -------
def stream_upserts(spark, src, path, ckpt, options: dict) -> None:
    stream_files(spark, SCHEMA, src, path, ckpt, options)


def test_java_reads_after_stream_clustering_failed_and_crashed_writes(spark, java_hudi, tmp_path):
    path, src, model = tmp_path / "t", tmp_path / "src", Model()
    src.mkdir()
    for b in range(4):
        batch = rows(range(b * 30, b * 30 + 50), ts=b)  # overlapping keys: updates across batches
        f = src / f"part-{b:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(batch, schema=ARROW), f)
        os.utime(f, (1_700_000_000 + b, 1_700_000_000 + b))
        model.upsert(batch)
    stream_upserts(spark, src, path, tmp_path / "ckpt", BASE)
    java_agrees(java_hudi, path, model)
    assert len(assert_timeline_agrees(java_hudi, path)) == 4

    hoodie_sink.cluster(
        str(path),
        {**BASE, "hoodie.clustering.plan.strategy.small.file.limit": str(64 << 20),
         "hoodie.clustering.plan.strategy.sort.columns": "fare"},
        spark=spark,
    )  # fmt: skip
    java_agrees(java_hudi, path, model)
    assert_timeline_agrees(java_hudi, path)

    faulty = faulty_source.register(spark)
    with pytest.raises(Exception, match="test failure injected"):
        spark.createDataFrame(rows(range(300, 340), ts=9), SCHEMA).repartition(2).write.format(
            faulty
        ).options(**BASE).option("fault.task", "always:1").mode("append").save(str(path))
    java_agrees(java_hudi, path, model)

    # a crash: the instant begun and its files written, the process gone before the commit
    crash = {**BASE, "hoodie.client.heartbeat.interval_in_ms": "1000"}
    cfg = WriteConfig.from_options(crash, path=str(path))
    data = pa.Table.from_pylist(rows(range(0, 120, 5), ts=10), schema=ARROW)
    ctx = client.begin(cfg, data.schema)
    client.write_task(ctx, TaskIdentity(only_task=True), data.to_batches())
    release_heartbeat(ctx.storage, ctx.instant)  # the process is gone: its heartbeat keeper too
    java_agrees(java_hudi, path, model)  # Java never shows an inflight write's files
    time.sleep(3.5)  # its heartbeat (if any) expires: interval x tolerable misses

    after = rows(range(400, 420), ts=11)
    ours(spark, path, after, crash)  # rolls the crashed write back first
    model.upsert(after)
    java_agrees(java_hudi, path, model)
    assert_timeline_agrees(java_hudi, path)


# -- virtual keys (hoodie.populate.meta.fields=false), both ways -----------------------------------
VIRTUAL = {**BASE, "hoodie.populate.meta.fields": "false"}
JAVA_VIRTUAL = java_options(VIRTUAL, **{"hoodie.index.type": "SIMPLE"})  # Java's bloom index needs footers


def test_virtual_key_tables_both_ways(spark, java_hudi, java_local, tmp_path):
    ours_first, model = tmp_path / "ours", Model()
    for batch in (rows(range(120), 1), rows(range(60, 150), 2)):
        ours(spark, ours_first, batch, VIRTUAL)
        model.upsert(batch)
    java_agrees(java_hudi, ours_first, model)
    theirs = rows(range(140, 170), ts=3)
    java_hudi.write(ours_first, pa.Table.from_pylist(theirs, schema=ARROW), JAVA_VIRTUAL)
    model.upsert(theirs)
    java_agrees(java_hudi, ours_first, model)

    java_first, model = tmp_path / "java", Model()
    first = rows(range(100), 1)
    java_local.write(java_first, pa.Table.from_pylist(first, schema=ARROW), JAVA_VIRTUAL)
    model.upsert(first)
    update = rows(range(50, 130), 2)
    ours(spark, java_first, update, VIRTUAL)
    model.upsert(update)
    ours(
        spark,
        java_first,
        rows(range(0, 40, 4), 3),
        {**VIRTUAL, "hoodie.datasource.write.operation": "delete"},
    )
    model.delete(range(0, 40, 4))
    java_agrees(java_local, java_first, model)
    assert_timeline_agrees(java_local, java_first)


def test_java_opens_and_upserts_a_table_whose_properties_hold_non_ascii(spark, java_hudi, tmp_path):
    """hoodie.properties is ISO-8859-1 for Java: a non-ASCII database name written as raw UTF-8
    changed the checksum Java computes, and the table did not open."""
    path, model = tmp_path / "t", Model()
    named = {**BASE, "hoodie.database.name": "läke_中"}
    first = rows(range(50), 1)
    ours(spark, path, first, named)
    model.upsert(first)
    java_agrees(java_hudi, path, model)
    assert java_hudi.call("properties", path=str(path))["hoodie.database.name"] == "läke_中"
    theirs = rows(range(40, 60), ts=2)
    java_hudi.write(path, pa.Table.from_pylist(theirs, schema=ARROW), java_options(named))
    model.upsert(theirs)
    java_agrees(java_hudi, path, model)


def test_java_merges_our_list_and_map_columns(spark, java_hudi, tmp_path):
    """Our three-level lists and maps, nested in structs, are what Java's merge (parquet-avro)
    rewrites: a Java upsert into our file groups keeps every row (null lists, empty lists, null
    map values; null list elements are refused on our side, see test_list_elements)."""
    path = tmp_path / "t"
    schema = "id LONG, city STRING, ts LONG, fare DOUBLE, tags ARRAY<STRING>, m MAP<STRING, ARRAY<INT>>"
    first = [
        {"id": i, "city": "sf", "ts": 1, "fare": 1.0, "tags": [f"t{i}", "x"] if i % 3 else ([] if i % 2 else None),
         "m": {"k": [i, i + 1]} if i % 2 else {"n": None}}
        for i in range(30)
    ]  # fmt: skip
    spark.createDataFrame(first, schema).write.format("hoodie").options(**BASE).mode("append").save(str(path))
    update = [{**r, "ts": 2, "tags": ["u"], "fare": 2.0} for r in first[:10]]
    java_hudi.write(path, spark.createDataFrame(update, schema).toArrow(), java_options(BASE))
    expected = {r["id"]: r for r in first} | {r["id"]: r for r in update}
    got = assert_readers_agree(java_hudi.read(path), path)
    assert got.num_rows == 30
    for row in got.select(["id", "ts", "tags"]).to_pylist():
        assert (row["ts"], row["tags"]) == (expected[row["id"]]["ts"], expected[row["id"]]["tags"])
