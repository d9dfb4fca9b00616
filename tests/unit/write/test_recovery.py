"""Issue 10: crashed writes of Java Hudi and of ours are recoverable by the other side.

A crashed Java write is simulated on storage as Java 0.15 leaves it (docs/hudi/format.md#markers): pending
timeline files, a data file named with the instant, and its markers, direct or (Java Spark's
default) timeline-server based.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import posixpath

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table import client
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.heartbeat import heartbeat_path
from hoodie_sink.table.format.markers import WORK_ROOT, list_marked_files, marker_dir, work_dir
from hoodie_sink.table.format.rollback_metadata import decode_rollback_metadata, decode_rollback_plan
from hoodie_sink.table.format.timeline.instant import COMMIT, ROLLBACK, Instant
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline, TimelineStore
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import clustering
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions
from hoodie_sink.table.write import coordinator, rollback, streaming, write_path
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.rollback import files_of_instant, rollback_failed_writes
from hoodie_sink.table.write.streaming import LEGACY_STREAMING_DIR, BatchRef
from tests.support.tables import assert_table_matches, hudi_rs_timeline
from tests.unit.services.test_append_clustering import CLUSTER, _appended_table
from tests.unit.test_client import OPTS as CLUSTERING_OPTS

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.operation": "upsert",
}
CRASHED = "20300101000000000"  # newer than anything the test writes


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [f"p{i % 2}" for i in ids],
                     "v": [float(i) for i in ids]})  # fmt: skip


def table_with_one_commit(tmp_path) -> tuple[str, Storage, BaseFile]:
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 4), path, OPTS)
    storage = Storage(path)
    rel = next(p for p in storage.walk_files("p0") if p.endswith(".parquet"))
    bf = BaseFile.parse(*posixpath.split(rel))
    assert bf is not None
    return path, storage, bf


def crash_java_write(storage: Storage, bf: BaseFile, markers: str, io_type: str = "CREATE") -> str:
    """A Java commit that died after writing one new base file (a copy of `bf`, so it reads)."""
    storage.write_bytes(f".hoodie/{CRASHED}.commit.requested", b"")
    storage.write_bytes(f".hoodie/{CRASHED}.inflight", b"")
    name = f"{bf.file_id[:-2]}-9_1-0-1_{CRASHED}.parquet"
    data = f"{bf.partition_path}/{name}"
    storage.write_bytes(data, storage.read_bytes(bf.path))
    marker = f"{data}.marker.{io_type}"
    if markers == "direct":
        storage.write_bytes(f"{marker_dir(CRASHED)}/{marker}", b"")
    elif markers == "timeline_server":
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS.type", b"TIMELINE_SERVER_BASED")
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS0", b"")
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS1", f"{marker}\n".encode())
    return data


def test_timeline_server_markers_name_the_files_of_a_crashed_java_write(tmp_path):
    _, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, "timeline_server")
    assert list_marked_files(storage, CRASHED) == [(data, "CREATE")]
    assert files_of_instant(storage, CRASHED) == [data]


@pytest.mark.parametrize("markers", ["direct", "timeline_server", "none"])
def test_rollback_of_a_crashed_java_write_deletes_its_files(tmp_path, markers):
    path, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, markers)
    rolled = rollback_failed_writes(storage, ActiveTimeline.load(storage))
    assert [i.timestamp for i in rolled] == [CRASHED]
    assert not storage.exists(data)
    assert not storage.exists(marker_dir(CRASHED))
    assert_table_matches(path, rows(0, 4).to_pylist())


def test_an_append_marker_never_deletes_the_base_file_it_names(tmp_path):
    # it stands for the logs of that slice the instant wrote (tests/unit/services/test_mor_restore.py)
    _, storage, bf = table_with_one_commit(tmp_path)
    storage.write_bytes(f".hoodie/{CRASHED}.deltacommit.requested", b"")
    storage.write_bytes(f"{marker_dir(CRASHED)}/{bf.path}.marker.APPEND", b"")
    assert files_of_instant(storage, CRASHED) == []
    assert storage.exists(bf.path)


# -- issue 10 item 1: nothing but markers in a marker folder ---------------------------------


def java_parses_as_marker(rel_in_marker_dir: str) -> bool:
    """Java's DirectWriteMarkers/MarkerUtils: `<partition>/<data file>.marker.<IOType>`."""
    data, sep, io_type = rel_in_marker_dir.rpartition(".marker.")
    return bool(sep) and io_type in ("CREATE", "MERGE", "APPEND") and data.endswith(".parquet")


