"""Our Hive metastore client (hoodie_sink/table/catalog/hms_client.py) against a real metastore.

The tables are shaped as Apache Hudi's hive sync registers them (docs/hudi/hive-sync.md): external,
Hudi's input formats, the Parquet serde with the table's path, Spark's data source properties.
"""

from __future__ import annotations

import dataclasses
import socket
import threading

import pytest

from hoodie_sink.errors import HoodieCatalogError
from hoodie_sink.table.catalog.hms_client import (
    HiveColumn,
    HiveDatabase,
    HiveMetastoreClient,
    HivePartition,
    HiveStorage,
    HiveTable,
)
from tests.support.s3_server import free_port

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
COW_INPUT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
RT_INPUT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"

META = tuple(
    HiveColumn(name, "string")
    for name in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                 "_hoodie_file_name")
)  # fmt: skip
COLUMNS = (*META, HiveColumn("id", "bigint"), HiveColumn("rider", "string"), HiveColumn("fare", "double"))


def _hudi_table(
    database: str, name: str, base: str, input_format: str = COW_INPUT, ro: bool | None = None
) -> HiveTable:
    serde = {"path": base}
    if ro is not None:
        serde["hoodie.query.as.ro.table"] = str(ro).lower()
    return HiveTable(
        database=database,
        name=name,
        columns=COLUMNS,
        partition_columns=(HiveColumn("city", "string"),),
        location=base,
        storage=HiveStorage(input_format, PARQUET_OUTPUT, PARQUET_SERDE, serde),
        parameters={
            "EXTERNAL": "TRUE",
            "spark.sql.sources.provider": "hudi",
            "last_commit_time_sync": "20260101000000000",
        },
    )  # fmt: skip


@pytest.fixture
def client(hive_metastore):
    with hive_metastore.client() as c:
        yield c


@pytest.fixture
def database(client, hive_metastore, request):
    name = "db_" + request.node.name.removeprefix("test_")[:40].lower()
    client.create_database(HiveDatabase(name, (hive_metastore.warehouse / f"{name}.db").as_uri()))
    return name


def test_the_metastore_answers_with_its_default_database(hive_metastore, client):
    assert "default" in client.list_databases()
    assert hive_metastore.process.poll() is None
    print(f"Hive metastore {hive_metastore.version} started in {hive_metastore.started_in_s:.1f} s")


def test_databases_are_created_read_back_and_missing_ones_are_none(client, hive_metastore):
    location = (hive_metastore.warehouse / "sales.db").as_uri()
    client.create_database(HiveDatabase("sales", location, "the sales tables", {"owner_team": "lake"}))
    got = client.get_database("sales")
    assert got is not None
    assert (got.name, got.description, got.parameters) == (
        "sales",
        "the sales tables",
        {"owner_team": "lake"},
    )
    assert got.location is not None and got.location.rstrip("/").endswith("sales.db")
    assert client.get_database("no_such_db") is None
    with pytest.raises(
        HoodieCatalogError, match=rf"Hive metastore {hive_metastore.uri}: create database sales"
    ):
        client.create_database(HiveDatabase("sales", location))


def test_a_hudi_shaped_table_with_partitions_round_trips(client, database, tmp_path):
    base = (tmp_path / "trips").as_uri()
    table = _hudi_table(database, "trips", base)
    client.create_table(table)

    got = client.get_table(database, "trips")
    assert got is not None
    assert got.columns == COLUMNS and got.partition_columns == table.partition_columns
    assert got.storage == table.storage
    assert got.table_type == "EXTERNAL_TABLE"
    assert got.parameters == table.parameters
    assert got.location.rstrip("/").endswith("/trips")
    assert client.get_table(database, "no_such_table") is None
    assert "trips" in client.list_tables(database)

    cities = ["amsterdam", "berlin", "chennai"]
    parts = [HivePartition((c,), f"{base}/city={c}") for c in cities]
    assert client.add_partitions(table, parts) == 3
    assert client.add_partitions(table, parts[:2]) == 0  # already there: left as they are
    listed = client.list_partitions(database, "trips")
    assert [p.values for p in listed] == [(c,) for c in cities]
    assert [p.location.rstrip("/").rsplit("/", 1)[1] for p in listed] == [f"city={c}" for c in cities]


