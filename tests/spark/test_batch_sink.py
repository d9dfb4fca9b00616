"""df.write.format("hoodie") end to end on local[2,2]: every table read back by hudi-rs and us."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from hoodie_sink.table.format.schema import META_COLUMNS as META
from hoodie_sink.table.storage import Storage
from tests.support import faulty_source
from tests.support.tables import (
    COW_FIXTURES,
    assert_table_matches,
    data_rows,
    hudi_rs_read,
    hudi_rs_timeline,
    read_both,
    sort_rows,
    unzip_fixture,
)

UTC = dt.timezone.utc
OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
}


def trips_df(spark, n: int, start: int = 0, partitions: int = 3):
    cities = F.array(F.lit("sf"), F.lit("nyc"), F.lit("chennai"))
    return (
        spark.range(start, start + n, 1, partitions)
        .withColumn("city", F.element_at(cities, (F.col("id") % 3 + 1).cast("int")))
        .withColumn("fare", F.col("id") * 1.5)
        .withColumn("ts", F.timestamp_seconds(F.col("id") + 1700000000))
    )


def expected(df) -> list[dict]:
    out = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        d["ts"] = d["ts"].replace(tzinfo=UTC) if d["ts"].tzinfo is None else d["ts"]
        out.append(d)
    return out


def spark_rows(df) -> list[dict]:
    """Rows as Spark returns them, timestamps made UTC-aware (the session zone is UTC)."""
    rows = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        for k, v in d.items():
            if isinstance(v, dt.datetime) and v.tzinfo is None:
                d[k] = v.replace(tzinfo=UTC)
        rows.append(d)
    return sort_rows(rows)


def data_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


@pytest.mark.parametrize("operation", ["bulk_insert", "insert"])
def test_write_without_register_and_read_back(spark, tmp_path, operation):
    path = str(tmp_path / "t")
    df = trips_df(spark, 3000)
    df.write.format("hoodie").options(**OPTS).option("hoodie.datasource.write.operation", operation).mode(
        "append"
    ).save(path)
    assert_table_matches(path, expected(df))
    back = spark.read.format("hoodie").load(path)
    assert back.count() == 3000
    assert spark_rows(back.drop(*[c for c in back.columns if c.startswith("_hoodie")])) == sort_rows(
        expected(df)
    )
    # our Spark reader returns the meta columns as hudi-rs does
    ours = spark_rows(back.select("_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name"))
    theirs = sort_rows(
        hudi_rs_read(path)
        .select(["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_file_name"])
        .to_pylist()
    )
    assert ours == theirs


def test_hudi_option_aliases_and_overwrite(spark, tmp_path):
    path = str(tmp_path / "t")
    df = trips_df(spark, 300)
    df.write.format("hoodie").option("primaryKey", "id").option(
        "hoodie.datasource.write.partitionpath.field", "city"
    ).option("type", "cow").option("hoodie.table.name", "trips").mode("append").save(path)
    df2 = trips_df(spark, 30, start=1000)
    df2.write.format("hoodie").options(**OPTS).mode("overwrite").save(path)
    assert_table_matches(path, expected(df2))
    assert len(hudi_rs_timeline(path).get_completed_replacecommits()) == 1


@pytest.mark.s3
def test_task_retry_leaves_no_duplicates_or_orphans(spark, tmp_path):
    path, log = tmp_path / "t", tmp_path / "faults"
    df = trips_df(spark, 3000, partitions=3)
    df.write.format(faulty_source.register(spark)).options(**OPTS).option("fault.task", "1").option(
        "fault.log", str(log)
    ).mode("append").save(str(path))
    # task 1's first attempt wrote its files and failed, in a Python worker; its retry succeeded
    assert [(pid != os.getpid(), part, attempt) for pid, part, attempt in faulty_source.injected_in(log)] == [
        (True, 1, 0)
    ]
    assert_table_matches(path, expected(df))
    # every data file on storage is referenced by the commit
    import json

    tl = hudi_rs_timeline(path)
    meta = json.loads(tl.get_instant_metadata_in_json(tl.get_completed_commits()[0]))
    referenced = {s["path"] for stats in meta["partitionToWriteStats"].values() for s in stats}
    on_disk = {str(p.relative_to(path)) for p in data_files(path)}
    assert on_disk == referenced
    assert not list((path / ".hoodie" / ".temp").glob("*"))


@pytest.mark.s3
def test_failed_job_leaves_table_exactly_as_before(spark, tmp_path, table_storage):
    path = tmp_path / "t"
    df = trips_df(spark, 300)
    df.write.format("hoodie").options(**OPTS).mode("append").save(str(path))
    before = sorted(str(p) for p in path.rglob("*"))
    faulty = faulty_source.register(spark)
    with pytest.raises(Exception, match="test failure injected"):
        trips_df(spark, 300, start=5000).write.format(faulty).options(**OPTS).option(
            "fault.task", "always:1"
        ).mode("append").save(str(path))
    # as before, but for the rollback instant that records the undo (requested, inflight, done)
    undo = sorted(p.name for p in (path / ".hoodie").glob("*.rollback*"))
    assert [n.split(".", 1)[1] for n in undo] == ["rollback", "rollback.inflight", "rollback.requested"]
    # (and for the metadata table, which records the rollback: checked by assert_table_matches)
    data_table = [p for p in before if "/.hoodie/metadata" not in p]
    assert (
        sorted(
            str(p) for p in path.rglob("*") if ".rollback" not in p.name and "/.hoodie/metadata" not in str(p)
        )
        == data_table
    )
    assert_table_matches(path, expected(df))
    fresh = tmp_path / "fresh"
    with pytest.raises(Exception, match="test failure injected"):
        df.write.format(faulty).options(**OPTS).option("fault.task", "always:0").mode("append").save(
            str(fresh)
        )
    assert not list(Storage(str(fresh)).walk_files(""))  # nothing, as the table's storage lists it
    if table_storage == "local":  # (s3proxy's filesystem backend may keep empty folders of deleted objects)
        assert not fresh.exists()


ALL_TYPES = StructType(
    [
        StructField("id", IntegerType()),
        StructField("b", BooleanType()),
        StructField("by", ByteType()),
        StructField("sh", ShortType()),
        StructField("l", LongType()),
        StructField("f", FloatType()),
        StructField("d", DoubleType()),
        StructField("dec", DecimalType(10, 5)),
        StructField("s", StringType()),
        StructField("bin", BinaryType()),
        StructField("dt", DateType()),
        StructField("ts", TimestampType()),
        StructField("arr", ArrayType(StructType([StructField("x", StringType()), StructField("y", IntegerType())]))),
        StructField("m", MapType(StringType(), StructType([StructField("v", DoubleType())]))),
        StructField("st", StructType([StructField("f1", StringType()),
                                      StructField("c", StructType([StructField("g", BooleanType())]))])),
    ]
)  # fmt: skip


def test_all_spark_types(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        (1, True, 1, 300, 2**40, 1.5, 3.14159, decimal.Decimal("12345.67890"), "a", b"x", dt.date(2023, 4, 1),
         dt.datetime(2023, 4, 1, 12, 1, tzinfo=UTC), [("r", 1)], {"k": (1.0,)}, ("a", (True,))),
        (2, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
        (3, False, -3, -300, -1, 0.25, -2.5, decimal.Decimal("-1.00001"), "ü", b"\x00", dt.date(1970, 1, 1),
         dt.datetime(1999, 1, 1, tzinfo=UTC), [], {}, (None, None)),
    ]  # fmt: skip
    df = spark.createDataFrame(rows, ALL_TYPES)
    df.write.format("hoodie").option("primaryKey", "id").mode("append").save(path)
    theirs, _ = read_both(path)
    got = data_rows(theirs)
    want = spark_rows(df)
    for r in got:
        r["m"] = None if r["m"] is None else dict(r["m"])
    for r in want:
        r["m"] = (
            None
            if r["m"] is None
            else {k: v.asDict() if isinstance(v, Row) else v for k, v in r["m"].items()}
        )
    assert got == sort_rows(want)
    back = spark_rows(spark.read.format("hoodie").load(path).drop("_hoodie_commit_time", "_hoodie_commit_seqno",
                      "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"))  # fmt: skip
    assert len(back) == 3


def test_timestamp_ntz_and_bad_options_fail_clearly(spark, tmp_path):
    path = tmp_path / "t"
    df = spark.sql("SELECT 1 AS id, TIMESTAMP_NTZ'2024-01-01 00:00:00' AS t")
    with pytest.raises(Exception, match="TIMESTAMP"):
        df.write.format("hoodie").option("primaryKey", "id").mode("append").save(str(path))
    with pytest.raises(Exception, match="hoodie.datasource.write.precombine.fieldx"):
        trips_df(spark, 3).write.format("hoodie").options(**OPTS).option(
            "hoodie.datasource.write.precombine.fieldx", "ts"
        ).mode("append").save(str(path))
    with pytest.raises(Exception, match="No table path"):
        trips_df(spark, 3).write.format("hoodie").options(**OPTS).mode("append").save()
    assert not path.exists()
    nulls = spark.sql("SELECT CAST(NULL AS BIGINT) AS id, 'sf' AS city")
    with pytest.raises(Exception, match="id"):
        nulls.write.format("hoodie").options(**OPTS).mode("append").save(str(path))
    assert not path.exists()


@pytest.mark.compat
@pytest.mark.parametrize("fixture", [f for f in COW_FIXTURES if f != "cow_v6_empty"])
def test_insert_into_tables_written_by_apache_hudi(spark, tmp_path, fixture):
    table = unzip_fixture(fixture, tmp_path)
    old = hudi_rs_read(table)
    old_rows = data_rows(old)
    # New rows: the old ones with new keys, through Spark with the table's own schema.
    src = spark.read.format("hoodie").load(str(table))
    data_cols = [c for c in src.columns if not c.startswith("_hoodie")]
    new = src.select(*data_cols).withColumn("id", F.col("id") + 100)
    new_rows = spark_rows(new)
    new.write.format("hoodie").option("hoodie.datasource.write.operation", "insert").mode("append").save(
        str(table)
    )
    after = hudi_rs_read(table)
    assert after.num_rows == old.num_rows + len(new_rows)
    got = data_rows(after)
    for r in got + old_rows + new_rows:
        for k, v in list(r.items()):
            if isinstance(v, list) and v and isinstance(v[0], tuple):
                r[k] = dict(v)
            if isinstance(v, dict):
                r[k] = {kk: (vv.asDict() if isinstance(vv, Row) else vv) for kk, vv in v.items()}
    assert sort_rows(got) == sort_rows(old_rows + new_rows)
    read_both(table)
    # old rows keep their commit time
    old_times = {r["_hoodie_record_key"]: r["_hoodie_commit_time"] for r in old.to_pylist()}
    for r in after.to_pylist():
        if r["_hoodie_record_key"] in old_times:
            assert r["_hoodie_commit_time"] == old_times[r["_hoodie_record_key"]]


@pytest.mark.compat
def test_read_fixtures_and_filter_partitions(spark, tmp_path):
    table = unzip_fixture("cow_v6_complexkeygen_hivestyle", tmp_path)

    def load(p):
        return spark.read.format("hoodie").load(str(p))

    assert load(table).count() == 4
    # a filter on the partition column reads every file (the reader takes no pushed filters,
    # hoodie_sink/datasource/reader.py) and Spark keeps the matching rows
    assert sorted(r.id for r in load(table).where("byteField = 10").collect()) == [1, 3]
    simple = unzip_fixture("cow_v6_simplekeygen_nonhivestyle", tmp_path)
    assert load(simple).where("byteField = 20").count() == 1
    assert load(simple).count() == hudi_rs_read(simple).num_rows
    empty = unzip_fixture("cow_v6_empty", tmp_path)
    assert spark.read.format("hoodie").load(str(empty)).count() == 0
    shutil.rmtree(tmp_path / "v6_empty")


@pytest.mark.compat
def test_insert_into_empty_table_written_by_apache_hudi(spark, tmp_path):
    table = unzip_fixture("cow_v6_empty", tmp_path)
    df = spark.createDataFrame([(1, "a", True), (2, None, False)], "id INT, name STRING, isActive BOOLEAN")
    df.write.format("hoodie").option("hoodie.datasource.write.operation", "insert").mode("append").save(
        str(table)
    )
    assert_table_matches(table, [r.asDict() for r in df.collect()])


@pytest.mark.compat
def test_insert_into_mor_table_written_by_apache_hudi(spark, tmp_path):
    table = unzip_fixture("mor_avro_v6_trips_8i1u", tmp_path)
    old = hudi_rs_read(table)
    new = spark.createDataFrame(
        [(1700000000, "new-1", "rider-Z", "driver-Z", 9.5, "san_francisco"),
         (1700000001, "new-2", "rider-Y", "driver-Y", 3.0, "berlin")],
        "ts LONG, uuid STRING, rider STRING, driver STRING, fare DOUBLE, city STRING",
    )  # fmt: skip
    new.write.format("hoodie").option("hoodie.datasource.write.operation", "insert").mode("append").save(
        str(table)
    )
    after = hudi_rs_read(table)
    assert sort_rows(data_rows(after)) == sort_rows(data_rows(old) + [r.asDict() for r in new.collect()])
    tl = hudi_rs_timeline(table)
    assert len(tl.get_completed_deltacommits()) == 3
    # our snapshot merges the log (the fixture's update) as hudi-rs does; read-optimized: base files
    snap = spark.read.format("hoodie").load(str(table))
    assert sort_rows([r.asDict() for r in snap.drop(*META).collect()]) == sort_rows(data_rows(after))
    ro = spark.read.format("hoodie").option("hoodie.datasource.query.type", "read_optimized").load(str(table))
    assert ro.where("uuid like 'new-%'").count() == 2


def test_null_array_elements_are_refused_unless_allowed(spark, tmp_path):
    """Apache Hudi 0.14/0.15's merge cannot rewrite a list with a null element: refused, named,
    and nothing committed; written as they are with hoodie.sink.write.allow.null.array.elements."""
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, ["a", None]), (2, ["b"])], "id INT, tags ARRAY<STRING>")
    with pytest.raises(Exception, match="Column 'tags' holds a list with a null element"):
        df.write.format("hoodie").option("primaryKey", "id").mode("append").save(path)
    assert not any(p.name.endswith(".commit") for p in (tmp_path / "t" / ".hoodie").glob("*"))
    df.write.format("hoodie").option("primaryKey", "id").option(
        "hoodie.sink.write.allow.null.array.elements", "true"
    ).mode("append").save(path)
    theirs, ours = read_both(path)
    assert sort_rows(data_rows(theirs)) == [{"id": 1, "tags": ["a", None]}, {"id": 2, "tags": ["b"]}]
    assert sort_rows(data_rows(ours)) == sort_rows(data_rows(theirs))
