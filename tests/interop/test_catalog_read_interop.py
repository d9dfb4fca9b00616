"""Apache Hudi's Spark reads tables through the Hive metastore: `spark.table("db.trips")`, and for
merge-on-read `db.<t>_ro`, `db.<t>_rt` and `db.<t>`, with the rows hudi-rs reads and the rows
written (docs/hudi/hive-sync.md#reading-through-the-catalog).

`java_catalog` is Hudi 0.15.0's Spark 3.5 with Hive support on the session's test metastore (Hive
3.1.3, spoken to by Spark's built-in Hive 2.3.9 client); it resolves each name through the
metastore and Hudi's HoodieCatalog, and reads by the table's registration alone (location, Spark
data source properties, serde `path` and `hoodie.query.as.ro.table`, partitions).

First with tables Java's own hive sync registered (`java_local` writes them: Java's LOCAL-zone
tables, tests/interop/conftest.py), the baseline that proves the reader set-up; then with the
sink's tables, registered by our sync (hoodie.datasource.meta.sync.enable on our writer).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.interop.compare import _assert_rows_equal, _conform
from tests.interop.test_java_reads_ours import ARROW, BASE, Model, rows
from tests.support.tables import data_rows, hudi_rs_read, sort_by_key, sort_rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

# the partition filter of `WHERE city = 'sf'` as Spark prints it in the scan: it prunes partitions
PARTITION_FILTER = re.compile(r"PartitionFilters: \[isnotnull\(city#\d+\), \(city#\d+ = sf\)\]")
MOR = {
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.parquet.small.file.limit": "0",  # inserts start file groups (base files), updates go to logs
    "hoodie.compact.inline": "false",
}


def hudi_rs_read_optimized(path) -> pa.Table:
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(path)).with_option(
        "hoodie.read.use.read_optimized.mode", "true"
    )
    batches = table.build().read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


class MorModel(Model):
    """A merge-on-read table's rows: the snapshot (the latest row per key) and the read-optimized
    view (base files only: a key as inserted, until compaction; updates and deletes are in logs)."""

    def __init__(self) -> None:
        super().__init__()
        self.base: dict[int, dict] = {}

    def upsert(self, batch: list[dict]) -> None:
        for r in batch:
            if r["id"] not in self.by_key and r["id"] not in self.base:
                self.base[r["id"]] = r
        super().upsert(batch)

    def read_optimized(self) -> list[dict]:
        return list(self.base.values())


def assert_catalog_read(java: pa.Table, rs: pa.Table, expected: list[dict], what: str) -> None:
    """Java's catalog read equals hudi-rs's read of the path (every column, meta columns included)
    and the data columns equal the model's rows."""
    assert rs.num_rows, f"{what}: hudi-rs reads no rows"
    theirs = sort_by_key(rs)
    got = _conform(sort_by_key(java), theirs)
    assert got.num_rows == theirs.num_rows, (
        f"{what}: Java reads {got.num_rows} rows, hudi-rs {theirs.num_rows}"
    )
    for name in theirs.column_names:
        a, b = got.column(name).to_pylist(), theirs.column(name).to_pylist()
        assert a == b, f"{what}: column {name} differs between Java's catalog read and hudi-rs"
    _assert_rows_equal(data_rows(theirs), sort_rows(expected))


def sync_options(table: str, database: str, uri: str) -> dict:
    """Hudi's meta sync options, the same for Java's writer and ours."""
    return {
        "hoodie.datasource.meta.sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.metastore.uris": uri,
        "hoodie.datasource.hive_sync.database": database,
        "hoodie.datasource.hive_sync.table": table,
    }


def java_writes(java_local, path, batch: list[dict], options: dict) -> None:
    java_local.write(path, pa.Table.from_pylist(batch, schema=ARROW), options)


def only_city(t: pa.Table, city: str) -> pa.Table:
    return t.filter(pc.equal(t.column("city"), city))


# -- the baseline: tables Java's own hive sync registered ----------------------------------------
def test_java_reads_its_own_copy_on_write_registration(java_local, java_catalog, hive_metastore, tmp_path):
    path, model = tmp_path / "trips", Model()
    opts = {**BASE, **sync_options("trips", "java_cat_cow", hive_metastore.uri)}
    first = rows(range(30), ts=1)
    java_writes(java_local, path, first, opts)
    model.upsert(first)
    assert_catalog_read(
        java_catalog.read_table("java_cat_cow.trips"), hudi_rs_read(path), model.rows(), "trips"
    )

    more = [{**r, "city": "la"} for r in rows(range(30, 40), ts=2)]  # a new partition
    java_writes(java_local, path, more, opts)
    model.upsert(more)
    assert_catalog_read(
        java_catalog.read_table("java_cat_cow.trips"), hudi_rs_read(path), model.rows(), "trips"
    )

    sf, plan = java_catalog.query_with_plan(
        "SELECT * FROM java_cat_cow.trips WHERE city = 'sf'", refresh=("java_cat_cow.trips",)
    )
    want = [r for r in model.rows() if r["city"] == "sf"]
    assert_catalog_read(sf, only_city(hudi_rs_read(path), "sf"), want, "trips where city = 'sf'")
    assert PARTITION_FILTER.search(plan), plan


def test_java_reads_its_own_merge_on_read_registrations(java_local, java_catalog, hive_metastore, tmp_path):
    path, model = tmp_path / "rides", MorModel()
    opts = {
        **BASE,
        **MOR,
        "hoodie.table.name": "rides",
        **sync_options("rides", "java_cat_mor", hive_metastore.uri),
    }
    first = rows(range(30), ts=1)
    java_writes(java_local, path, first, opts)
    model.upsert(first)
    update = rows(range(0, 30, 3), ts=2)
    java_writes(java_local, path, update, opts)
    model.upsert(update)
    java_writes(
        java_local, path, rows(range(1, 30, 5), ts=3), {**opts, "hoodie.datasource.write.operation": "delete"}
    )
    model.delete(range(1, 30, 5))
    assert list(path.rglob("*.log.*")), "the updates and the delete are in log files"

    for name in ("rides_rt", "rides"):
        java = java_catalog.read_table(f"java_cat_mor.{name}")
        assert_catalog_read(java, hudi_rs_read(path), model.rows(), name)
    java = java_catalog.read_table("java_cat_mor.rides_ro")
    assert_catalog_read(java, hudi_rs_read_optimized(path), model.read_optimized(), "rides_ro")