def test_alter_table_adds_a_column_and_updates_the_sync_properties(client, database, tmp_path):
    base = (tmp_path / "trips").as_uri()
    table = _hudi_table(database, "trips", base)
    client.create_table(table)
    client.add_partitions(table, [HivePartition(("berlin",), f"{base}/city=berlin")])

    evolved = dataclasses.replace(
        table,
        columns=(*table.columns, HiveColumn("tip", "double", "added later")),
        parameters={**table.parameters, "last_commit_time_sync": "20260102000000000"},
    )
    client.alter_table(evolved, cascade=True)

    got = client.get_table(database, "trips")
    assert got is not None
    assert got.columns[-1] == HiveColumn("tip", "double", "added later")
    assert got.parameters["last_commit_time_sync"] == "20260102000000000"
    assert got.parameters["spark.sql.sources.provider"] == "hudi"
    assert got.storage == table.storage
    # the partition moved to another folder
    client.alter_partitions(evolved, [HivePartition(("berlin",), f"{base}/moved/city=berlin")])
    [berlin] = client.list_partitions(database, "trips")
    assert berlin.location.rstrip("/").endswith("/moved/city=berlin")

    missing = dataclasses.replace(evolved, name="no_such_table")
    with pytest.raises(HoodieCatalogError, match="alter table .*no_such_table: no such table"):
        client.alter_table(missing)


def test_partitions_are_dropped_without_their_files(client, database, tmp_path):
    base = (tmp_path / "trips").as_uri()
    table = _hudi_table(database, "trips", base)
    client.create_table(table)
    folder = tmp_path / "trips" / "city=berlin"
    folder.mkdir(parents=True)
    (folder / "data.parquet").write_bytes(b"not really")
    client.add_partitions(table, [HivePartition((c,), f"{base}/city={c}") for c in ("amsterdam", "berlin")])

    assert client.drop_partition(database, "trips", ["berlin"]) is True
    assert [p.values for p in client.list_partitions(database, "trips")] == [("amsterdam",)]
    assert (folder / "data.parquet").exists()  # external: the data stays
    assert client.drop_partition(database, "trips", ["berlin"]) is False

    client.drop_table(database, "trips")
    assert client.get_table(database, "trips") is None
    assert (folder / "data.parquet").exists()


def test_a_merge_on_read_table_is_registered_twice(client, database, tmp_path):
    """As Hudi registers a MOR table: `<name>_ro` (base files) and `<name>_rt` (merged with logs)."""
    base = (tmp_path / "rides").as_uri()
    ro = _hudi_table(database, "rides_ro", base, COW_INPUT, ro=True)
    rt = _hudi_table(database, "rides_rt", base, RT_INPUT, ro=False)
    for t in (ro, rt):
        client.create_table(t)
        client.add_partitions(t, [HivePartition(("berlin",), f"{base}/city=berlin")])
    got_ro, got_rt = client.get_table(database, "rides_ro"), client.get_table(database, "rides_rt")
    assert got_ro is not None and got_rt is not None
    assert got_ro.storage.input_format == COW_INPUT
    assert got_rt.storage.input_format == RT_INPUT
    assert got_ro.storage.serde_properties["hoodie.query.as.ro.table"] == "true"
    assert got_rt.storage.serde_properties["hoodie.query.as.ro.table"] == "false"
    assert sorted(client.list_tables(database)) == ["rides_ro", "rides_rt"]


def test_a_refused_call_names_the_metastore_and_the_call(client, hive_metastore, tmp_path):
    table = _hudi_table("no_such_db", "trips", (tmp_path / "t").as_uri())
    with pytest.raises(HoodieCatalogError) as e:
        client.create_table(table)
    assert f"Hive metastore {hive_metastore.uri}: create table no_such_db.trips refused" in str(e.value)
    # the connection is still good
    assert "default" in client.list_databases()


def test_a_metastore_that_is_down_is_named_in_the_error():
    uri = f"thrift://127.0.0.1:{free_port()}"
    client = HiveMetastoreClient(uri, timeout_s=5)
    with pytest.raises(HoodieCatalogError, match=rf"Hive metastore {uri}: cannot connect"):
        client.get_table("default", "trips")
    with pytest.raises(HoodieCatalogError, match="thrift://host:port"):
        HiveMetastoreClient("http://127.0.0.1:9083")


def test_a_second_uri_is_tried_when_the_first_is_down(hive_metastore):
    down = f"thrift://127.0.0.1:{free_port()}"
    with HiveMetastoreClient(f"{down},{hive_metastore.uri}", timeout_s=5) as client:
        assert "default" in client.list_databases()


def test_a_metastore_that_hangs_up_is_named_in_the_error():
    """A server that accepts the connection and closes it (a metastore dying mid-call): the call
    fails naming the URI, and the client reconnects for the next one."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        uri = f"thrift://127.0.0.1:{server.getsockname()[1]}"

        def hang_up() -> None:
            for _ in range(2):
                conn, _addr = server.accept()
                conn.close()

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        client = HiveMetastoreClient(uri, timeout_s=5)
        for _ in range(2):
            with pytest.raises(HoodieCatalogError, match=rf"Hive metastore {uri}: list databases failed"):
                client.list_databases()
        thread.join(timeout=5)
        client.close()
