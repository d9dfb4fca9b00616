"""A data write keeps its heartbeat from begin to commit or abort (issue 10).

Java (LAZY failed-write cleaning) and our own `rollback_failed_writes` roll back a pending write
whose heartbeat is older than interval x tolerable misses: the driver side must beat between
begin and the tasks, and between the tasks and the commit, not only while tasks run.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieCommitStateUnknown
from hoodie_sink.table import client
from hoodie_sink.table.format.heartbeat import Heartbeat, heartbeat_path, is_alive
from hoodie_sink.table.format.timeline.instant import INFLIGHT, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import assert_table_matches

BEAT = {"hoodie.client.heartbeat.interval_in_ms": "100", "hoodie.client.heartbeat.tolerable.misses": "2"}
OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.operation": "append",
    **BEAT,
}


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": [f"k{i}" for i in range(start, start + n)], "v": list(range(start, start + n))})


def test_driver_beats_from_begin_until_the_commit(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)
    ctx = client.begin(WriteConfig.from_options(OPTS, path=path), _rows(1).schema)
    time.sleep(0.6)  # no task yet: three expiries (0.1 s x 2) pass
    assert is_alive(storage, ctx.instant, 0.1, 2)
    # a concurrent writer's rollback leaves the live write alone
    hoodie_sink.write(_rows(5, start=100), path, OPTS)
    assert ctx.instant in [i.timestamp for i in Timeline.load(storage).pending()]
    result = client.write_task(ctx, TaskIdentity(only_task=True), _rows(5, start=5).to_batches())
    time.sleep(0.6)  # tasks done, commit not yet
    assert is_alive(storage, ctx.instant, 0.1, 2)
    client.complete(ctx, [result])
    time.sleep(0.3)
    assert not storage.exists(heartbeat_path(ctx.instant))  # stopped and deleted, as Java's stop
    assert_table_matches(
        path, [*_rows(5).to_pylist(), *_rows(5, start=100).to_pylist(), *_rows(5, start=5).to_pylist()]
    )


def test_abort_stops_the_driver_heartbeat(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)
    ctx = client.begin(WriteConfig.from_options(OPTS, path=path), _rows(1).schema)
    client.abort(ctx, settle_seconds=0)
    time.sleep(0.3)
    assert not storage.exists(heartbeat_path(ctx.instant))


def test_keeper_ends_when_another_process_ends_the_instant(tmp_path):
    """A Spark batch write begins in one driver-side Python worker and commits in another: the
    keeper of the first sees the instant end on storage and stops beating."""
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)
    ctx = client.begin(WriteConfig.from_options(OPTS, path=path), _rows(1).schema)
    storage.delete(
        TimelineStore(storage).path(Instant(ctx.instant, ctx.action, INFLIGHT))
    )  # as abort does first
    storage.delete(heartbeat_path(ctx.instant))
    time.sleep(0.4)
    assert not storage.exists(heartbeat_path(ctx.instant))


def test_commit_of_unknown_outcome_lets_the_heartbeat_expire(tmp_path, monkeypatch):
    """Nobody aborts a commit that may have landed: the next writer's rollback decides, so this
    process must not keep the instant alive."""
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)

    def unknown(self, inflight, data):
        raise HoodieCommitStateUnknown(f"test: outcome of {inflight.timestamp} unknown")

    monkeypatch.setattr(TimelineStore, "complete", unknown)
    with pytest.raises(HoodieCommitStateUnknown):
        hoodie_sink.write(_rows(5, start=5), path, OPTS)
    (instant,) = [i.timestamp for i in Timeline.load(storage).pending()]
    time.sleep(0.5)
    assert not is_alive(storage, instant, 0.1, 2)


def test_a_beat_that_lands_after_the_instant_ended_is_taken_back(tmp_path):
    """The keeper (or a straggling task) checks that the instant runs, then beats; an abort in
    another process may delete the heartbeat in between. The beat must not outlive the instant."""
    storage = Storage(str(tmp_path))
    answers = iter([True, False])  # running before the beat; ended right after it
    keeper = Heartbeat(storage, "20250101000000000", 0.05, owner=False, running=lambda: next(answers, False))
    with keeper:
        storage.delete(heartbeat_path("20250101000000000"))  # the abort deletes it
        time.sleep(0.4)
    assert not storage.exists(heartbeat_path("20250101000000000"))
