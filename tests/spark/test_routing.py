"""hoodie_sink.spark.route through Spark (issue 27): what the model tests (test_keyed_model.py,
tests/unit/write/test_routed_model.py) do not show: the refusals seen from Spark, and inserts packed
into sized file groups whatever the input's partitioning."""

from __future__ import annotations

import pytest

import hoodie_sink.spark
from hoodie_sink.errors import HoodieConfigError
from tests.support.tables import all_write_stats, assert_table_matches

DDL = "id STRING, p STRING, ts LONG"
OPTIONS = {
    "hoodie.table.name": "routed",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def _df(spark, keys, ts=1, parts=1):
    return spark.createDataFrame([(k, "ab"[i % 2], ts) for i, k in enumerate(keys)], DDL).repartition(parts)


def _write(df, path, options=OPTIONS):
    df.write.format("hoodie").options(**options).mode("append").save(path)


def test_inserts_fill_sized_file_groups_whatever_the_input_partitioning(spark, tmp_path):
    """6,000 inserts in 1 or 16 input partitions: the same 3 file groups of about 1,000 records in
    each of the 2 partitions (the plan: max file size / record size estimate)."""
    sized = {**OPTIONS, "hoodie.datasource.write.operation": "insert", "hoodie.parquet.max.file.size": "64000",
             "hoodie.copyonwrite.record.size.estimate": "64"}  # fmt: skip
    for parts in (1, 16):
        path = str(tmp_path / f"t{parts}")
        keys = [f"k{i:05d}" for i in range(6_000)]
        _write(_df(spark, keys, parts=parts).transform(hoodie_sink.spark.route(path, sized)), path, sized)
        stats = all_write_stats(path)
        assert len(stats) == 6 and all(800 <= s["numWrites"] <= 1_200 for s in stats), stats
        assert sum(s["numWrites"] for s in stats) == 6_000


@pytest.mark.parametrize("operation", ["bulk_insert", "append"])
def test_routed_append_and_bulk_insert_fill_sized_new_file_groups(spark, tmp_path, operation):
    """The same through Spark for the operations that only add file groups: 6,000 records in 16
    input partitions land in 3 file groups per partition, not one per task and partition; every
    record is read back, and a keyless append keeps every row with a key of its own."""
    sized = {**OPTIONS, "hoodie.datasource.write.operation": operation, "hoodie.parquet.max.file.size": "64000",
             "hoodie.copyonwrite.record.size.estimate": "64"}  # fmt: skip
    if operation == "append":
        sized = {k: v for k, v in sized.items() if "recordkey" not in k and "precombine" not in k}
    path = str(tmp_path / "t")
    keys = [f"k{i:05d}" for i in range(6_000)]
    _write(_df(spark, keys, parts=16).transform(hoodie_sink.spark.route(path, sized)), path, sized)
    stats = all_write_stats(path)
    assert len(stats) == 6 and all(800 <= s["numWrites"] <= 1_200 for s in stats), stats
    got = spark.read.format("hoodie").load(path)
    assert sorted(r.id for r in got.select("id").collect()) == keys
    assert got.select("_hoodie_record_key").distinct().count() == 6_000


def test_the_tag_tasks_share_the_executors_footer_and_key_cache(spark, tmp_path):
    """Routed upserts in 8 tag tasks on local[2] (two Python workers, one executor): the footers
    and key columns they read are kept once in the executor's local directory
    (index/executor_cache.py; tests/unit/index/test_executor_cache.py shows each is read once)."""
    import os

    path = str(tmp_path / "t")
    sized = {
        **OPTIONS,
        "hoodie.parquet.max.file.size": "64000",
        "hoodie.copyonwrite.record.size.estimate": "64",
    }
    keys = [f"k{i:05d}" for i in range(6_000)]
    _write(_df(spark, keys, parts=4).transform(hoodie_sink.spark.route(path, sized)), path, sized)
    files = {s["fileId"] for s in all_write_stats(path)}
    for ts in (2, 3):  # the second upsert finds every entry in place
        upsert = _df(spark, keys[::7], ts=ts, parts=8).transform(
            hoodie_sink.spark.route(path, sized, parallelism=8)
        )
        _write(upsert, path, sized)
    local_dir = spark.sparkContext.parallelize([0], 1).map(lambda _: os.environ["SPARK_LOCAL_DIRS"]).first()
    cache = os.path.join(local_dir.split(",")[0], "hoodie-sink-key-cache")
    names = os.listdir(cache)
    assert not [n for n in names if n.endswith(".tmp")]
    assert len([n for n in names if n.endswith(".footer.json")]) >= len(files)
    assert [n for n in names if n.endswith(".keys.arrow")]
    assert_table_matches(path, [{"id": k, "p": "ab"[i % 2], "ts": 3 if i % 7 == 0 else 1}
                                for i, k in enumerate(keys)])  # fmt: skip


def test_the_route_fills_insert_file_ids_in_spark_as_the_engine_rule_does(spark):
    """FILE_ID_SQL (the route's fill, in the JVM) against InsertBuckets.file_ids_of over Spark's
    xxhash64 (tests/support/routing.py): the same file group for every insert, keyed or keyless."""
    import random

    import pyarrow as pa
    from pyspark.sql import functions as F

    from hoodie_sink.table.client import routing
    from hoodie_sink.table.write.insert_buckets import SmallFile, plan_insert_buckets
    from hoodie_sink.table.write.plan import FileSizing
    from tests.support.routing import insert_spreads

    rng = random.Random(9)
    n = 5_000
    parts = [rng.choice(["a", "b=1", "c/d"]) for _ in range(n)]
    keys = [f"k{rng.getrandbits(40)}" if i % 3 else None for i in range(n)]
    orders = [rng.getrandbits(62) - (1 << 61) for _ in range(n)]
    counts = {p: parts.count(p) for p in set(parts)}
    buckets = plan_insert_buckets(
        counts, {"a": [SmallFile("small-a", 10)]}, FileSizing(64_000, 32_000, 1, 64), "n"
    )
    rows = pa.table({routing.FILE_ID: pa.nulls(n, pa.string()), routing.PARTITION: parts, routing.KEY: keys,
                     routing.ORDER: pa.array(orders, pa.int64()), routing.INSERT: [True] * n,
                     "i": range(n)})  # fmt: skip
    plan = spark.createDataFrame(routing.plan_table(buckets))
    got = (spark.createDataFrame(rows).join(F.broadcast(plan), routing.PARTITION, "left")
           .select("i", F.expr(routing.FILE_ID_SQL).alias("fid")).orderBy("i").collect())  # fmt: skip
    want = buckets.file_ids_of(pa.array(parts), insert_spreads(pa.array(keys, pa.string()), pa.array(orders)))
    assert [r.fid for r in got] == want.to_pylist()
    assert len(set(want.to_pylist())) > 3


def test_a_streaming_dataframe_is_refused(spark, tmp_path):
    stream = spark.readStream.format("rate").load()
    with pytest.raises(HoodieConfigError, match="micro_batches"):
        stream.transform(hoodie_sink.spark.route(str(tmp_path / "t"), OPTIONS))


def test_a_route_made_stale_by_another_write_is_refused(spark, tmp_path):
    path = str(tmp_path / "t")
    _write(_df(spark, ["a", "b"]), path)
    routed = _df(spark, ["a", "c"], ts=2).transform(hoodie_sink.spark.route(path, OPTIONS))
    _write(_df(spark, ["d"], ts=3), path)  # lands between the route and its write
    with pytest.raises(Exception, match="HoodieWriteConflictError"):
        _write(routed, path)
    assert_table_matches(path, [{"id": "a", "p": "a", "ts": 1}, {"id": "b", "p": "b", "ts": 1},
                                {"id": "d", "p": "a", "ts": 3}])  # fmt: skip
