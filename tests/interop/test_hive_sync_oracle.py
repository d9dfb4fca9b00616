"""What Apache Hudi 0.15's own hive sync (mode hms) registers in a real metastore: the target our
sync will be compared with (docs/hudi/hive-sync.md).

Java (`java_local`: the tables are Java's own, timeline zone LOCAL; tests/interop/conftest.py says
why such tables need a JVM of their own) writes with `hoodie.datasource.hive_sync.*` pointed at
the test metastore (Hive 3.1.3, which Spark 3.5's Hive 2.3 client talks to), and the tables,
their storage and properties and their partitions are read back through our client
(hoodie_sink/table/catalog/hms_client.py); then the same rows are written and synced by us, and
the two registrations compared.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from hoodie_sink.table.client import write

pytestmark = [pytest.mark.compat, pytest.mark.interop]

META_COLUMNS = [
    "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name",
]  # fmt: skip
PARQUET_INPUT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
REALTIME_INPUT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def _rows(ids: list[int], city: str, ts: int) -> pa.Table:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array([city] * len(ids)),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": pa.array([i * 1.5 for i in ids], pa.float64()),
            "at": pa.array([at] * len(ids), pa.timestamp("us", tz="UTC")),
        }
    )


def _options(name: str, table_type: str, uri: str, database: str) -> dict:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.metastore.uris": uri,
        "hoodie.datasource.hive_sync.database": database,
    }


def _assert_hudi_shape(
    table, base: str, *, input_format: str, read_optimized: bool, last_commit: str
) -> None:
    assert table.table_type == "EXTERNAL_TABLE"
    # the meta columns first, the data columns as Hive types, the partition column only as a key;
    # a timestamp column is a bigint unless hoodie.datasource.hive_sync.support_timestamp=true
    assert [(c.name, c.type) for c in table.columns] == [(m, "string") for m in META_COLUMNS] + [
        ("id", "bigint"), ("ts", "bigint"), ("fare", "double"), ("at", "bigint"),
    ]  # fmt: skip
    assert [(c.name, c.type) for c in table.partition_columns] == [("city", "string")]
    assert table.location.rstrip("/").endswith(base)
    assert (table.storage.input_format, table.storage.output_format, table.storage.serde) == (
        input_format, PARQUET_OUTPUT, PARQUET_SERDE,
    )  # fmt: skip
    assert table.storage.serde_properties == {
        "path": base,
        "hoodie.query.as.ro.table": str(read_optimized).lower(),
        "serialization.format": "1",
    }
    params = dict(table.parameters)
    schema = json.loads(params.pop("spark.sql.sources.schema.part.0"))
    assert [f["name"] for f in schema["fields"]] == [*META_COLUMNS, "id", "ts", "fare", "at", "city"]
    assert {f["name"]: f["type"] for f in schema["fields"]}["at"] == "timestamp"
    assert params.pop("last_commit_completion_time_sync") >= last_commit
    assert params == {
        "EXTERNAL": "TRUE",
        "spark.sql.sources.provider": "hudi",
        "spark.sql.create.version": "3.5.1",
        "spark.sql.sources.schema.numParts": "1",
        "spark.sql.sources.schema.numPartCols": "1",
        "spark.sql.sources.schema.partCol.0": "city",
        "last_commit_time_sync": last_commit,
    }


def _last_commit(java, path) -> str:
    return max(t for t, action, _state in java.timeline(str(path)) if action in ("commit", "deltacommit"))


def test_java_registers_a_copy_on_write_table_once_with_its_partitions(java_local, hive_metastore, tmp_path):
    path = tmp_path / "trips"
    opts = _options("trips", "COPY_ON_WRITE", hive_metastore.uri, "java_cow")
    java_local.write(path, _rows([1, 2], "berlin", 1), opts)
    java_local.write(path, _rows([3], "paris", 2), opts)

    with hive_metastore.client() as client:
        database = client.get_database("java_cow")
        assert database is not None and database.description == "automatically created by hoodie"
        assert client.list_tables("java_cow") == ["trips"]
        table = client.get_table("java_cow", "trips")
        assert table is not None
        last = _last_commit(java_local, path)
        _assert_hudi_shape(
            table, str(path), input_format=PARQUET_INPUT, read_optimized=False, last_commit=last
        )
        parts = client.list_partitions("java_cow", "trips")
    assert [p.values for p in parts] == [("berlin",), ("paris",)]
    assert [p.location.rstrip("/").endswith(f"{path}/city={p.values[0]}") for p in parts] == [True, True]


def test_java_registers_a_merge_on_read_table_three_times(java_local, hive_metastore, tmp_path):
    path = tmp_path / "rides"
    opts = _options("rides", "MERGE_ON_READ", hive_metastore.uri, "java_mor")
    java_local.write(path, _rows([1, 2], "berlin", 1), opts)
    java_local.write(path, _rows([1], "berlin", 2), opts)  # an update: a log file

    last = _last_commit(java_local, path)
    with hive_metastore.client() as client:
        assert sorted(client.list_tables("java_mor")) == ["rides", "rides_ro", "rides_rt"]
        shapes = {
            "rides_ro": (PARQUET_INPUT, True),
            "rides_rt": (REALTIME_INPUT, False),
            "rides": (REALTIME_INPUT, False),  # hoodie.meta.sync.sync_snapshot_with_table_name
        }
        for name, (input_format, ro) in shapes.items():
            table = client.get_table("java_mor", name)
            assert table is not None
            _assert_hudi_shape(
                table, str(path), input_format=input_format, read_optimized=ro, last_commit=last
            )
            assert [p.values for p in client.list_partitions("java_mor", name)] == [("berlin",)]


def _comparable(table) -> dict:
    """A registered table without what differs by construction: its name, database, path, owner
    and the sync marker's values (the instants of two different tables)."""
    params = dict(table.parameters)
    for key in ("last_commit_time_sync", "last_commit_completion_time_sync"):
        assert params.pop(key)
    parts = int(params.pop("spark.sql.sources.schema.numParts"))
    schema = json.loads("".join(params.pop(f"spark.sql.sources.schema.part.{i}") for i in range(parts)))
    serde = dict(table.storage.serde_properties)
    serde.pop("path")
    return {
        "type": table.table_type,
        "columns": [(c.name, c.type.lower(), c.comment or "") for c in table.columns],
        "partition_columns": [(c.name, c.type.lower()) for c in table.partition_columns],
        "formats": (table.storage.input_format, table.storage.output_format, table.storage.serde),
        "serde": serde,
        "spark_schema": schema,
        "parameters": params,
    }


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_our_sync_registers_what_java_registers(java_local, hive_metastore, tmp_path, table_type):
    """The same rows and options, synced by Hudi 0.15 and by us: every table, column, format, serde
    property, table property and partition value the same (docs/hudi/hive-sync.md#what-our-sync-does)."""
    suffix = table_type.split("_")[0].lower()
    java_db, our_db = f"cmp_java_{suffix}", f"cmp_ours_{suffix}"
    batches = [_rows([1, 2], "berlin", 1), _rows([3], "paris", 2), _rows([1], "berlin", 3)]
    for batch in batches:
        java_local.write(tmp_path / "java", batch, _options("trips", table_type, hive_metastore.uri, java_db))
        ours = _options("trips", table_type, hive_metastore.uri, our_db)
        ours["hoodie.datasource.meta.sync.enable"] = ours.pop("hoodie.datasource.hive_sync.enable")
        ours["hoodie.meta_sync.spark.version"] = "3.5.1"  # what Hudi's Spark writer passes its sync
        write(batch, str(tmp_path / "ours"), ours)
    with hive_metastore.client() as client:
        names = sorted(client.list_tables(java_db))
        assert sorted(client.list_tables(our_db)) == names
        for name in names:
            java_table, our_table = client.get_table(java_db, name), client.get_table(our_db, name)
            assert _comparable(our_table) == _comparable(java_table), name
            java_parts = [p.values for p in client.list_partitions(java_db, name)]
            assert (
                [p.values for p in client.list_partitions(our_db, name)]
                == java_parts
                == [("berlin",), ("paris",)]
            )
