"""spark.read.format("hoodie"): null partition values, time travel, read options, streaming reads."""

from __future__ import annotations

import pytest

from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
}
ROWS = [(1, "sf"), (2, None), (3, ""), (4, "la")]


def _write(spark, path, rows=ROWS, **extra):
    df = spark.createDataFrame(rows, "id BIGINT, city STRING")
    df.write.format("hoodie").options(**OPTS, **extra).mode("append").save(str(path))


@pytest.mark.parametrize("hive", ["false", "true"])
def test_null_and_empty_partition_values_through_spark(spark, tmp_path, hive):
    path = tmp_path / "t"
    _write(spark, path, **{"hoodie.datasource.write.hive_style_partitioning": hive})
    assert_table_matches(path, [{"id": i, "city": c} for i, c in ROWS])
    df = spark.read.format("hoodie").load(str(path))
    assert sorted((r.id, r.city) for r in df.select("id", "city").collect()) == sorted(ROWS)
    # pruning on the partition column keeps the __HIVE_DEFAULT_PARTITION__ folder where it may match
    assert [r.id for r in spark.read.format("hoodie").load(str(path)).where("city IS NULL").collect()] == [2]
    assert [r.id for r in spark.read.format("hoodie").load(str(path)).where("city = ''").collect()] == [3]
    assert [r.id for r in spark.read.format("hoodie").load(str(path)).where("city = 'sf'").collect()] == [1]


def test_as_of_instant_through_spark(spark, tmp_path):
    path = tmp_path / "t"
    _write(spark, path, rows=[(1, "sf")])
    t1 = Timeline.load(Storage(str(path))).latest_completed().timestamp
    _write(spark, path, rows=[(2, "sf")])
    as_of = f"{t1[0:4]}-{t1[4:6]}-{t1[6:8]} {t1[8:10]}:{t1[10:12]}:{t1[12:14]}.{t1[14:17]}"
    df = spark.read.format("hoodie").option("as.of.instant", as_of).load(str(path))
    assert [r.id for r in df.collect()] == [1]
    with pytest.raises(Exception, match="as.of.instant.*yyyyMMddHHmmssSSS"):
        spark.read.format("hoodie").option("as.of.instant", "yesterday").load(str(path)).collect()


def test_read_options_are_checked_and_streaming_reads_are_refused(spark, tmp_path):
    path = tmp_path / "t"
    _write(spark, path, rows=[(1, "sf")])
    read = spark.read.format("hoodie")
    with pytest.raises(Exception, match="hoodie.datasource.query.type.*incremental.*not supported yet"):
        read.option("hoodie.datasource.query.type", "incremental").load(str(path)).collect()
    with pytest.raises(Exception, match="Unknown read option 'hoodie.datasource.query.typ'"):
        read.option("hoodie.datasource.query.typ", "snapshot").load(str(path)).collect()
    # one options dict for writes and reads: write options are accepted on a read
    assert spark.read.format("hoodie").options(**OPTS).load(str(path)).count() == 1
    with pytest.raises(Exception, match="Streaming reads .* are not supported yet"):
        q = spark.readStream.format("hoodie").load(str(path)).writeStream.format("console").start()
        try:
            q.processAllAvailable()
        finally:
            q.stop()
