"""Issue 8 items 7, 8, 10 through Spark: a refused write changes nothing on storage, and
hoodie.write.set.null.for.missing.columns fills a missing nullable column with nulls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tables import assert_table_matches, without_rollback_records
from tests.unit.test_options import snapshot

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}


def test_spark_refuses_a_folder_of_plain_parquet_and_leaves_it_untouched(spark, tmp_path):
    folder = tmp_path / "lake"
    df = spark.createDataFrame(
        [(1, "sf", 1, 1.0), (2, "la", 1, 2.0)], "id long, city string, ts long, fare double"
    )
    df.write.partitionBy("city").parquet(str(folder))
    before = snapshot(folder)
    with pytest.raises(Exception, match="not a Hudi table"):
        df.write.format("hoodie").options(**OPTS).mode("append").save(str(folder))
    assert snapshot(folder) == before
    # a refused option (item 7) and a key generator that cannot run (item 10) change nothing either
    table = tmp_path / "t"
    df.write.format("hoodie").options(**OPTS).mode("append").save(str(table))
    before = snapshot(table)
    with pytest.raises(Exception, match="hoodie.metadata.record.index.enable"):
        df.write.format("hoodie").options(**OPTS, **{"hoodie.metadata.record.index.enable": "true"}).mode(
            "append"
        ).save(str(table))
    bad_keygen = {
        "hoodie.datasource.write.keygenerator.type": "SIMPLE",
        "hoodie.datasource.write.recordkey.field": "id,ts",
    }
    with pytest.raises(Exception, match="exactly one record key"):
        df.write.format("hoodie").options(**{**OPTS, **bad_keygen}).mode("append").save(str(tmp_path / "new"))
    assert snapshot(table) == before and not (tmp_path / "new").exists()


def test_spark_set_null_for_missing_columns(spark, tmp_path: Path):
    path = str(tmp_path / "t")
    schema = "id long, city string, ts long, fare double"
    spark.createDataFrame([(1, "sf", 1, 1.0), (2, "sf", 1, 2.0)], schema).write.format("hoodie").options(
        **OPTS).mode("append").save(path)  # fmt: skip
    lacking = spark.createDataFrame([(2, "sf", 5), (3, "sf", 5)], "id long, city string, ts long")
    before = snapshot(tmp_path / "t")
    with pytest.raises(Exception, match="column 'fare' is missing from the input"):
        lacking.write.format("hoodie").options(**OPTS).mode("append").save(path)
    assert snapshot(tmp_path / "t") == before
    lacking.write.format("hoodie").options(**OPTS, **{"hoodie.write.set.null.for.missing.columns": "true"}).mode(
        "append").save(path)  # fmt: skip
    assert_table_matches(path, [{"id": 1, "city": "sf", "ts": 1, "fare": 1.0},
                                {"id": 2, "city": "sf", "ts": 5, "fare": None},
                                {"id": 3, "city": "sf", "ts": 5, "fare": None}])  # fmt: skip


def test_spark_refuses_a_null_ordering_value(spark, tmp_path: Path):
    """Issue 25 item 8: an upsert holding a null precombine value is refused naming the column
    (Apache Hudi 0.15 refuses it too: docs/hudi/null-ordering.md); the table is left as it was."""
    path = tmp_path / "t"
    schema = "id long, city string, ts long, fare double"
    stored = [(1, "sf", 5, 1.0), (2, "sf", 5, 2.0)]
    mor = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    spark.createDataFrame(stored, schema).write.format("hoodie").options(**mor).mode("append").save(str(path))
    before = snapshot(path)
    late = spark.createDataFrame([(1, "sf", None, 9.0), (3, "sf", 7, 3.0)], schema).repartition(2)
    with pytest.raises(Exception, match=r"Column 'ts' \(option 'hoodie.datasource.write.precombine.field'"):
        late.write.format("hoodie").options(**mor).mode("append").save(str(path))
    assert without_rollback_records(snapshot(path)) == without_rollback_records(before)
    assert_table_matches(path, [dict(zip(("id", "city", "ts", "fare"), r, strict=True)) for r in stored])