def crashed_upsert_with_staging(path: str) -> str:
    """An upsert whose two tasks both change one file group (claims, staged changes, key logs),
    then the driver dies before the commit."""
    hoodie_sink.write(rows(0, 8), path, OPTS)
    cfg = WriteConfig.from_options(OPTS, path=path)
    ctx = coordinator.begin(cfg, rows(0, 1).schema)
    for pid, ids in enumerate(([0, 2, 20], [4, 6, 22])):  # the same file group of p0, new keys too
        batch = rows(0, 30).filter(pa.array([i in ids for i in range(30)])).to_batches()
        write_path.write_task(ctx, TaskIdentity(pid, 2, 100 + pid), batch)
    return ctx.instant


def test_a_crashed_upsert_leaves_only_markers_in_its_marker_folder(tmp_path):
    path = str(tmp_path / "t")
    instant = crashed_upsert_with_staging(path)
    storage = Storage(path)
    root = marker_dir(instant)
    in_marker_dir = [p[len(root) + 1 :] for p in storage.walk_files(root)]
    assert in_marker_dir and all(java_parses_as_marker(p) for p in in_marker_dir), in_marker_dir
    scratch = list(storage.walk_files(work_dir(instant)))
    assert any("/staging/" in p for p in scratch) and any("/claims/" in p for p in scratch)
    # and the next writer's rollback removes both folders
    rollback_failed_writes(storage, ActiveTimeline.load(storage), config=expired(cfg_of(path)))
    assert not storage.exists(root) and not storage.exists(work_dir(instant))
    assert_table_matches(path, rows(0, 8).to_pylist())


def test_a_committed_upsert_leaves_no_scratch_files(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 8), path, OPTS)
    hoodie_sink.write(rows(0, 12), path, OPTS)
    storage = Storage(path)
    assert list(storage.walk_files(".hoodie/.temp")) == []
    assert list(storage.walk_files(WORK_ROOT)) == []


def test_streaming_state_lives_outside_the_marker_root(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 4), path, OPTS)
    ref = BatchRef("q", 3, "run")
    ctx = streaming.begin_batch(WriteConfig.from_options(OPTS, path=path), rows(0, 1).schema, ref)
    storage = Storage(path)
    assert ctx is not None and storage.exists(ref.ctx_path)
    assert not ref.ctx_path.startswith(".hoodie/.temp/")
    assert list(storage.walk_files(".hoodie/.temp")) == []


def test_a_micro_batch_begun_before_the_upgrade_commits_once_from_the_old_location(tmp_path):
    """A stream upgraded in place: the batch's context was published in .hoodie/.temp/streaming by
    the old release; the new release's tasks and commit must use that instant, not begin another,
    and tidy the old place."""
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 4), path, OPTS)
    cfg = WriteConfig.from_options(OPTS, path=path)
    storage = Storage(path)
    ref = BatchRef("q", 3, "run")
    old = coordinator.begin(cfg, rows(0, 1).schema)
    storage.write_bytes(f"{LEGACY_STREAMING_DIR}/q/3-run.ctx", pickle.dumps(old))
    ctx = streaming.begin_batch(cfg, rows(0, 1).schema, ref)
    assert ctx is not None and ctx.instant == old.instant  # no second instant for the batch
    assert [i.timestamp for i in ActiveTimeline.load(storage).pending()] == [old.instant]
    result = client.write_task(ctx, TaskIdentity(), rows(10, 2).to_batches())
    loaded = streaming.load_context(storage, ref)
    assert loaded is not None and loaded.instant == old.instant
    checkpoints = streaming.committed_checkpoints(storage)
    client.complete(loaded, [result], streaming.with_checkpoint(checkpoints, "q", 3))
    streaming.forget_batch(storage, ref)
    assert not storage.exists(LEGACY_STREAMING_DIR)
    assert streaming.is_committed(storage, "q", 3)
    assert streaming.begin_batch(cfg, rows(0, 1).schema, ref) is None  # a replay writes nothing
    assert_table_matches(path, rows(0, 4).to_pylist() + rows(10, 2).to_pylist())


