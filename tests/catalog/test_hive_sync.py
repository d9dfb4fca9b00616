"""Our catalog sync (hoodie_sink/table/catalog/hive_sync.py) against a real Hive metastore: after
each commit, the table, its partitions and its marker are what Hudi 0.15 would register
(docs/hudi/hive-sync.md), kept incrementally, and a failed sync never undoes the commit.

The expected partitions come from a model of what was written, not from our own listing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_sink.errors import HoodieCatalogError, HoodieConfigError
from hoodie_sink.table.catalog.hive_sync import HoodieMetaSyncError, sync_table
from hoodie_sink.table.catalog.hms_client import HiveMetastoreClient
from hoodie_sink.table.client import write
from hoodie_sink.table.format.timeline.instant import format_instant
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from tests.support.s3_server import free_port

META = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]
PARQUET_INPUT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
REALTIME_INPUT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"


def _rows(ids: list[int], city: str, ts: int = 1, extra: dict | None = None) -> pa.Table:
    cols = {
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([city] * len(ids)),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "fare": pa.array([i * 1.5 for i in ids], pa.float64()),
    }
    for name, values in (extra or {}).items():
        cols[name] = values
    return pa.table(cols)


def _options(uri: str, database: str, table_type: str = "COPY_ON_WRITE", **more: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.meta.sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.metastore.uris": uri,
        "hoodie.datasource.hive_sync.database": database,
        **more,
    }


def _last_commit(path: Path) -> str:
    latest = ActiveTimeline.load(Storage(str(path))).latest_completed()
    assert latest is not None
    return latest.timestamp


def _partitions(client, database: str, table: str) -> dict[tuple[str, ...], str]:
    return {p.values: p.location for p in client.list_partitions(database, table)}


def _assert_partitions(client, database: str, table: str, path: Path, cities: set[str]) -> None:
    got = _partitions(client, database, table)
    assert sorted(got) == sorted((c,) for c in cities)
    for (city,), location in got.items():
        assert location.rstrip("/").endswith(f"{path}/city={city}")


def test_a_copy_on_write_table_is_registered_as_hudi_registers_it(hive_metastore, tmp_path):
    path = tmp_path / "trips"
    opts = _options(hive_metastore.uri, "ours_cow")
    write(_rows([1, 2], "berlin"), str(path), opts)
    write(_rows([3], "paris", 2), str(path), opts)
    with hive_metastore.client() as client:
        assert client.get_database("ours_cow").description == "automatically created by hoodie"
        assert client.list_tables("ours_cow") == ["trips"]
        table = client.get_table("ours_cow", "trips")
        _assert_partitions(client, "ours_cow", "trips", path, {"berlin", "paris"})
    assert table.table_type == "EXTERNAL_TABLE"
    assert [(c.name, c.type) for c in table.columns] == [(m, "string") for m in META] + [
        ("id", "bigint"), ("ts", "bigint"), ("fare", "double"),
    ]  # fmt: skip
    assert [(c.name, c.type) for c in table.partition_columns] == [("city", "string")]
    assert (table.storage.input_format, table.storage.serde_properties) == (
        PARQUET_INPUT,
        {"path": str(path), "hoodie.query.as.ro.table": "false", "serialization.format": "1"},
    )
    params = dict(table.parameters)
    schema = json.loads(params.pop("spark.sql.sources.schema.part.0"))
    assert [f["name"] for f in schema["fields"]] == [*META, "id", "ts", "fare", "city"]
    assert {f["name"]: f["type"] for f in schema["fields"]}["id"] == "long"
    assert params.pop("last_commit_completion_time_sync") >= _last_commit(path)
    assert params == {
        "EXTERNAL": "TRUE",
        "spark.sql.sources.provider": "hudi",
        "spark.sql.sources.schema.numParts": "1",
        "spark.sql.sources.schema.numPartCols": "1",
        "spark.sql.sources.schema.partCol.0": "city",
        "last_commit_time_sync": _last_commit(path),
    }


def test_a_merge_on_read_table_is_registered_three_times(hive_metastore, tmp_path):
    path = tmp_path / "rides"
    opts = _options(hive_metastore.uri, "ours_mor", "MERGE_ON_READ", **{"hoodie.table.name": "rides"})
    write(_rows([1, 2], "berlin"), str(path), opts)
    write(_rows([1], "berlin", 2), str(path), opts)  # an update: a log file
    roles = {
        "rides_ro": (PARQUET_INPUT, "true"),
        "rides_rt": (REALTIME_INPUT, "false"),
        "rides": (REALTIME_INPUT, "false"),
    }
    with hive_metastore.client() as client:
        assert sorted(client.list_tables("ours_mor")) == sorted(roles)
        for name, (input_format, ro) in roles.items():
            table = client.get_table("ours_mor", name)
            assert table.storage.input_format == input_format
            assert table.storage.serde_properties["hoodie.query.as.ro.table"] == ro
            assert table.parameters["last_commit_time_sync"] == _last_commit(path)
            _assert_partitions(client, "ours_mor", name, path, {"berlin"})


def test_partitions_follow_the_commits_incrementally_and_overwrites_drop_them(hive_metastore, tmp_path):
    """A model of the live partitions against the metastore after every commit: new partitions
    added, an insert_overwrite_table's dropped ones dropped, one re-created afterwards added again."""
    path = tmp_path / "trips"
    opts = _options(hive_metastore.uri, "ours_incr")
    live: set[str] = set()
    steps = [
        ("upsert", ["a", "b"]),
        ("upsert", ["c"]),
        ("upsert", ["a"]),
        ("insert_overwrite_table", ["b", "d"]),  # a, c are gone
        ("upsert", ["a"]),  # a comes back
        ("insert_overwrite", ["d"]),  # partition-level: nothing dropped
    ]
    for i, (operation, cities) in enumerate(steps):
        data = pa.concat_tables([_rows([i * 100 + j], city, i) for j, city in enumerate(cities)])
        write(data, str(path), {**opts, "hoodie.datasource.write.operation": operation})
        live = set(cities) if operation == "insert_overwrite_table" else live | set(cities)
        with hive_metastore.client() as client:
            _assert_partitions(client, "ours_incr", "trips", path, live)
            assert client.get_table("ours_incr", "trips").parameters["last_commit_time_sync"] == _last_commit(
                path
            )


