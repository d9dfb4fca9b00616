"""Optimistic concurrency control (issue 14, part 1): Hudi's options, the table lock and the
conflict check at the commit.  Two writers interleaved step by step through the write client:
overlapping file groups -> the later commit fails, says nothing landed, leaves no file; disjoint
ones -> both commit."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieLockError, HoodieWriteConflictError
from hoodie_sink.table import client
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.locking import FileSystemLock, HostLock, table_lock
from tests.support.tables import all_write_stats, hudi_rs_read

LOCKS = "org.apache.hudi.client.transaction.lock."
BASE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.small.file.limit": "0",  # inserts open new file groups: disjoint writes
}


def occ(provider: str = "FileSystemBasedLockProvider", **extra: str) -> dict[str, str]:
    return {**BASE, "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "hoodie.write.lock.provider": LOCKS + provider, **extra}  # fmt: skip


def rows(ids, ts: int, p: str = "a") -> pa.Table:
    return pa.table({"id": ids, "p": [p] * len(ids), "ts": [ts] * len(ids), "v": [f"{i}@{ts}" for i in ids]})


def interleaved(path: str, opts: dict, first: pa.Table, second: pa.Table):
    """Both writers begin, then the first commits, then the second: (what the second raised, its instant)."""
    a = client.begin(WriteConfig.from_options(opts, path=path), first.schema)
    b = client.begin(WriteConfig.from_options(opts, path=path), second.schema)
    ra = client.write_task(a, TaskIdentity(only_task=True), first.to_batches())
    rb = client.write_task(b, TaskIdentity(only_task=True), second.to_batches())
    client.complete(a, [ra])
    try:
        client.complete(b, [rb])
    except HoodieWriteConflictError as e:
        client.abort(b, settle_seconds=0)
        return e, b.instant
    return None, b.instant


def table_values(path: str) -> dict[str, str]:
    return {r["id"]: r["v"] for r in hudi_rs_read(path).select(["id", "v"]).to_pylist()}


@pytest.mark.s3
@pytest.mark.parametrize("provider", ["FileSystemBasedLockProvider", "InProcessLockProvider"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_overlapping_writers_the_later_commit_fails_and_leaves_nothing(tmp_path, provider, table_type):
    path = tmp_path / "t"
    opts = occ(provider, **{"hoodie.datasource.write.table.type": table_type})
    hoodie_sink.write(rows(["k1", "k2"], 1), str(path), opts)
    err, loser = interleaved(str(path), opts, rows(["k1"], 2), rows(["k2"], 3))  # both update one file group
    assert err is not None, "the second commit must see the first one's change of the same file group"
    assert "Nothing of this write was committed" in str(err) and "safe to retry" in str(err)
    assert table_values(str(path)) == {"k1": "k1@2", "k2": "k2@1"}  # the first writer's update only
    # nothing of the loser is left: no pending instant, every data and log file is a committed one's
    hoodie = path / ".hoodie"
    assert not [
        p.name for p in hoodie.iterdir() if p.name.startswith(loser) and not p.name.endswith("rollback")
    ]
    reported = {s["path"] for s in all_write_stats(path)}
    files = [
        p
        for p in path.rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and "partition_metadata" not in p.name
    ]
    assert files and all(str(p.relative_to(path)) in reported for p in files)
    # a retry of the loser, planned on the new timeline, commits
    hoodie_sink.write(rows(["k2"], 3), str(path), opts)
    assert table_values(str(path)) == {"k1": "k1@2", "k2": "k2@3"}
    assert not (hoodie / "lock").exists()


def test_disjoint_writers_both_commit(tmp_path):
    path = tmp_path / "t"
    opts = occ()
    hoodie_sink.write(rows(["k1"], 1, "a"), str(path), opts)
    # new keys in new file groups, and an update of partition a against inserts into partition b
    assert interleaved(str(path), opts, rows(["k1"], 2, "a"), rows(["k9", "k8"], 2, "b"))[0] is None
    assert table_values(str(path)) == {"k1": "k1@2", "k9": "k9@2", "k8": "k8@2"}


def test_single_writer_mode_takes_no_lock(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(rows(["k1"], 1), str(path), BASE)
    assert not (path / ".hoodie" / "lock").exists()


def test_options(tmp_path):
    with pytest.raises(HoodieConfigError, match="needs a lock: set hoodie.write.lock.provider"):
        WriteConfig.from_options(
            {**BASE, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}, "/t"
        )
    with pytest.raises(HoodieConfigError, match="ZooKeeper, DynamoDB and Hive metastore locks are not"):
        WriteConfig.from_options(occ("ZookeeperBasedLockProvider"), "/t")
    with pytest.raises(HoodieConfigError, match="failed.writes=LAZY"):
        WriteConfig.from_options(occ(**{"hoodie.cleaner.policy.failed.writes": "EAGER"}), "/t")
    with pytest.raises(HoodieConfigError, match="applies to several writers"):
        WriteConfig.from_options(
            {**BASE, "hoodie.write.lock.provider": LOCKS + "InProcessLockProvider"}, "/t"
        )
    with pytest.raises(HoodieConfigError, match="early conflict detection is not implemented"):
        WriteConfig.from_options(
            occ(**{"hoodie.write.concurrency.early.conflict.detection.enable": "true"}), "/t"
        )
    cfg = WriteConfig.from_options(occ(**{"hoodie.cleaner.policy.failed.writes": "lazy",
                                          "hoodie.write.lock.filesystem.expire": "1"}), "/t")  # fmt: skip
    assert cfg.occ and cfg.lock_provider == "FileSystemBasedLockProvider" and cfg.lock_expire_minutes == 1


def _count_under_lock(path: str, provider: str, n: int) -> None:
    quick = {
        "hoodie.write.lock.client.wait_time_ms_between_retry": "5",
        "hoodie.write.lock.client.num_retries": "99999",
    }
    cfg = WriteConfig.from_options(occ(provider, **quick), path)
    counter = Path(path) / "counter"
    for _ in range(n):
        with table_lock(cfg):
            value = int(counter.read_text()) if counter.exists() else 0
            time.sleep(0.001)  # widen the window a missing lock would lose an increment in
            counter.write_text(str(value + 1))


@pytest.mark.s3
@pytest.mark.parametrize("provider", ["FileSystemBasedLockProvider", "InProcessLockProvider"])
def test_the_lock_excludes_other_processes(tmp_path, provider):
    (tmp_path / ".hoodie").mkdir()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_count_under_lock, args=(str(tmp_path), provider, 30)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert (tmp_path / "counter").read_text() == "90"
    assert not (tmp_path / ".hoodie" / "lock").exists()  # released


def test_a_held_lock_times_out_and_an_expired_one_is_taken_over(tmp_path):
    (tmp_path / ".hoodie").mkdir()
    quick = {
        "hoodie.write.lock.client.num_retries": "2",
        "hoodie.write.lock.client.wait_time_ms_between_retry": "10",
    }
    (tmp_path / ".hoodie" / "lock").write_bytes(b"")  # held (Java leaves it empty)
    with pytest.raises(HoodieLockError, match="Unable to acquire lock"):
        FileSystemLock(WriteConfig.from_options(occ(**quick), str(tmp_path))).acquire()
    old = time.time() - 120
    os.utime(tmp_path / ".hoodie" / "lock", (old, old))
    lock = FileSystemLock(WriteConfig.from_options(occ(**quick, **{"hoodie.write.lock.filesystem.expire": "1"}),
                                                   str(tmp_path)))  # fmt: skip
    lock.acquire()  # two minutes old, expiry one minute: a crashed holder's
    lock.release()
    assert not (tmp_path / ".hoodie" / "lock").exists()
    host = HostLock(WriteConfig.from_options(occ("InProcessLockProvider", **{"hoodie.write.lock.wait_time_ms": "50"}),
                                             str(tmp_path)))  # fmt: skip
    host.acquire()
    other = HostLock(WriteConfig.from_options(occ("InProcessLockProvider", **{"hoodie.write.lock.wait_time_ms": "50"}),
                                              str(tmp_path)))  # fmt: skip
    with pytest.raises(HoodieLockError, match="hoodie.write.lock.wait_time_ms"):
        other.acquire()
    host.release()
    other.acquire()
    other.release()


def test_a_file_system_lock_without_atomic_create_is_refused_at_begin(tmp_path, monkeypatch):
    from hoodie_sink.table.storage import Storage

    monkeypatch.setattr(Storage, "atomic_create", property(lambda self: False))  # as on HDFS
    with pytest.raises(HoodieConfigError, match="atomic create-if-absent"):
        hoodie_sink.write(rows(["k1"], 1), str(tmp_path / "t"), occ())
    assert not (tmp_path / "t").exists()  # refused before anything was written


KILLED_WRITER = """
import sys, time
import pyarrow as pa
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table import client
from hoodie_sink.table.write.context import TaskIdentity
path, opts = sys.argv[1], eval(sys.argv[2])
rows = pa.table({"id": ["k1", "k5"], "p": ["a", "a"], "ts": [9, 9], "v": ["k1@9", "k5@9"]})
ctx = client.begin(WriteConfig.from_options(opts, path=path), rows.schema)
client.write_task(ctx, TaskIdentity(only_task=True), rows.to_batches())
print(ctx.instant, flush=True)
time.sleep(600)  # killed here, between its tasks and its commit
"""


@pytest.mark.s3
def test_a_killed_writer_is_rolled_back_lazily_once_its_heartbeat_expired_never_while_it_beats(tmp_path):
    import subprocess
    import sys

    from hoodie_sink.table.format.timeline.timeline import Timeline
    from hoodie_sink.table.storage import Storage

    path = tmp_path / "t"
    beat = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "2"}
    opts = occ(**beat)
    hoodie_sink.write(rows(["k1", "k2"], 1), str(path), opts)
    pythonpath = os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])  # with the S3 redirect's
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), repr(opts)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": pythonpath})  # fmt: skip
    victim = proc.stdout.readline().strip()
    assert victim.isdigit(), "the writer did not start"
    hoodie_sink.write(rows(["k3"], 2, "b"), str(path), opts)  # while it beats: left alone
    storage = Storage(str(path))
    assert victim in {i.timestamp for i in Timeline.load(storage).pending()}
    proc.kill()  # SIGKILL: no abort, the heartbeat stops
    proc.wait(30)
    time.sleep(3.5)  # interval x misses = 2 s, + 1 s where mtimes have whole seconds (S3)
    hoodie_sink.write(rows(["k4"], 3, "b"), str(path), opts)  # begins: rolls the dead write back
    assert victim not in {i.timestamp for i in Timeline.load(storage).pending()}
    assert table_values(str(path)) == {"k1": "k1@1", "k2": "k2@1", "k3": "k3@2", "k4": "k4@3"}
    reported = {s["path"] for s in all_write_stats(path)}
    files = [p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts]
    assert all(str(p.relative_to(path)) in reported for p in files)  # nothing of the dead write


def test_the_engine_write_retries_a_lost_conflict_when_asked(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(["k1", "k2"], 1), path, occ())
    other = rows(["k1"], 2)
    a = client.begin(WriteConfig.from_options(occ(), path=path), other.schema)
    ra = client.write_task(a, TaskIdentity(only_task=True), other.to_batches())
    real = client.write_task
    calls = []

    def write_task(ctx, task, batches):  # the other writer commits while ours writes, the first time
        calls.append(ctx.instant)
        if len(calls) == 1:
            client.complete(a, [ra])
        return real(ctx, task, batches)

    monkeypatch.setattr(client, "write_task", write_task)
    with pytest.raises(HoodieWriteConflictError):
        hoodie_sink.write(rows(["k2"], 3), path, occ())  # no retry asked: the conflict is raised
    assert table_values(path) == {"k1": "k1@2", "k2": "k2@1"}
    calls.clear()
    a = client.begin(WriteConfig.from_options(occ(), path=path), other.schema)
    ra = real(a, TaskIdentity(only_task=True), rows(["k1"], 4).to_batches())
    hoodie_sink.write(rows(["k2"], 5), path, occ(**{"hoodie.write.num.retries.on.conflict.failures": "2"}))
    assert len(calls) == 2  # lost once, then committed on a new instant
    assert table_values(path) == {"k1": "k1@4", "k2": "k2@5"}
    with pytest.raises(HoodieConfigError, match="applies to several writers"):
        WriteConfig.from_options({**BASE, "hoodie.write.num.retries.on.conflict.failures": "1"}, path)


def test_stream_retry_options_apply_to_several_writers_only():
    retry = {"hoodie.datasource.write.streaming.retry.count": "5"}
    with pytest.raises(HoodieConfigError, match="retry.count' applies to several writers"):
        WriteConfig.from_options({**BASE, **retry}, "/t")
    with pytest.raises(HoodieConfigError, match="retry.interval.ms' applies to several writers"):
        WriteConfig.from_options({**BASE, "hoodie.datasource.write.streaming.retry.interval.ms": "10"}, "/t")
    assert WriteConfig.from_options({**BASE, "hoodie.datasource.write.streaming.retry.count": "0"}, "/t")
    assert WriteConfig.from_options(occ(**retry), "/t").stream_retries == 5
