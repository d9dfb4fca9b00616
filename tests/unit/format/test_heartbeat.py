"""Heartbeats as Apache Hudi keeps them (HoodieHeartbeatClient, 0.15): `.hoodie/.heartbeat/<instant>`,
an empty file re-created every interval, alive while now - mtime <= interval x tolerable misses.

Java lists the folder and takes every name in it for an instant, so nothing else may live there.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.format.heartbeat import (
    HEARTBEAT_DIR,
    Heartbeat,
    clustering_runner_gone,
    heartbeat_path,
    is_alive,
)
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import clustering
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import rollback_failed_writes
from tests.support.tables import APPEND_OPTS, small_file_clustering

INTERVAL_S, MISSES = 60.0, 2  # Java's defaults


def _java_beat(storage: Storage, instant: str, age_s: float) -> None:
    """What Java's heartbeat client leaves: an empty file, last re-created `age_s` ago."""
    full = os.path.join(storage.base_uri, heartbeat_path(instant))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    open(full, "wb").close()
    past = time.time() - age_s
    os.utime(full, (past, past))


def test_java_heartbeat_is_judged_by_its_modification_time_and_javas_expiry(tmp_path):
    storage = Storage(str(tmp_path))
    _java_beat(storage, "20250101000000000", age_s=INTERVAL_S * MISSES - 5)
    assert is_alive(storage, "20250101000000000", INTERVAL_S, MISSES)
    # Java: expired once now - mtime > interval x misses (not x (misses + 1))
    _java_beat(storage, "20250101000000001", age_s=INTERVAL_S * MISSES + 5)
    assert not is_alive(storage, "20250101000000001", INTERVAL_S, MISSES)
    assert not is_alive(storage, "20250101000000002", INTERVAL_S, MISSES)  # absent: Java reads 0


def test_our_beat_is_javas_file_and_leaves_nothing_else_in_the_folder(tmp_path):
    storage = Storage(str(tmp_path))
    hb = Heartbeat(storage, "20250101000000000", INTERVAL_S)
    hb.beat()
    full = os.path.join(storage.base_uri, heartbeat_path("20250101000000000"))
    first = os.stat(full).st_mtime
    assert storage.read_bytes(heartbeat_path("20250101000000000")) == b""
    time.sleep(0.02)
    hb.beat()  # re-created: the modification time moves on
    assert os.stat(full).st_mtime > first
    assert storage.list_names(HEARTBEAT_DIR) == ["20250101000000000"]
    with Heartbeat(storage, "20250101000000001", 0.05):
        time.sleep(0.2)
        assert sorted(storage.list_names(HEARTBEAT_DIR)) == ["20250101000000000", "20250101000000001"]
    assert storage.list_names(HEARTBEAT_DIR) == ["20250101000000000"]  # stopped: file deleted


OPTS = APPEND_OPTS
CLUSTER = small_file_clustering()


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": [f"k{i}" for i in range(start, start + n)], "v": list(range(start, start + n))})


def test_takeover_and_schedule_lock_leave_no_names_in_the_heartbeat_folder(tmp_path):
    path = str(tmp_path / "t")
    for i in range(3):
        hoodie_sink.write(_rows(5, start=10 * i), path, OPTS)
    storage = Storage(path)
    instant = clustering.schedule(storage, WriteConfig.from_options({**OPTS, **CLUSTER}, path=path))
    assert instant is not None
    _java_beat(storage, instant, age_s=1000)  # its runner died long ago
    result = clustering.run(
        WriteConfig.from_options({**OPTS, **CLUSTER}, path=path)
    )  # takes the dead run over
    assert result is not None and result.instant == instant
    assert storage.list_names(HEARTBEAT_DIR) == []


def test_writer_leaves_a_pending_clustering_without_heartbeat_alone(tmp_path):
    """Java's clustering does not beat: a pending one without a heartbeat file may be at work."""
    path = str(tmp_path / "t")
    for i in range(3):
        hoodie_sink.write(_rows(5, start=10 * i), path, OPTS)
    storage = Storage(path)
    cfg = WriteConfig.from_options({**OPTS, **CLUSTER}, path=path)
    instant = clustering.schedule(storage, cfg)
    assert instant is not None
    storage.delete(heartbeat_path(instant))  # as a Java clustering: no heartbeat at all
    assert not clustering_runner_gone(storage, instant, INTERVAL_S, MISSES)
    _java_beat(storage, instant, age_s=1000)  # a runner of ours that died leaves its beat behind
    assert clustering_runner_gone(storage, instant, INTERVAL_S, MISSES)
    storage.delete(heartbeat_path(instant))
    inflight = f".hoodie/{instant}.replacecommit.inflight"
    storage.write_bytes(inflight, b"")  # the Java runner is executing it
    rollback_failed_writes(storage, Timeline.load(storage), config=cfg)
    assert storage.exists(inflight)


def test_a_task_that_starts_after_its_write_ended_brings_no_heartbeat_back(tmp_path):
    """A Spark task retried or started late, after another process aborted the write and deleted
    its heartbeat: its helper heartbeat must not beat once (a stray `.heartbeat/<instant>` for an
    instant that is not on the timeline; seen in test_failed_job_leaves_table_exactly_as_before)."""
    storage = Storage(str(tmp_path))
    instant = "20240101000000000"
    with Heartbeat(storage, instant, 0.05, owner=False, running=lambda: False):
        time.sleep(0.2)  # several intervals
    assert not storage.exists(heartbeat_path(instant))
    with Heartbeat(storage, instant, 0.05, owner=False, running=lambda: True):
        assert storage.exists(heartbeat_path(instant))