def test_an_added_column_reaches_the_table_and_its_partitions(hive_metastore, tmp_path):
    path = tmp_path / "trips"
    opts = _options(hive_metastore.uri, "ours_evolve")
    write(_rows([1], "berlin"), str(path), opts)
    tips = pa.array([0.5], pa.float64())
    write(_rows([2], "paris", 2, {"tip": tips}), str(path), opts)
    with hive_metastore.client() as client:
        table = client.get_table("ours_evolve", "trips")
        assert [c.name for c in table.columns][-1] == "tip"
        schema = json.loads(table.parameters["spark.sql.sources.schema.part.0"])
        assert [f["name"] for f in schema["fields"]][-2:] == ["tip", "city"]


def test_a_failed_sync_leaves_the_commit_standing_and_the_next_commit_catches_up(
    hive_metastore, tmp_path, caplog
):
    path = tmp_path / "trips"
    opts = _options(hive_metastore.uri, "ours_retry")
    write(_rows([1], "berlin"), str(path), opts)
    dead = _options(f"thrift://127.0.0.1:{free_port()}", "ours_retry")
    with pytest.raises(HoodieMetaSyncError, match=r"catalog sync after commit \d+ failed.*The commit stands"):
        write(_rows([2], "paris", 2), str(path), dead)
    failed_commit = _last_commit(path)
    with hive_metastore.client() as client:  # the metastore still shows the first commit
        _assert_partitions(client, "ours_retry", "trips", path, {"berlin"})
        assert client.get_table("ours_retry", "trips").parameters["last_commit_time_sync"] < failed_commit
    with caplog.at_level(logging.ERROR):  # ignore_exceptions: logged, not raised
        write(
            _rows([3], "rome", 3),
            str(path),
            {**dead, "hoodie.datasource.hive_sync.ignore_exceptions": "true"},
        )
    assert "catalog sync after commit" in caplog.text
    write(_rows([4], "oslo", 4), str(path), opts)  # the next good sync adds paris and rome too
    with hive_metastore.client() as client:
        _assert_partitions(client, "ours_retry", "trips", path, {"berlin", "paris", "rome", "oslo"})
        assert client.get_table("ours_retry", "trips").parameters["last_commit_time_sync"] == _last_commit(
            path
        )