def cfg_of(path: str) -> WriteConfig:
    return WriteConfig.from_options(OPTS, path=path)


def expired(cfg: WriteConfig) -> WriteConfig:
    """The crashed writer's heartbeat counts as expired at once."""
    return dataclasses.replace(cfg, heartbeat_interval_ms=0, heartbeat_misses=0)


# -- issue 10 item 3: a rollback is published as Java's `.rollback` instant ----------------------


def rollback_instants(storage: Storage) -> list[Instant]:
    rank = {"requested": 0, "inflight": 1, "completed": 2}
    found = [i for i in Timeline.load(storage).instants if i.action == ROLLBACK]
    return sorted(found, key=lambda i: (i.timestamp, rank[i.state]))


def rollback_record(storage: Storage, instant: Instant) -> dict:
    return decode_rollback_metadata(storage.read_bytes(f".hoodie/{instant.file_name}"))


@pytest.mark.s3
def test_rollback_of_a_failed_write_publishes_a_rollback_instant(tmp_path):
    path, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, "direct")
    rollback_failed_writes(storage, ActiveTimeline.load(storage))
    states = rollback_instants(storage)
    assert [i.state for i in states] == ["requested", "inflight", "completed"]
    rb = states[-1]
    assert rb.timestamp > CRASHED  # a new instant time, after every instant on the timeline
    assert storage.read_bytes(f".hoodie/{states[1].file_name}") == b""
    plan = decode_rollback_plan(storage.read_bytes(f".hoodie/{states[0].file_name}"))
    assert plan.instant_to_rollback == Instant(CRASHED, COMMIT) and plan.files == (data,)
    md = rollback_record(storage, rb)
    assert md["startRollbackTime"] == rb.timestamp and md["totalFilesDeleted"] == 1
    assert md["commitsRollback"] == [CRASHED]
    assert md["instantsRollback"] == [{"commitTime": CRASHED, "action": "commit"}]
    assert md["partitionMetadata"]["p0"]["successDeleteFiles"] == [os.path.join(storage.base_uri, data)]
    assert Timeline.load(storage).states_of(CRASHED) == []  # the failed instant's files are gone
    assert hudi_rs_timeline(path) is not None
    assert_table_matches(path, rows(0, 4).to_pylist())


def test_a_rollback_instant_is_not_a_commit_for_later_writes_and_time_travel(tmp_path):
    path, storage, bf = table_with_one_commit(tmp_path)
    first = Timeline.load(storage).latest_completed()
    crash_java_write(storage, bf, "none")
    hoodie_sink.write(rows(10, 2), path, OPTS)  # its begin rolls the crashed write back
    timeline = Timeline.load(storage)
    rb = rollback_instants(storage)[-1]
    latest = timeline.latest_completed()
    assert (
        first is not None
        and latest is not None
        and latest.action == COMMIT
        and latest.timestamp > rb.timestamp
    )
    assert timeline.completed_times() == {first.timestamp, latest.timestamp}
    assert_table_matches(path, rows(0, 4).to_pylist() + rows(10, 2).to_pylist())
    as_of_rollback = read_snapshot(path, as_of=rb.timestamp)
    assert sorted(as_of_rollback.column("id").to_pylist()) == [0, 1, 2, 3]


