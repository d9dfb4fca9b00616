"""The metadata table through Spark: a CDC stream and batch writes with hoodie.metadata.enable=true
keep Hudi's metadata table; after every write its listing equals storage's, and the table equals
the model through our reader and hudi-rs."""

from __future__ import annotations

from pathlib import Path

from hoodie_sink.table.format.fs_view import list_storage_files
from hoodie_sink.table.format.metadata_listing import metadata_listing
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.services.validation import validate_table
from hoodie_sink.table.storage import Storage
from tests.spark.test_streaming import OPTS, cdc_files, model_of, run_stream
from tests.support.tables import assert_table_matches

META = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "4"}


def assert_metadata_lists_storage(path: Path) -> None:
    storage = Storage(str(path))
    timeline = Timeline.load(storage)
    listed = metadata_listing(storage, timeline)
    stored = list_storage_files(storage)
    committed = {f.path for f in stored.base_files if timeline.is_committed(f.instant)}
    committed |= {f.path for f in stored.log_files}
    assert {f.path for f in [*listed.base_files, *listed.log_files]} == committed
    assert [v for v in validate_table(storage) if v.check == "metadata-table"] == []


def test_cdc_stream_keeps_the_metadata_table(spark, tmp_path):
    batches = cdc_files(tmp_path / "src", 12)
    run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt",
               {**META, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})  # fmt: skip
    assert_table_matches(tmp_path / "t", model_of(batches))
    assert_metadata_lists_storage(tmp_path / "t")
    mdt = Timeline.load(metadata_storage(Storage(str(tmp_path / "t"))))
    data = Timeline.load(Storage(str(tmp_path / "t")))
    assert {i.timestamp for i in data.completed()} <= {i.timestamp for i in mdt.completed((DELTA_COMMIT,))}
    assert mdt.completed((COMMIT,)), "compacted every 4 deltacommits"


def test_batch_writes_and_sql_insert_keep_the_metadata_table(spark, tmp_path):
    path = tmp_path / "t"
    opts = {**OPTS, **META}
    df = spark.createDataFrame(
        [(i, "abc"[i % 3], 1, float(i), False) for i in range(100)],
        "id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN",
    )
    df.write.format("hoodie").options(**opts).mode("append").save(str(path))
    assert_metadata_lists_storage(path)
    df.filter("id < 30").selectExpr(
        "id", "city", "CAST(2 AS BIGINT) AS ts", "fare + 1 AS fare", "_hoodie_is_deleted"
    ).write.format("hoodie").options(**opts).mode("append").save(str(path))
    assert_metadata_lists_storage(path)
    view = "metadata_sink_view"
    options = ", ".join(f"'{k}' '{v}'" for k, v in {**opts, "path": str(path)}.items())
    columns = "id BIGINT, city STRING, ts BIGINT, fare DOUBLE, _hoodie_is_deleted BOOLEAN"
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view} ({columns}) USING hoodie OPTIONS ({options})")
    spark.sql(f"INSERT INTO {view} SELECT 500, 'a', 3, 5.0, false")
    assert_metadata_lists_storage(path)
    expected = {i: {"id": i, "city": "abc"[i % 3], "ts": 1, "fare": float(i), "_hoodie_is_deleted": False}
                for i in range(100)}  # fmt: skip
    for i in range(30):
        expected[i] = {**expected[i], "ts": 2, "fare": float(i) + 1}
    expected[500] = {"id": 500, "city": "a", "ts": 3, "fare": 5.0, "_hoodie_is_deleted": False}
    assert_table_matches(path, list(expected.values()))


RECORD_INDEX = {
    **META,
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.index.type": "GLOBAL_BLOOM",
    "hoodie.bloom.index.update.partition.path": "true",
}


