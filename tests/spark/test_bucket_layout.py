"""Issue 25 item 6 through Spark: a BUCKET table's layout is kept with it (hoodie.properties), later
writes take it from there, and writes that would hash keys differently or write outside the hash
buckets are refused before anything is written (tests/unit/write/test_bucket_layout.py has every
scenario through the engine API)."""

from __future__ import annotations

import pytest

from tests.support.tables import assert_table_matches
from tests.unit.test_options import snapshot
from tests.unit.write.test_bucket_layout import assert_keys_in_their_buckets

SCHEMA = "id string, p string, ts long, v long"
BASE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}
BUCKET2 = {**BASE, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}


def rows(ids, ts: int) -> list[dict]:
    return [{"id": f"k{i}", "p": f"p{i % 2}", "ts": ts, "v": i * 10 + ts} for i in ids]


def test_spark_writes_keep_the_bucket_layout_of_the_table(spark, tmp_path):
    path, model = str(tmp_path / "t"), {}

    def write(batch, options, mode="append"):
        spark.createDataFrame(batch, SCHEMA).repartition(3).write.format("hoodie").options(**options).mode(
            mode
        ).save(path)
        model.update({r["id"]: r for r in batch})

    write(rows(range(20), 1), BUCKET2)
    # no num.buckets (the default 4 inserted stored keys again), then no index option at all
    write(
        rows(range(10, 30), 2), {k: v for k, v in BUCKET2.items() if k != "hoodie.bucket.index.num.buckets"}
    )
    write(rows(range(25, 40), 3), BASE)
    assert_table_matches(path, list(model.values()))
    assert_keys_in_their_buckets(path, 2, ["id"])

    before = snapshot(tmp_path / "t")
    refused = [
        ({**BUCKET2, "hoodie.bucket.index.num.buckets": "7"}, "append", "contradicts"),
        ({**BASE, "hoodie.index.type": "BLOOM"}, "append", "contradicts"),
        (BASE, "overwrite", "insert_overwrite_table"),
        ({**BUCKET2, "hoodie.datasource.write.operation": "insert_overwrite"}, "append", "insert_overwrite"),
    ]
    for options, mode, message in refused:
        df = spark.createDataFrame(rows(range(5), 9), SCHEMA)
        try:
            df.write.format("hoodie").options(**options).mode(mode).save(path)
        except Exception as e:  # noqa: BLE001 - Spark wraps the Python error
            assert message in str(e)
        else:
            raise AssertionError(f"{options} ({mode}) was not refused")
    assert snapshot(tmp_path / "t") == before
    assert_table_matches(path, list(model.values()))


def test_record_bucket_layout_runs_as_a_spark_job(spark, tmp_path, monkeypatch):
    """A table too large for a write's own check (lowered here to 1 byte): the check runs as one Spark
    task per file group, refuses a wrong count, records the right one; the Spark write then goes on."""
    import hoodie_sink
    from hoodie_sink.errors import HoodieConfigError
    from hoodie_sink.table.write import bucket_layout
    from tests.unit.write.test_bucket_layout import Table

    t = Table(tmp_path / "t")
    t.write(rows(range(30), 1), BUCKET2)
    t.forget_layout()
    monkeypatch.setattr(bucket_layout, "DRIVER_CHECK_MAX_BYTES", 1)  # this process: the driver
    with pytest.raises(HoodieConfigError, match="do not match"):
        hoodie_sink.record_bucket_layout(
            t.path, {**BUCKET2, "hoodie.bucket.index.num.buckets": "3"}, spark=spark
        )
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    hoodie_sink.record_bucket_layout(t.path, BUCKET2, spark=spark)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) > len(jobs)
    assert t.properties()["hoodie.bucket.index.num.buckets"] == "2"
    batch = rows(range(20, 40), 2)
    spark.createDataFrame(batch, SCHEMA).write.format("hoodie").options(**BUCKET2).mode("append").save(t.path)
    t.model.update({(r["p"], r["id"]): r for r in batch})
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id"])