def test_sync_of_an_existing_table_and_the_command_line(hive_metastore, tmp_path):
    path = tmp_path / "trips"
    plain = {k: v for k, v in _options(hive_metastore.uri, "x").items() if "sync" not in k}
    write(_rows([1], "berlin"), str(path), plain)
    write(_rows([2], "paris"), str(path), plain)
    result = sync_table(str(path), {"hoodie.datasource.hive_sync.metastore.uris": hive_metastore.uri,
                                    "hoodie.datasource.hive_sync.database": "ours_cli"})  # fmt: skip
    assert [(t.name, t.created, t.partitions_added) for t in result.tables] == [("trips", True, 2)]
    write(_rows([3], "rome"), str(path), plain)
    cli = [sys.executable, "-m", "hoodie_sink.cli", "sync", str(path), "--json",
           "-o", f"hoodie.datasource.hive_sync.metastore.uris={hive_metastore.uri}",
           "-o", "hoodie.datasource.hive_sync.database=ours_cli"]  # fmt: skip
    out = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tables"][0]["partitions_added"] == 1
    with hive_metastore.client() as client:
        _assert_partitions(client, "ours_cli", "trips", path, {"berlin", "paris", "rome"})


def test_a_table_registered_elsewhere_is_not_taken_over(hive_metastore, tmp_path):
    opts = _options(hive_metastore.uri, "ours_clash")
    write(_rows([1], "berlin"), str(tmp_path / "one"), opts)
    with pytest.raises(HoodieMetaSyncError, match="is registered at .*one.*not at this table's path"):
        write(_rows([1], "berlin"), str(tmp_path / "two"), opts)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"hoodie.datasource.hive_sync.mode": "jdbc"}, "mode hms"),
        ({"hoodie.datasource.hive_sync.mode": None}, "hive_sync.mode' is not set"),
        (
            {"hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"},
            "other sync tools",
        ),
        ({"hoodie.datasource.hive_sync.partition_extractor_class": "com.acme.Mine"}, "partition values"),
        ({"hoodie.datasource.hive_sync.sync_comment": "true"}, "column comments"),
        ({"hoodie.datasource.hive_sync.tabel": "x"}, "Did you mean 'hoodie.datasource.hive_sync.table'"),
    ],
)
def test_sync_options_we_do_not_implement_are_refused_before_writing(tmp_path, extra, message):
    opts = _options("thrift://127.0.0.1:9", "db", **{k: v for k, v in extra.items() if v is not None})
    opts = {k: v for k, v in opts.items() if extra.get(k, "") is not None}
    with pytest.raises(HoodieConfigError, match=message):
        write(_rows([1], "berlin"), str(tmp_path / "t"), opts)
    assert not (tmp_path / "t" / ".hoodie").exists()


class _FailingPartitions(HiveMetastoreClient):
    """A metastore connection whose partition calls fail, as a metastore that goes away mid-sync."""

    def add_partitions(self, table, partitions):
        raise HoodieCatalogError("metastore gone")


def test_a_sync_cut_short_moves_no_marker_and_the_next_one_finishes_it(hive_metastore, tmp_path):
    path = tmp_path / "trips"
    plain = {k: v for k, v in _options(hive_metastore.uri, "x").items() if "sync" not in k}
    sync = {"hoodie.datasource.hive_sync.metastore.uris": hive_metastore.uri,
            "hoodie.datasource.hive_sync.database": "ours_cut"}  # fmt: skip
    write(_rows([1], "berlin"), str(path), plain)
    sync_table(str(path), sync)
    write(_rows([2], "paris"), str(path), plain)
    before = _last_commit(path)
    write(_rows([3], "rome"), str(path), plain)
    with pytest.raises(HoodieCatalogError, match="metastore gone"):
        sync_table(str(path), sync, client_factory=_FailingPartitions)
    with hive_metastore.client() as client:  # the table was checked, its marker not moved
        assert client.get_table("ours_cut", "trips").parameters["last_commit_time_sync"] < before
        _assert_partitions(client, "ours_cut", "trips", path, {"berlin"})
    sync_table(str(path), sync)
    with hive_metastore.client() as client:
        _assert_partitions(client, "ours_cut", "trips", path, {"berlin", "paris", "rome"})
        assert client.get_table("ours_cut", "trips").parameters["last_commit_time_sync"] == _last_commit(path)