@pytest.mark.s3
@pytest.mark.parametrize("crash_point", ["before the deletes", "before the completion"])
def test_a_rollback_that_dies_midway_is_completed_by_the_next_write(tmp_path, monkeypatch, crash_point):
    path, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, "timeline_server")
    with monkeypatch.context() as m:
        if crash_point == "before the deletes":
            m.setattr(rollback, "delete_files", die)
        else:
            real = TimelineStore.complete
            m.setattr(
                TimelineStore, "complete", lambda s, i, c: die() if i.action == ROLLBACK else real(s, i, c)
            )
        with pytest.raises(RuntimeError, match="writer died"):
            rollback_failed_writes(storage, ActiveTimeline.load(storage))
    assert [i.state for i in Timeline.load(storage).pending()][-1] == "inflight"  # the rollback
    hoodie_sink.write(rows(10, 2), path, OPTS)
    timeline = Timeline.load(storage)
    assert [i for i in timeline.pending()] == []
    done = [i for i in rollback_instants(storage) if i.is_completed]
    assert len(done) == 1 and rollback_record(storage, done[0])["commitsRollback"] == [CRASHED]
    assert not storage.exists(data) and timeline.states_of(CRASHED) == []
    assert_table_matches(path, rows(0, 4).to_pylist() + rows(10, 2).to_pylist())


def die(*_args, **_kwargs):
    raise RuntimeError("writer died")


def test_rollback_of_a_failed_clustering_publishes_a_rollback_instant_and_keeps_the_plan(tmp_path):
    path = tmp_path / "t"
    expected = _appended_table(path, commits=5)
    opts = {**CLUSTERING_OPTS, **CLUSTER, "hoodie.client.heartbeat.interval_in_ms": "100"}

    def crash(job, groups):
        clustering.execute_group(job, 0, groups[0])
        raise RuntimeError("runner died")

    with pytest.raises(RuntimeError, match="runner died"):
        clustering.run(WriteConfig.from_options(opts, path=str(path)), runner=crash)
    storage = Storage(str(path))
    failed = Timeline.load(storage).pending()[0]
    storage.delete(heartbeat_path(failed.timestamp))
    result = clustering.run(
        WriteConfig.from_options(opts, path=str(path))
    )  # rolls the failed run back to its plan, reruns it
    assert result.instant == failed.timestamp
    done = [i for i in rollback_instants(storage) if i.is_completed]
    assert len(done) == 1
    md = rollback_record(storage, done[0])
    assert md["instantsRollback"] == [{"commitTime": failed.timestamp, "action": "replacecommit"}]
    assert md["totalFilesDeleted"] >= 1
    assert_table_matches(path, expected)


def test_two_writers_that_both_redo_one_pending_rollback_on_s3_both_succeed(tmp_path, s3, s3_uri):
    """Writer B saw writer A's rollback pending and redid it from its plan while A finished it: on
    S3 the completed file is never overwritten, so B finds A's (with another time taken) and is
    done, not in an unknown commit state (seen as a spurious write failure in tests/spark/test_occ.py)."""
    path = s3_uri(tmp_path / "t")
    hoodie_sink.write(rows(0, 4), path, {**OPTS, **s3.options()})
    storage = Storage(path, StorageOptions.from_options(s3.options()))
    rel = next(p for p in storage.walk_files("p0") if p.endswith(".parquet"))
    bf = BaseFile.parse(*posixpath.split(rel))
    data = crash_java_write(storage, bf, "direct")
    plan = rollback.plan_rollback(Instant(CRASHED, COMMIT), files_of_instant(storage, CRASHED))
    rollback.request_rollback(storage, plan, None)
    seen_by_b = Timeline.load(storage)  # the rollback is pending here
    assert [i.timestamp for i in rollback.complete_pending_rollbacks(storage, Timeline.load(storage))] == [
        CRASHED
    ]
    assert [i.timestamp for i in rollback.complete_pending_rollbacks(storage, seen_by_b)] == [CRASHED]
    assert not storage.exists(data)
    assert len([i for i in Timeline.load(storage).completed((ROLLBACK,))]) == 1
    assert sorted(r["id"] for r in hoodie_sink.read(path, {**s3.options()}).to_pylist()) == [0, 1, 2, 3]
