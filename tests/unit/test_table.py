"""`hoodie_sink.Table`: every method once, on small tables the engine wrote."""

from __future__ import annotations

import json

import pytest

import hoodie_sink
from hoodie_sink import HoodieConfigError, HoodieTableError, Table
from hoodie_sink.table import client
from hoodie_sink.table.format.heartbeat import stop_heartbeat
from tests.unit.test_client import OPTS, trips

UPSERT = {**OPTS, "hoodie.datasource.write.operation": "upsert"}
MOR = {**UPSERT, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false"}
QUIET = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def ids(t) -> list[int]:
    return sorted(t.column("id").to_pylist())


def _three_commits(path: str, opts: dict) -> list[str]:
    """ids 0..11, then 4..15 (updates 4..11), then 8..19: returns the three instants."""
    for i in range(3):
        hoodie_sink.write(trips(12, start=i * 4), path, {**opts, **QUIET})
    return [c.instant.timestamp for c in Table(path).commits()]


def test_open_by_path_and_options(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(HoodieTableError):
        Table(path)
    hoodie_sink.write(trips(3), path, OPTS)
    table = hoodie_sink.Table(path, {"fs.s3a.endpoint": "http://unused:9000"})  # S3 settings accepted
    assert table.table_type == "COPY_ON_WRITE" and not table.merge_on_read and "Table(" in repr(table)
    assert {"id", "city", "_hoodie_commit_time"} <= set(table.schema().names)
    with pytest.raises(HoodieConfigError, match="fs.s3a.bogus"):
        Table(path, {"fs.s3a.bogus": "x"})


def test_snapshot_time_travel_incremental_and_change_feed(tmp_path):
    path = str(tmp_path / "t")
    t1, t2, t3 = _three_commits(path, UPSERT)
    table = Table(path)
    assert ids(table.snapshot()) == list(range(20))
    assert ids(table.snapshot(as_of=t1)) == list(range(12))  # time travel
    assert table.snapshot(columns=["id"], filters=[("id", "<", 3)]).column_names == ["id"]
    assert ids(table.snapshot(filters=[("id", "<", 3)])) == [0, 1, 2]
    assert ids(table.snapshot(partition_filter=lambda p: p == "sf")) == list(range(0, 20, 3))
    # incremental: the records written in (t1, t3], as they are at t3
    assert ids(table.incremental(t1)) == list(range(4, 20))
    assert ids(table.incremental(t1, t2)) == list(range(4, 16))
    feed = table.changes(t2)
    assert sorted(feed.column("op").to_pylist()) == ["i"] * 4 + ["u"] * 8
    assert {json.loads(a)["id"] for a in feed.column("after").to_pylist()} == set(range(8, 20))
    # read(): what Hudi's read options ask for, given to the table or to the call
    assert ids(table.read()) == list(range(20))
    assert ids(Table(path, {"as.of.instant": t1}).read()) == list(range(12))
    incremental = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": t1,
    }
    assert ids(table.read(incremental, columns=["id"])) == list(range(4, 20))
    cdc = {**incremental, "hoodie.datasource.query.incremental.format": "cdc"}
    assert table.read(cdc).num_rows == 16 + 8  # t2: 4 inserts + 8 updates; t3: 4 inserts + 8 updates
    assert ids(hoodie_sink.read(path, incremental)) == list(range(4, 20))  # the same path


def test_timeline_commits_and_file_groups(tmp_path):
    path = str(tmp_path / "t")
    t1, t2, t3 = _three_commits(path, UPSERT)
    table = Table(path)
    assert [i.timestamp for i in table.timeline().completed()] == [t1, t2, t3]
    history = table.history()
    assert [(h.instant, h.action, h.state) for h in history] == [
        (t, "commit", "completed") for t in (t1, t2, t3)
    ]
    assert all(h.requested and h.inflight and h.completed for h in history)
    commits = table.commits()
    assert [c.instant.timestamp for c in commits] == [t1, t2, t3]
    assert commits[1].metadata.totals()["numUpdateWrites"] == 8
    assert table.commit(t2).metadata.operation_type == "UPSERT"
    with pytest.raises(HoodieTableError, match="no completed write instant 1999"):
        table.commit("1999")
    latest = table.latest_file_slices()
    groups = table.file_groups()
    assert {(s.file_id, s.base_instant) for s in latest} == {
        (g.file_id, g.slices[-1].base_instant) for g in groups
    }
    assert sum(len(g.slices) for g in groups) > len(latest)  # older slices of the updated groups
    assert sum(r.rows for r in table.live_rows()) == 20
    assert table.replaced_file_groups() == {}


def test_merge_on_read_live_rows_compaction_and_its_history(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(trips(12), path, {**MOR, "hoodie.datasource.write.operation": "bulk_insert"})
    hoodie_sink.write(trips(12, start=6), path, MOR)  # 6 updates, 6 inserts
    hoodie_sink.write(trips(2), path, {**MOR, "hoodie.datasource.write.operation": "delete"})
    table = Table(path)
    assert table.merge_on_read
    assert sum(r.rows for r in table.live_rows()) == 16 == table.snapshot().num_rows
    assert table.snapshot(read_optimized=True).num_rows != 16  # the base files alone: deletes in logs
    planned = table.schedule_compaction()
    assert planned is not None
    (done,) = table.compact()
    assert done.instant == planned and done.log_files >= 1
    assert table.compact() == []  # nothing left with logs
    (entry,) = [h for h in table.history() if h.instant == planned]  # one entry, not two
    assert entry.action == "compaction" and entry.state == "completed" and entry.requested
    assert sum(r.rows for r in table.live_rows()) == 16 == table.snapshot(read_optimized=True).num_rows


def test_cluster_clean_archive(tmp_path):
    path = str(tmp_path / "t")
    for i in range(4):
        hoodie_sink.write(
            trips(6, start=i * 6), path, {**OPTS, **QUIET, "hoodie.datasource.write.operation": "append"}
        )
    table = Table(path, QUIET)
    result = table.cluster({"hoodie.clustering.plan.strategy.sort.columns": "fare"})
    assert result is not None and result.rows == 24 and result.output_files == 3
    assert len(table.replaced_file_groups()) == 12
    assert table.cluster() is None  # nothing to cluster
    for _ in range(6):
        hoodie_sink.write(trips(6), path, {**UPSERT, **QUIET})
    cleaned = table.clean({"hoodie.cleaner.commits.retained": "2"})
    assert cleaned.instant and cleaned.files_deleted > 0
    archived = table.archive({"hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "4",
                              "hoodie.cleaner.commits.retained": "2"})  # fmt: skip
    assert archived.instants > 0
    assert table.history(archived=True) and all(h.completed for h in table.history(archived=True))
    assert ids(table.snapshot()) == list(range(24))


def test_savepoint_restore_rollback_validate(tmp_path):
    path = str(tmp_path / "t")
    _three_commits(path, UPSERT)
    table = Table(path)
    made = table.savepoint(comments="before")
    assert [s.instant for s in table.savepoints()] == [made.instant]
    hoodie_sink.write(trips(4, start=100), path, UPSERT)
    assert table.restore(made.instant) and ids(table.snapshot()) == list(range(20))
    table.delete_savepoint(made.instant)
    assert table.savepoints() == []
    # a pending write whose writer is gone
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.write.context import TaskIdentity

    ctx = client.begin(WriteConfig.from_options(UPSERT, path=path), trips(3).schema)
    client.write_task(ctx, TaskIdentity(only_task=True), trips(3, start=200).to_batches())
    with pytest.raises(HoodieTableError, match="live heartbeat"):
        table.rollback(ctx.instant)
    stop_heartbeat(table.storage, ctx.instant)
    done = table.rollback(ctx.instant)
    assert done.instant == ctx.instant and done.action == "commit" and done.files_deleted > 0
    with pytest.raises(HoodieTableError, match="is completed"):
        table.rollback(table.commits()[-1].instant.timestamp)
    assert table.validate() == [] and table.validate(global_keys=True) == []


def test_service_options_leave_the_read_options_to_reads(tmp_path):
    path = str(tmp_path / "t")
    _three_commits(path, UPSERT)
    table = Table(
        path, {"hoodie.datasource.query.type": "read_optimized", "hoodie.cleaner.commits.retained": "1"}
    )
    assert table.write_config().cleaner_commits_retained == 1
    assert table.clean().instant is not None
