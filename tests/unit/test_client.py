"""End to end through the engine's own Arrow API (no Spark): write, read back, fail, recover."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieKeyError, HoodieSchemaError
from hoodie_sink.table.format.timeline.instant import ROLLBACK
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator
from hoodie_sink.table.write.bulk_insert_task import BulkInsertTask
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import assert_table_matches, hudi_rs_timeline, read_both

UTC = dt.timezone.utc


def trips(n: int, start: int = 0, cities=("sf", "nyc", "chennai")) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array([cities[i % len(cities)] for i in ids]),
            "fare": pa.array([i * 1.5 for i in ids]),
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in ids],
                           pa.timestamp("us", tz="UTC")),
        }
    )  # fmt: skip


OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.operation": "bulk_insert",
}


def rows(t: pa.Table) -> list[dict]:
    return t.to_pylist()


def data_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


@pytest.mark.parametrize("operation", ["bulk_insert", "insert"])
def test_write_and_read_back(tmp_path, operation):
    path = tmp_path / "t"
    data = trips(1000)
    md = hoodie_sink.write(data, str(path), {**OPTS, "hoodie.datasource.write.operation": operation})
    assert md.totals()["numInserts"] == 1000
    theirs = assert_table_matches(path, rows(data))
    tl = hudi_rs_timeline(path)
    commits = tl.get_completed_commits()
    assert len(commits) == 1
    instant = commits[0].timestamp
    assert set(theirs.column("_hoodie_commit_time").to_pylist()) == {instant}
    # meta columns: key, partition path, file name, seqno
    for r in theirs.to_pylist()[:50]:
        assert r["_hoodie_record_key"] == str(r["id"])
        assert r["_hoodie_partition_path"] == r["city"]
        assert r["_hoodie_commit_seqno"].startswith(f"{instant}_0_")
        assert r["_hoodie_file_name"].endswith(f"_{instant}.parquet")
    meta = json.loads(tl.get_instant_metadata_in_json(commits[0]))
    assert meta["operationType"] == operation.upper()
    assert "schema" in meta["extraMetadata"]
    assert not (path / ".hoodie" / ".temp" / instant).exists()
    for part in ("sf", "nyc", "chennai"):
        assert (path / part / ".hoodie_partition_metadata").exists()


def test_bulk_insert_sorts_by_key_and_splits_files(tmp_path):
    path = tmp_path / "t"
    n = 240000
    data = trips(n).take(pa.array(list(reversed(range(n)))))
    hoodie_sink.write(data, str(path), {**OPTS, "hoodie.parquet.max.file.size": str(1024 * 1024)})
    files = data_files(path / "sf")
    assert len(files) >= 2
    for f in files:
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert keys == sorted(keys)
        assert f.stat().st_size < 1024 * 1024 * 1.2
        footer = pq.ParquetFile(f).metadata.metadata
        assert footer[b"hoodie_min_record_key"].decode() == keys[0]
        assert footer[b"hoodie_max_record_key"].decode() == keys[-1]
        assert footer[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
    assert_table_matches(path, rows(data))


def test_second_insert_appends_and_overwrite_replaces(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(100), str(path), OPTS)
    hoodie_sink.write(trips(50, start=100), str(path), OPTS)
    assert_table_matches(path, rows(trips(150)))
    hoodie_sink.write(trips(10, start=1000), str(path), OPTS, mode="overwrite")
    assert_table_matches(path, rows(trips(10, start=1000)))
    tl = hudi_rs_timeline(path)
    assert len(tl.get_completed_replacecommits()) == 1
    meta = json.loads(tl.get_instant_metadata_in_json(tl.get_completed_replacecommits()[0]))
    assert meta["operationType"] == "INSERT_OVERWRITE_TABLE"
    assert sorted(meta["partitionToReplaceFileIds"]) == ["chennai", "nyc", "sf"]


def test_insert_overwrite_replaces_only_written_partitions(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(90), str(path), OPTS)
    new_sf = trips(3, start=500, cities=("sf",))
    hoodie_sink.write(new_sf, str(path), {**OPTS, "hoodie.datasource.write.operation": "insert_overwrite"})
    kept = [r for r in rows(trips(90)) if r["city"] != "sf"]
    assert_table_matches(path, kept + rows(new_sf))


def all_types_table() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "b": pa.array([True, None, False]),
            "i8": pa.array([1, -2, None], pa.int8()),
            "i16": pa.array([300, None, -300], pa.int16()),
            "i64": pa.array([2**40, None, -1], pa.int64()),
            "f32": pa.array([1.5, None, 2.25], pa.float32()),
            "f64": pa.array([3.14159, 2.5, None]),
            "dec": pa.array([decimal.Decimal("12345.67890"), None, decimal.Decimal("-1.00001")], pa.decimal128(10, 5)),
            "s": pa.array(["a", None, "ü"]),
            "bin": pa.array([b"x", None, b"\x00\xff"]),
            "d": pa.array([dt.date(2023, 4, 1), None, dt.date(1970, 1, 1)]),
            "ts": pa.array([dt.datetime(2023, 4, 1, 12, 1, tzinfo=UTC), None, dt.datetime(1999, 1, 1, tzinfo=UTC)],
                           pa.timestamp("us", tz="UTC")),
            "arr": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
            "arr_s": pa.array([[{"x": "r", "y": 1}], None, [{"x": None, "y": 2}]],
                              pa.list_(pa.struct([("x", pa.string()), ("y", pa.int32())]))),
            "m": pa.array([[("k1", 1.0)], None, []], pa.map_(pa.string(), pa.float64())),
            "st": pa.array([{"f1": "a", "c": {"g": 1.0}}, None, {"f1": None, "c": None}],
                           pa.struct([("f1", pa.string()), ("c", pa.struct([("g", pa.float64())]))])),
        }
    )  # fmt: skip


def test_all_types_round_trip(tmp_path):
    path = tmp_path / "t"
    data = all_types_table()
    hoodie_sink.write(data, str(path), {"hoodie.datasource.write.recordkey.field": "id"})
    theirs, _ours = read_both(path)
    # int8/int16 are stored as plain INT32 (Avro int), like Apache Hudi.
    expected = data.to_pylist()
    got = sorted(theirs.drop_columns([c for c in theirs.column_names if c.startswith("_hoodie")]).to_pylist(),
                 key=lambda r: r["id"])  # fmt: skip
    for r in got:
        r["m"] = r["m"] if r["m"] is None else [tuple(x) for x in r["m"]]
    for r in expected:
        r["m"] = r["m"] if r["m"] is None else [tuple(x) for x in r["m"]]
    assert got == expected
    assert theirs.schema.field("i8").type == pa.int32()


def test_timestamp_ntz_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "t"
    data = pa.table({"id": [1], "t": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))})
    with pytest.raises(HoodieSchemaError, match="'?t'?"):
        hoodie_sink.write(data, str(path), {"hoodie.datasource.write.recordkey.field": "id"})
    assert not path.exists()


def test_errors_name_the_option_or_column(tmp_path):
    path = str(tmp_path / "t")
    data = trips(5)
    with pytest.raises(HoodieConfigError, match="hoodie.datasource.write.recordkey.fieldd"):
        hoodie_sink.write(data, path, {"hoodie.datasource.write.recordkey.fieldd": "id"})
    with pytest.raises(HoodieKeyError, match="'nope'"):
        hoodie_sink.write(data, path, {"hoodie.datasource.write.recordkey.field": "nope"})
    with pytest.raises(HoodieKeyError, match="'region'"):
        hoodie_sink.write(data, path, {**OPTS, "hoodie.datasource.write.partitionpath.field": "region"})
    with pytest.raises(HoodieConfigError, match="hoodie.parquet.max.file.size"):
        hoodie_sink.write(data, path, {**OPTS, "hoodie.parquet.max.file.size": "big"})
    with pytest.raises(HoodieConfigError, match="hoodie.datasource.write.operation"):
        hoodie_sink.write(data, path, {**OPTS, "hoodie.datasource.write.operation": "merge"})
    assert not os.path.exists(path)
    nulls = trips(2).set_column(0, "id", pa.array([1, None], pa.int64()))
    with pytest.raises(HoodieKeyError, match="id"):
        hoodie_sink.write(nulls, path, OPTS)
    assert not os.path.exists(path)  # the failed first write leaves nothing behind
    hoodie_sink.write(data, path, OPTS)
    with pytest.raises(HoodieKeyError, match="id"):
        hoodie_sink.write(nulls, path, OPTS)
    assert_table_matches(path, rows(data))  # a failed later write changes nothing


def test_contradicting_table_settings_are_refused(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(trips(5), path, OPTS)
    with pytest.raises(HoodieConfigError, match="hoodie.datasource.write.recordkey.field"):
        hoodie_sink.write(trips(5), path, {**OPTS, "hoodie.datasource.write.recordkey.field": "fare"})
    with pytest.raises(HoodieConfigError, match="hoodie.datasource.write.partitionpath.field"):
        hoodie_sink.write(trips(5), path, {**OPTS, "hoodie.datasource.write.partitionpath.field": "id"})
    # Unset table-level options are taken from hoodie.properties.
    hoodie_sink.write(trips(5, start=5), path, {"hoodie.datasource.write.operation": "insert"})
    assert_table_matches(path, rows(trips(10)))


def test_crashed_write_is_rolled_back_by_the_next_writer(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(20), str(path), OPTS)
    # A writer that dies after writing files, before its commit: its heartbeat stops.
    beat = {"hoodie.client.heartbeat.interval_in_ms": "200", "hoodie.client.heartbeat.tolerable.misses": "0"}
    cfg = WriteConfig.from_options({**OPTS, **beat}, path=str(path))
    ctx = coordinator.begin(cfg, trips(1).schema)
    BulkInsertTask(ctx, TaskIdentity(0, 1, 7)).write(trips(30, start=100).to_batches())
    assert len(data_files(path)) > 3
    assert_table_matches(path, rows(trips(20)))  # pending files are invisible
    time.sleep(0.3)  # the heartbeat expires: the next writer rolls the instant back
    hoodie_sink.write(trips(5, start=200), str(path), {**OPTS, **beat})
    assert not any(ctx.instant in p.name for p in data_files(path))
    assert not (path / ".hoodie" / f"{ctx.instant}.commit.requested").exists()
    assert_table_matches(path, rows(trips(20)) + rows(trips(5, start=200)))


def test_failed_commit_leaves_table_as_before(tmp_path, monkeypatch):
    path = tmp_path / "t"
    hoodie_sink.write(trips(20), str(path), OPTS)
    before = sorted(str(p) for p in path.rglob("*"))
    publish = coordinator.TimelineStore.complete

    def failing_publish(self, inflight, data):
        # the abort's rollback instant, and the metadata table's deltacommits, publish as usual
        if inflight.action == ROLLBACK or self.storage.base_uri != str(path):
            return publish(self, inflight, data)
        raise OSError(f"test failure injected before completing {inflight.timestamp}")

    # the coordinator's publish of the completed instant fails: the files are written, the commit is not
    monkeypatch.setattr(coordinator.TimelineStore, "complete", failing_publish)
    with pytest.raises(Exception, match="test failure injected"):
        hoodie_sink.write(trips(5, start=50), str(path), OPTS)
    monkeypatch.undo()
    timeline = Timeline.load(Storage(str(path)))
    (rollback,) = timeline.completed((ROLLBACK,))  # the undo is on the timeline, as Java keeps it
    rolled_back = {rollback.timestamp}
    after = [p for p in sorted(str(p) for p in path.rglob("*")) if not any(t in p for t in rolled_back)]
    # the metadata table records the rollback in its own deltacommit: checked by assert_table_matches
    assert [p for p in after if "/.hoodie/metadata" not in p] == [
        p for p in before if "/.hoodie/metadata" not in p
    ]
    assert_table_matches(path, rows(trips(20)))


def test_orphans_of_failed_attempts_are_deleted_at_commit(tmp_path):
    path = tmp_path / "t"
    cfg = WriteConfig.from_options(OPTS, path=str(path))
    ctx = coordinator.begin(cfg, trips(1).schema)
    BulkInsertTask(ctx, TaskIdentity(0, 1, 1, attempt_number=0)).write(
        trips(10).to_batches()
    )  # "failed" attempt
    good = BulkInsertTask(ctx, TaskIdentity(0, 1, 2, attempt_number=1)).write(trips(10).to_batches())
    coordinator.complete(ctx, good.write_stats)
    assert len(data_files(path)) == 3
    assert_table_matches(path, rows(trips(10)))
    assert Timeline.load(Storage(str(path))).pending() == []
