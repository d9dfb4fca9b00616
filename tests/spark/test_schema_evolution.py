"""Issue 30 item 4 through Spark: a merge-on-read table whose writes add a nullable column and a
struct field, promote int -> long, and reconcile a batch lacking columns
(docs/hudi/schema-evolution.md); read back by hudi-rs and our reader after compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

import hoodie_sink
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
}


def test_spark_schema_evolution_on_a_merge_on_read_table(spark, tmp_path: Path):
    path = str(tmp_path / "t")

    def write(rows, schema: str, **options: str) -> None:
        spark.createDataFrame(rows, schema).write.format("hoodie").options(**OPTS, **options).mode(
            "append"
        ).save(path)

    write(
        [(1, "sf", 1, 10, (1,)), (2, "sf", 1, 20, (2,))],
        "id long, city string, ts long, n int, s struct<a:int>",
    )
    # a new column, a new struct field, n promoted to long
    write(
        [(2, "sf", 2, 2**40, (3, "x"), "c2")],
        "id long, city string, ts long, n long, s struct<a:int,b:string>, c string",
    )
    # an int batch into the long column: cast up; the table keeps long
    write(
        [(3, "sf", 3, 30, (4, "y"), "c3")],
        "id long, city string, ts long, n int, s struct<a:int,b:string>, c string",
    )
    with pytest.raises(Exception, match="column 'c' is missing from the input"):
        write([(1, "sf", 4, 11)], "id long, city string, ts long, n long")
    write(
        [(1, "sf", 4, 11)],
        "id long, city string, ts long, n long",
        **{"hoodie.datasource.write.reconcile.schema": "true"},
    )
    hoodie_sink.compact(path, OPTS, spark=spark)
    assert_table_matches(path, [
        {"id": 1, "city": "sf", "ts": 4, "n": 11, "s": None, "c": None},
        {"id": 2, "city": "sf", "ts": 2, "n": 2**40, "s": {"a": 3, "b": "x"}, "c": "c2"},
        {"id": 3, "city": "sf", "ts": 3, "n": 30, "s": {"a": 4, "b": "y"}, "c": "c3"},
    ])  # fmt: skip
    assert (
        spark.read.format("hoodie")
        .load(path)
        .schema.simpleString()
        .endswith("n:bigint,s:struct<a:int,b:string>,c:string>")
    )
