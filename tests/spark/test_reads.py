"""spark.read.format("hoodie"): null partition values, time travel, read options, streaming reads."""

from __future__ import annotations

import pytest

import hoodie_sink
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
    # filters on the partition column find the rows of the __HIVE_DEFAULT_PARTITION__ folder
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


def test_read_options_are_checked(spark, tmp_path):
    path = tmp_path / "t"
    _write(spark, path, rows=[(1, "sf")])
    read = spark.read.format("hoodie")
    with pytest.raises(Exception, match="query.type.=.cdc. is not a Hudi query type"):
        read.option("hoodie.datasource.query.type", "cdc").load(str(path)).collect()
    with pytest.raises(Exception, match="incremental query needs 'hoodie.datasource.read.begin.instanttime'"):
        read.option("hoodie.datasource.query.type", "incremental").load(str(path)).collect()
    with pytest.raises(Exception, match="Unknown read option 'hoodie.datasource.query.typ'"):
        read.option("hoodie.datasource.query.typ", "snapshot").load(str(path)).collect()
    # one options dict for writes and reads: write options are accepted on a read
    assert spark.read.format("hoodie").options(**OPTS).load(str(path)).count() == 1


def test_time_travel_before_the_first_commit_merge_type_and_read_paths_through_spark(spark, tmp_path):
    path = tmp_path / "t"
    _write(spark, path, rows=[(1, "sf")], **{"hoodie.datasource.write.table.type": "MERGE_ON_READ"})
    first = Timeline.load(Storage(str(path))).latest_completed().timestamp
    for rows in ([(1, "sf"), (2, "sf")], [(1, "sf")]):  # the last upsert goes to a log file
        _write(spark, path, rows=rows, **{"hoodie.datasource.write.table.type": "MERGE_ON_READ"})

    def read():  # a new reader each time: .option() changes the reader it is called on
        return spark.read.format("hoodie")

    # before the first commit: no row, the table's columns
    before = read().option("as.of.instant", str(int(first) - 1)).load(str(path))
    assert before.schema == read().load(str(path)).schema
    assert before.collect() == [] and before.count() == 0
    # skip_merge: key 1's base row and its log record, unmerged (tests/unit/read/test_read_options.py)
    assert sorted(r.id for r in read().load(str(path)).collect()) == [1, 2]
    skip = read().option("hoodie.datasource.merge.type", "skip_merge").load(str(path))
    engine = hoodie_sink.read(str(path), {"hoodie.datasource.merge.type": "skip_merge"})
    assert sorted(r.id for r in skip.collect()) == sorted(engine["id"].to_pylist()) == [1, 1, 2]
    named = str(path / "sf" / "no-such-file.parquet")
    with pytest.raises(Exception, match="'hoodie.datasource.read.paths' is not supported"):
        read().option("hoodie.datasource.read.paths", named).load(str(path)).collect()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_incremental_query_through_spark(spark, tmp_path, table_type):
    """Each write's changes, and a range of them, as the engine's incremental read and the model say."""
    path = str(tmp_path / "t")
    opts = {
        **OPTS,
        "hoodie.datasource.write.precombine.field": "v",
        "hoodie.datasource.write.table.type": table_type,
    }
    writes = [[(1, "sf", 1), (2, "la", 1), (3, "sf", 1)], [(2, "la", 2), (4, "ny", 2)], [(1, "sf", 3)]]
    instants = []
    for rows in writes:
        spark.createDataFrame(rows, "id BIGINT, city STRING, v BIGINT").write.format("hoodie").options(
            **opts
        ).mode("append").save(path)
        instants.append(Timeline.load(Storage(path)).latest_completed().timestamp)

    def incremental(begin, end=None):
        read = spark.read.format("hoodie").option("hoodie.datasource.query.type", "incremental")
        read = read.option("hoodie.datasource.read.begin.instanttime", begin)
        if end:
            read = read.option("hoodie.datasource.read.end.instanttime", end)
        return sorted((r.id, r.v, r._hoodie_commit_time) for r in read.load(path).collect())

    t1, t2, t3 = instants
    assert incremental("earliest", t1) == [(1, 1, t1), (2, 1, t1), (3, 1, t1)]
    assert incremental(t1, t2) == [(2, 2, t2), (4, 2, t2)]
    assert incremental(t2) == [(1, 3, t3)]  # end: the latest write
    assert incremental(t1) == [(1, 3, t3), (2, 2, t2), (4, 2, t2)]
    assert incremental("earliest", t2) == [(1, 1, t1), (2, 2, t2), (3, 1, t1), (4, 2, t2)]
    assert incremental(t3) == []
    # the columns a query selects, and a partition filter
    read = spark.read.format("hoodie").option("hoodie.datasource.query.type", "incremental")
    df = read.option("hoodie.datasource.read.begin.instanttime", t1).load(path)
    assert sorted(r.id for r in df.where("city = 'la'").select("id").collect()) == [2]
    # Hudi's path glob ("*" + glob against each file's full path): the files of one partition
    glob = read.option("hoodie.datasource.read.begin.instanttime", "earliest")
    glob = glob.option("hoodie.datasource.read.incr.path.glob", "/sf/*")
    assert sorted(r.id for r in glob.load(path).collect()) == [1, 3]
