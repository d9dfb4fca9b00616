"""Merge-on-read tables through df.write.format("hoodie") and spark.read.format("hoodie") (issue 12):
upserts and deletes in any input partitioning land as log files, snapshot reads merge them, read-optimized
reads see base files only; hudi-rs and our reader agree with the model."""

from __future__ import annotations

import pytest

from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.storage import Storage
from tests.spark.test_upsert_sink import OPTS as UPSERT_OPTS
from tests.spark.test_upsert_sink import rows_of, trips
from tests.support.tables import assert_table_matches

OPTS = {**UPSERT_OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}


def spark_rows(spark, path, **options):
    df = spark.read.format("hoodie").options(**options).load(path)
    return sorted((r["id"], r["ts"], r["fare"]) for r in df.collect())


@pytest.mark.parametrize("by_key", [False, True])
def test_mor_upserts_and_deletes(spark, tmp_path, by_key):
    path = str(tmp_path / "t")
    first = trips(spark, range(3000), 1)
    first.write.format("hoodie").options(**OPTS).option(
        "hoodie.datasource.write.operation", "bulk_insert"
    ).mode("append").save(path)
    model = {r["id"]: r for r in rows_of(first)}
    for ts in (2, 3):
        upd = trips(spark, list(range(ts, 3000, 3)) + list(range(5000 + ts * 100, 5050 + ts * 100)), ts, 4)
        late = trips(spark, [ts + 3], 0, partitions=1)  # loses to the stored record
        batch = upd.union(late)
        batch = batch.repartition(4, "city") if by_key else batch.repartition(4)
        batch.write.format("hoodie").options(**OPTS).mode("append").save(path)
        for r in rows_of(upd):
            model[r["id"]] = r
    gone = trips(spark, range(0, 300), 9, partitions=2)
    gone.write.format("hoodie").options(**OPTS).option("hoodie.datasource.write.operation", "delete").mode(
        "append"
    ).save(path)
    for i in range(300):
        model.pop(i, None)
    assert_table_matches(path, list(model.values()))
    expected = sorted((r["id"], r["ts"], r["fare"]) for r in model.values())
    assert spark_rows(spark, path) == expected
    # updates went to log files, never rewriting the base files of the first commit
    storage = Storage(path)
    view = FileSystemView.load(storage)
    assert view.listing.log_files
    # read-optimized: the base files only (the first commit's rows and the inserts)
    ro = spark_rows(spark, path, **{"hoodie.datasource.query.type": "read_optimized"})
    assert len(ro) > len(expected) - 1000 and ro != expected
    # filters on a merged table: never skip a slice whose logs may hold matching updates
    df = spark.read.format("hoodie").load(path).where("ts = 3")
    assert sorted(r["id"] for r in df.collect()) == sorted(i for i, r in model.items() if r["ts"] == 3)