def test_partitions_with_characters_hive_escapes_are_found_again(hive_metastore, tmp_path):
    """An incremental sync looks partitions up by Hive's escaped names: a commit into existing
    partitions with odd values adds nothing, a new one is added once."""
    path = tmp_path / "trips"
    plain = {k: v for k, v in _options(hive_metastore.uri, "x").items() if "sync" not in k}
    sync = {
        "hoodie.datasource.hive_sync.metastore.uris": hive_metastore.uri,
        "hoodie.datasource.hive_sync.database": "ours_odd",
        "hoodie.datasource.hive_sync.batch_num": "3",
    }  # fmt: skip: 7 partitions in calls of 3
    odd = ["a b", "x:y", "p%q", "u=v", "s#t", "Grüße", "q?"]
    for i, city in enumerate(odd):
        write(_rows([i], city), str(path), plain)
    first = sync_table(str(path), sync)
    assert first.tables[0].partitions_added == len(odd)
    for i, city in enumerate(odd):
        write(_rows([i], city, 2), str(path), plain)  # updates in place
    write(_rows([99], "new one"), str(path), plain)
    again = sync_table(str(path), sync)
    assert (again.tables[0].full, again.tables[0].partitions_added, again.tables[0].partitions_altered) == (
        False,
        1,
        0,
    )
    with hive_metastore.client() as client:
        assert sorted(v for (v,) in _partitions(client, "ours_odd", "trips")) == sorted([*odd, "new one"])


def test_date_paths_of_a_timestamp_key_and_several_partition_fields(hive_metastore, tmp_path):
    """SinglePartPartitionValueExtractor on a timestamp key generator's `yyyy/MM/dd` paths (a
    string key: the value is a date, not the column's epoch millis) and MultiPartKeysValueExtractor
    on two plain partition fields."""
    day = 86_400_000
    stamped = {**_options(hive_metastore.uri, "ours_paths"), "hoodie.table.name": "stamped",
               "hoodie.datasource.write.partitionpath.field": "ts",
               "hoodie.datasource.write.hive_style_partitioning": "false",
               "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
               "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
               "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
               "hoodie.keygen.timebased.timezone": "UTC"}  # fmt: skip
    write(_rows([1], "berlin", 20_000 * day), str(tmp_path / "stamped"), stamped)
    write(_rows([2], "paris", 20_001 * day), str(tmp_path / "stamped"), stamped)
    two = {**_options(hive_metastore.uri, "ours_paths"), "hoodie.table.name": "two",
           "hoodie.datasource.write.partitionpath.field": "city,ts",
           "hoodie.datasource.write.hive_style_partitioning": "false"}  # fmt: skip
    write(_rows([1], "berlin", 7), str(tmp_path / "two"), two)
    with hive_metastore.client() as client:
        table = client.get_table("ours_paths", "stamped")
        assert [(c.name, c.type) for c in table.partition_columns] == [("ts", "string")]
        assert [p.values for p in client.list_partitions("ours_paths", "stamped")] == [
            ("2024/10/04",),
            ("2024/10/05",),
        ]
        table = client.get_table("ours_paths", "two")
        assert [(c.name, c.type) for c in table.partition_columns] == [("city", "string"), ("ts", "bigint")]
        assert [p.values for p in client.list_partitions("ours_paths", "two")] == [("berlin", "7")]


def test_an_instant_that_completed_after_the_last_sync_but_is_older_than_its_marker_is_synced(
    hive_metastore, tmp_path
):
    """Two writers: the last sync saw the newer instant (its time is the marker) while the older one
    was still writing. Its partition is found by completion time (docs/hudi/hive-sync.md#what-our-sync-does)."""
    path = tmp_path / "trips"
    plain = {k: v for k, v in _options(hive_metastore.uri, "x").items() if "sync" not in k}
    sync = {"hoodie.datasource.hive_sync.metastore.uris": hive_metastore.uri,
            "hoodie.datasource.hive_sync.database": "ours_late"}  # fmt: skip
    times = []
    for i, city in enumerate(["a", "b", "c"]):
        write(_rows([i], city), str(path), plain)
        times.append(_last_commit(path))
    sync_table(str(path), sync)

    def completed(ts: str) -> str:
        mtime = (path / ".hoodie" / f"{ts}.commit").stat().st_mtime
        return format_instant(datetime.fromtimestamp(mtime, tz=timezone.utc), "UTC")

    def forget_b(completion: str) -> None:
        """The metastore as a sync would have left it had `b`'s commit still been writing."""
        with hive_metastore.client() as client:
            client.drop_partition("ours_late", "trips", ["b"])
            table = client.get_table("ours_late", "trips")
            params = {**table.parameters, "last_commit_completion_time_sync": completion}
            client.alter_table(dataclasses.replace(table, parameters=params))

    forget_b(completed(times[2]))  # b completed before the marker's completion: not looked at again
    assert sync_table(str(path), sync).tables[0].partitions_added == 0
    forget_b(completed(times[0]))  # b completed after the last sync's latest completion: found
    result = sync_table(str(path), sync).tables[0]
    assert (result.full, result.partitions_added) == (False, 1)
    with hive_metastore.client() as client:
        _assert_partitions(client, "ours_late", "trips", path, {"a", "b", "c"})
