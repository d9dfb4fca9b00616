"""Upserts and deletes through df.write.format("hoodie") on local[2,2]."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from hoodie_sink.table.format.properties import parse_properties
from hoodie_sink.table.read.snapshot import Snapshot
from tests.support.tables import (
    COW_FIXTURES,
    assert_table_matches,
    data_rows,
    hudi_rs_read,
    hudi_rs_timeline,
    read_both,
    unzip_fixture,
)

OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}


def trips(spark, ids, ts, partitions=3):
    return spark.createDataFrame(
        [(i, ["sf", "nyc", "la"][i % 3], ts, float(i * ts)) for i in ids],
        "id LONG, city STRING, ts LONG, fare DOUBLE",
    ).repartition(partitions)


def rows_of(df):
    return [r.asDict() for r in df.collect()]


@pytest.mark.parametrize("by_key", [False, True])
def test_upsert_and_delete_any_partitioning(spark, tmp_path, by_key):
    path = str(tmp_path / "t")
    first = trips(spark, range(3000), 1)
    first.write.format("hoodie").options(**OPTS).option(
        "hoodie.datasource.write.operation", "bulk_insert"
    ).mode("append").save(path)
    upd = trips(spark, list(range(0, 3000, 3)) + list(range(5000, 5300)), 2, partitions=4)
    # duplicates of one key in several tasks: the higher ts wins
    dup = trips(spark, [7, 8], 3, partitions=1).union(trips(spark, [7], 0, partitions=1))
    batch = upd.union(dup)
    batch = batch.repartition(4, "city") if by_key else batch.repartition(4)
    batch.write.format("hoodie").options(**OPTS).mode("append").save(path)
    model = {r["id"]: r for r in rows_of(first)}
    for r in rows_of(upd) + rows_of(trips(spark, [7, 8], 3, partitions=1)):
        model[r["id"]] = r
    theirs = assert_table_matches(path, list(model.values()))
    # untouched rows keep their commit time
    times = sorted(set(theirs.column("_hoodie_commit_time").to_pylist()))
    assert len(times) == 2
    tl = hudi_rs_timeline(path)
    meta = json.loads(tl.get_instant_metadata_in_json(tl.get_completed_commits()[-1]))
    counts = {k: sum(s[k] for ss in meta["partitionToWriteStats"].values() for s in ss)
              for k in ("numInserts", "numUpdateWrites")}  # fmt: skip
    assert counts == {"numInserts": 300, "numUpdateWrites": 1002}
    # deletes: the delete operation and _hoodie_is_deleted in an upsert
    dels = spark.createDataFrame(
        [(i, ["sf", "nyc", "la"][i % 3]) for i in (1, 2, 99999)], "id LONG, city STRING"
    )
    dels.write.format("hoodie").options(**OPTS).option("hoodie.datasource.write.operation", "delete").mode(
        "append"
    ).save(path)
    soft = trips(spark, [4, 5], 9).withColumn("_hoodie_is_deleted", F.col("id") == 4)
    for k in (1, 2, 4):
        model.pop(k)
    model[5] = {"id": 5, "city": "la", "ts": 9, "fare": 45.0}
    soft.write.format("hoodie").options(**OPTS).mode("append").save(path)
    theirs, _ = read_both(path)
    got = {r["id"]: r for r in data_rows(theirs)}
    assert set(got) == set(model)
    assert got[5]["ts"] == 9 and got[5]["_hoodie_is_deleted"] is False


@pytest.mark.compat
@pytest.mark.parametrize("fixture", [f for f in COW_FIXTURES if f != "cow_v6_empty"])
def test_upsert_into_tables_written_by_apache_hudi(spark, tmp_path, fixture):
    table = unzip_fixture(fixture, tmp_path)
    old = hudi_rs_read(table)
    src = spark.read.format("hoodie").load(str(table))
    data_cols = [c for c in src.columns if not c.startswith("_hoodie")]
    first_id = min(r.id for r in src.select("id").collect())
    changed = src.where(F.col("id") == first_id).select(*data_cols)
    # update one existing row (precombine, if any, raised so it wins) and add a new one
    props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text())
    pre = props.get("hoodie.table.precombine.field")
    if pre:
        changed = changed.withColumn(pre, F.col(pre) + 1)
    new = changed.withColumn("id", F.col("id") + 1000)
    changed.union(new).write.format("hoodie").mode("append").save(str(table))
    after = hudi_rs_read(table)
    assert after.num_rows == old.num_rows + 1
    read_both(table)
    old_by_key = {r["_hoodie_record_key"]: r for r in old.to_pylist()}
    new_instant = hudi_rs_timeline(table).get_completed_commits()[-1].timestamp
    for r in after.to_pylist():
        if r["id"] == first_id or r["id"] == first_id + 1000:
            assert r["_hoodie_commit_time"] == new_instant
        else:
            assert r["_hoodie_commit_time"] == old_by_key[r["_hoodie_record_key"]]["_hoodie_commit_time"]


def test_virtual_key_table_upsert_in_place(spark, tmp_path):
    """hoodie.populate.meta.fields=false (Hudi's virtual keys): bulk_insert then an upsert with
    unpartitioned input; the upsert updates the file groups holding the keys (no new file group
    for an update, no duplicate), and hudi-rs and our reader agree, without meta columns."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.populate.meta.fields": "false"}
    first = trips(spark, range(300), 1)
    first.write.format("hoodie").options(**opts).option(
        "hoodie.datasource.write.operation", "bulk_insert"
    ).mode("append").save(path)
    groups = set(_file_groups(path))
    upd = trips(spark, range(0, 300, 2), 2, partitions=4)
    upd.write.format("hoodie").options(**opts).mode("append").save(path)
    assert set(_file_groups(path)) == groups
    model = {r["id"]: r for r in rows_of(first)}
    model.update({r["id"]: r for r in rows_of(upd)})
    theirs = assert_table_matches(path, list(model.values()))
    assert not [c for c in theirs.column_names if c.startswith("_hoodie_")]
    ours = spark.read.format("hoodie").load(path)
    assert ours.count() == 300 and not [c for c in ours.columns if c.startswith("_hoodie_")]


