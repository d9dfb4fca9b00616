"""The Spark sink and reader on s3a:// paths, with the S3 settings given as Hadoop S3A options
only (the shared session's processes have no AWS variables), against the tests' S3 server."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.streams import stream_files
from tests.support.tables import assert_table_matches, hudi_rs_read

KEYED = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def test_batch_writes_and_reads_on_s3a_with_options(spark, tmp_path, s3, s3_uri):
    uri = s3_uri(tmp_path / "t")
    df = spark.createDataFrame(
        [(i, f"p{i % 3}", 1, f"v{i}") for i in range(300)], "id long, p string, ts long, v string"
    )
    df.write.format("hoodie").options(**KEYED, **s3.options()).mode("append").save(uri)
    upd = spark.createDataFrame(
        [(i, f"p{i % 3}", 2, f"w{i}") for i in range(0, 300, 3)], "id long, p string, ts long, v string"
    )
    upd.write.format("hoodie").options(**KEYED, **s3.options()).mode("append").save(uri)
    got = spark.read.format("hoodie").options(**s3.options()).load(uri)
    assert got.count() == 300
    assert got.filter("v like 'w%'").count() == 100
    expected = [{"id": i, "p": f"p{i % 3}", "ts": 2 if i % 3 == 0 else 1, "v": f"w{i}" if i % 3 == 0 else f"v{i}"}
                for i in range(300)]  # fmt: skip
    assert_table_matches(tmp_path / "t", expected)  # hudi-rs and ours, from s3proxy's files


def test_a_read_without_the_s3_settings_fails_clearly(spark, tmp_path, s3, s3_uri):
    uri = s3_uri(tmp_path / "t")
    spark.createDataFrame([(1, "a", 1, "x")], "id long, p string, ts long, v string").write.format(
        "hoodie"
    ).options(**KEYED, **s3.options()).mode("append").save(uri)
    with pytest.raises(Exception, match="(?s)hoodie|Hudi|S3|s3"):
        spark.read.format("hoodie").load(uri).count()  # no endpoint: not silently an empty table


def test_a_stream_into_s3a_is_exactly_once_across_replays(spark, tmp_path, s3, s3_uri):
    uri = s3_uri(tmp_path / "t")
    src = tmp_path / "src"
    src.mkdir()
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    model: dict[int, dict] = {}
    for b in range(4):
        ids = list(range(b * 50, b * 50 + 100))  # half of each batch updates the previous one
        batch = pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "ts": [b] * 100, "v": [f"{i}@{b}" for i in ids]},
                         schema=schema)  # fmt: skip
        pq.write_table(batch, src / f"b{b}.parquet")
        model.update({r["id"]: r for r in batch.to_pylist()})
    spark_schema = "id long, p string, ts long, v string"
    stream_files(spark, spark_schema, src, uri, tmp_path / "ckpt", {**KEYED, **s3.options()})
    # a replay of the last batch (its commit landed, the checkpoint's commit log lost): nothing twice
    for f in ("3", ".3.crc"):
        (tmp_path / "ckpt" / "commits" / f).unlink(missing_ok=True)
    stream_files(spark, spark_schema, src, uri, tmp_path / "ckpt", {**KEYED, **s3.options()})
    assert_table_matches(tmp_path / "t", sorted(model.values(), key=lambda r: r["id"]))
    assert hudi_rs_read(tmp_path / "t").num_rows == len(model)


def test_a_streaming_read_and_a_change_feed_of_an_s3a_table(spark, tmp_path, s3, s3_uri):
    """The streaming source and the CDC read plan and read with the S3 options of the query only."""
    uri = s3_uri(tmp_path / "t")
    schema = "id long, p string, ts long, v string"
    opts = {**KEYED, **s3.options()}
    spark.createDataFrame([(i, "a", 1, f"v{i}") for i in range(10)], schema).write.format("hoodie").options(
        **opts
    ).mode("append").save(uri)
    spark.createDataFrame([(i, "a", 2, f"w{i}") for i in range(5)], schema).write.format("hoodie").options(
        **opts
    ).mode("append").save(uri)
    seen: list[dict] = []
    q = (
        spark.readStream.format("hoodie").options(**s3.options()).load(uri)
        .writeStream.foreachBatch(lambda df, _: seen.extend(r.asDict() for r in df.select("id", "v").collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(300)
    assert q.exception() is None
    assert sorted((r["id"], r["v"]) for r in seen) == sorted(
        [(i, f"w{i}") for i in range(5)] + [(i, f"v{i}") for i in range(5, 10)]
    )  # from the start: each key as of the batch's end, which is the newest write here
    cdc = (
        spark.read.format("hoodie").options(**s3.options())
        .option("hoodie.datasource.query.type", "incremental")
        .option("hoodie.datasource.query.incremental.format", "cdc")
        .option("hoodie.datasource.read.begin.instanttime", "earliest").load(uri)
    )  # fmt: skip
    assert sorted(r["op"] for r in cdc.collect()) == ["i"] * 10 + ["u"] * 5