def test_spark_writes_keep_the_record_index(spark, tmp_path):
    """Batch writes and a CDC stream through Spark with the record index kept (issue 29): the tasks
    on Spark's Python workers gather its change (their results carry it to the commit), and after
    every write it equals the live keys (assert_table_matches checks it)."""
    from hoodie_sink.table.format.metadata_record_index import read_record_index
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline

    path = tmp_path / "t"
    opts = {**OPTS, **RECORD_INDEX}
    df = spark.createDataFrame(
        [(i, "abc"[i % 3], 1, float(i), False) for i in range(100)],
        "id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN",
    )
    df.write.format("hoodie").options(**opts).mode("append").save(str(path))
    moved = df.filter("id < 30").selectExpr(  # partition moves, and 5 deletes
        "id", "CASE city WHEN 'a' THEN 'b' WHEN 'b' THEN 'c' ELSE 'a' END AS city", "CAST(2 AS BIGINT) AS ts",
        "fare + 1 AS fare", "id < 5 AS _hoodie_is_deleted",
    )  # fmt: skip
    moved.write.format("hoodie").options(**opts).mode("append").save(str(path))
    expected = {i: {"id": i, "city": "abc"[i % 3], "ts": 1, "fare": float(i), "_hoodie_is_deleted": False}
                for i in range(5, 100)}  # fmt: skip
    for r in moved.collect():
        if not r["_hoodie_is_deleted"]:
            expected[r["id"]] = r.asDict()
    assert_table_matches(path, list(expected.values()))
    storage = Storage(str(path))
    got = {
        r["key"]: r["partition"] for r in read_record_index(storage, ActiveTimeline.load(storage)).to_pylist()
    }
    assert got == {str(k): v["city"] for k, v in expected.items()}

    stream = tmp_path / "s"
    batches = cdc_files(tmp_path / "src", 8)
    run_stream(spark, tmp_path / "src", stream, tmp_path / "ckpt",
               {**RECORD_INDEX, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})  # fmt: skip
    assert_table_matches(stream, model_of(batches))
    assert_metadata_lists_storage(stream)


COLUMN_STATS_AND_BLOOM_FILTERS = {
    **META,
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.index.type": "BLOOM",
    "hoodie.bloom.index.use.metadata": "true",
}


def test_spark_writes_keep_column_stats_and_bloom_filters(spark, tmp_path):
    """Batch writes and a merge-on-read CDC stream through Spark keep the column_stats and
    bloom_filters partitions (issue 29, item 3): the statistics and filters are taken by the tasks on
    Spark's Python workers and travel in their results; the bloom index tags from the metadata
    table. After every write both partitions equal what the live files say (assert_table_matches
    runs services/validation's column_stats and bloom_filters checks), and data skipping by the
    statistics answers as the model."""
    import hoodie_sink
    from hoodie_sink.table.format.metadata_table import listed_partitions
    from hoodie_sink.table.metadata.data_properties import read_data_properties

    path = tmp_path / "t"
    opts = {**OPTS, **COLUMN_STATS_AND_BLOOM_FILTERS}
    df = spark.createDataFrame(
        [(i, "abc"[i % 3], 1, float(i), False) for i in range(100)],
        "id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN",
    )
    df.repartition(3).write.format("hoodie").options(**opts).mode("append").save(str(path))
    assert {"column_stats", "bloom_filters"} <= set(
        listed_partitions(read_data_properties(Storage(str(path))))
    )
    updated = df.filter("id < 30").selectExpr(
        "id", "city", "CAST(2 AS BIGINT) AS ts", "fare + 1000 AS fare", "id < 5 AS _hoodie_is_deleted"
    )
    updated.repartition(2).write.format("hoodie").options(**opts).mode("append").save(str(path))
    expected = {i: {"id": i, "city": "abc"[i % 3], "ts": 1, "fare": float(i), "_hoodie_is_deleted": False}
                for i in range(5, 100)}  # fmt: skip
    for i in range(5, 30):
        expected[i] = {**expected[i], "ts": 2, "fare": float(i) + 1000}
    assert_table_matches(path, list(expected.values()))
    assert_metadata_lists_storage(path)
    skipped = hoodie_sink.read(str(path), filters=[("fare", ">=", 1000.0)])
    assert sorted(skipped.column("id").to_pylist()) == list(range(5, 30))

    stream = tmp_path / "s"
    batches = cdc_files(tmp_path / "src", 8)
    run_stream(spark, tmp_path / "src", stream, tmp_path / "ckpt",
               {**COLUMN_STATS_AND_BLOOM_FILTERS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"})  # fmt: skip
    assert_table_matches(stream, model_of(batches))
    assert_metadata_lists_storage(stream)
