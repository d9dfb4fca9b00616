"""Catalog sync through Spark (docs/hudi/hive-sync.md#what-our-sync-does): a batch write, a routed
merge-on-read upsert and a streaming query register their tables in a real Hive metastore after
each commit, with Hudi's options; the partitions registered are those of a model of the writes.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark

import hoodie_sink.spark
from tests.support.hive_metastore import hive_metastore  # noqa: F401 - the session fixture
from tests.support.tables import hudi_rs_read

SCHEMA = "id BIGINT, city STRING, ts BIGINT, fare DOUBLE"


def _options(uri: str, database: str, name: str, table_type: str = "COPY_ON_WRITE") -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.meta.sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.metastore.uris": uri,
        "hoodie.datasource.hive_sync.database": database,
    }


def _cities(client, database: str, table: str) -> list[str]:
    return [p.values[0] for p in client.list_partitions(database, table)]


def _marker(client, database: str, table: str) -> str:
    return client.get_table(database, table).parameters["last_commit_time_sync"]


def _latest(path: Path) -> str:
    """The last commit, as hudi-rs reads it off the rows (every commit here writes rows)."""
    return max(hudi_rs_read(path).column("_hoodie_commit_time").to_pylist())


def test_batch_and_routed_writes_sync_after_each_commit(spark, hive_metastore, tmp_path):  # noqa: F811
    cow = tmp_path / "trips"
    opts = _options(hive_metastore.uri, "spark_db", "trips")
    spark.createDataFrame([(1, "sf", 1, 1.0), (2, "nyc", 1, 2.0)], SCHEMA).write.format("hoodie").options(
        **opts
    ).mode("append").save(str(cow))
    with hive_metastore.client() as client:
        assert _cities(client, "spark_db", "trips") == ["nyc", "sf"]
        # the running Spark's version, as Hudi's Spark writer registers it
        assert (
            client.get_table("spark_db", "trips").parameters["spark.sql.create.version"]
            == pyspark.__version__
        )

    mor = tmp_path / "rides"
    mopts = _options(hive_metastore.uri, "spark_db", "rides", "MERGE_ON_READ")
    for rows in ([(1, "sf", 1, 1.0)], [(1, "sf", 2, 5.0), (3, "la", 2, 3.0)]):
        df = spark.createDataFrame(rows, SCHEMA)
        df.transform(hoodie_sink.spark.route(str(mor), mopts)).write.format("hoodie").options(**mopts).mode(
            "append"
        ).save(str(mor))
    with hive_metastore.client() as client:
        assert sorted(client.list_tables("spark_db")) == ["rides", "rides_ro", "rides_rt", "trips"]
        for name in ("rides", "rides_ro", "rides_rt"):
            assert _cities(client, "spark_db", name) == ["la", "sf"]
            assert _marker(client, "spark_db", name) == _latest(mor)


def test_a_streaming_query_syncs_each_micro_batch(spark, hive_metastore, tmp_path):  # noqa: F811
    src, path = tmp_path / "src", tmp_path / "events"
    src.mkdir()
    opts = _options(hive_metastore.uri, "spark_stream", "events")
    model: set[str] = set()
    for run, cities in enumerate((["a", "b"], ["c"])):
        for i, city in enumerate(cities):
            table = pa.table({"id": [run * 10 + i], "city": [city], "ts": [run], "fare": [1.0]})
            pq.write_table(table, src / f"part-{run}-{i}.parquet")
        model |= set(cities)
        df = spark.readStream.schema(SCHEMA).parquet(str(src))
        q = (
            df.writeStream.format("hoodie").options(**opts).option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True).start(str(path))
        )  # fmt: skip
        q.awaitTermination(300)
        q.stop()
        assert q.exception() is None
        with hive_metastore.client() as client:
            assert _cities(client, "spark_stream", "events") == sorted(model)
            assert _marker(client, "spark_stream", "events") == _latest(path)