def _file_groups(path):
    return [(bf.partition_path, bf.file_id) for bf in Snapshot.open(path).base_files()]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_keys_stored_twice_are_updated_and_deleted_everywhere(spark, tmp_path, table_type):
    """bulk_insert keeps duplicate keys (two writes, and twice in one batch); an upsert from several
    tasks changes every copy and a delete removes every copy (docs/hudi/duplicate-keys.md)."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    once, twice = trips(spark, range(300), 1), trips(spark, range(0, 300, 2), 1, partitions=2)
    in_batch = trips(spark, range(300, 310), 1, partitions=1)
    for df in (once, twice, in_batch.union(in_batch).coalesce(1)):
        df.write.format("hoodie").options(**opts).option(
            "hoodie.datasource.write.operation", "bulk_insert"
        ).mode("append").save(path)
    stored = rows_of(once) + rows_of(twice) + 2 * rows_of(in_batch)
    assert_table_matches(path, stored)

    changed = list(range(0, 310, 3))
    upd = trips(spark, changed, 5, partitions=4)
    upd.write.format("hoodie").options(**opts).mode("append").save(path)
    new = {r["id"]: r for r in rows_of(upd)}
    assert_table_matches(path, [new.get(r["id"], r) for r in stored])

    gone = set(range(0, 310, 4))
    trips(spark, sorted(gone), 6, partitions=3).write.format("hoodie").options(**opts).option(
        "hoodie.datasource.write.operation", "delete"
    ).mode("append").save(path)
    assert_table_matches(path, [new.get(r["id"], r) for r in stored if r["id"] not in gone])
