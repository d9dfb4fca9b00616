"""Issue 8 item 11: a micro-batch has one instant, and a live instant is never rolled back.

The race seen in long streaming runs: task B finds no write context, task A (which had the lock)
publishes the context and releases the lock, B then wins the lock and, without looking again,
begins a second instant for the same micro-batch, whose rollback of pending writes removed A's
live instant under A's running tasks ("Instant ... is no longer in flight").
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.format.heartbeat import heartbeat_path
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator, streaming
from hoodie_sink.table.write.bulk_insert_task import BulkInsertTask
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.streaming import BatchRef
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.operation": "upsert",
}


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "v": pa.array([float(i) for i in range(start, start + n)]),
        }
    )


def test_two_tasks_beginning_one_micro_batch_share_one_instant(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 5), path, OPTS)
    cfg = WriteConfig.from_options(OPTS, path=path)
    ref = BatchRef("q", 7, "run")
    real_load = streaming.load_context
    b_looked, a_done = threading.Event(), threading.Event()

    def load(storage, r):
        ctx = real_load(storage, r)
        if threading.current_thread().name == "task-B" and not b_looked.is_set():
            b_looked.set()  # B has seen no context ...
            assert a_done.wait(30)  # ... and tries the lock only once A has published and released it
        return ctx

    monkeypatch.setattr(streaming, "load_context", load)
    got = {}
    b = threading.Thread(target=lambda: got.setdefault("B", streaming.begin_batch(cfg, rows(0, 1).schema, ref)),
                         name="task-B")  # fmt: skip
    b.start()
    assert b_looked.wait(30)
    got["A"] = streaming.begin_batch(cfg, rows(0, 1).schema, ref)
    a_done.set()
    b.join(30)
    a, bb = got["A"], got["B"]
    assert bb.instant == a.instant  # one instant per micro-batch
    storage = Storage(path)
    assert InstantGuard(storage, a.instant, a.action).alive()  # A's tasks may go on writing
    assert [i.timestamp for i in Timeline.load(storage).pending()] == [a.instant]
    # and the batch commits as one instant
    results = [BulkInsertTask(ctx, TaskIdentity(i, 1, i)).write(rows(10 + 5 * i, 5).to_batches())
               for i, ctx in enumerate((a, bb))]  # fmt: skip
    coordinator.complete(a, [s for r in results for s in r.write_stats])
    assert_table_matches(path, rows(0, 5).to_pylist() + rows(10, 5).to_pylist() + rows(15, 5).to_pylist())


def test_a_write_with_a_live_heartbeat_is_not_rolled_back_an_expired_one_is(tmp_path):
    path = str(tmp_path / "t")
    opts = {
        **OPTS,
        "hoodie.client.heartbeat.interval_in_ms": "500",
        "hoodie.client.heartbeat.tolerable.misses": "1",
    }
    hoodie_sink.write(rows(0, 5), path, opts)
    cfg = WriteConfig.from_options(opts, path=path)
    live = coordinator.begin(cfg, rows(0, 1).schema)  # a writer of another query, still working
    live_files = BulkInsertTask(live, TaskIdentity(0, 1, 1)).write(rows(100, 5).to_batches())
    hoodie_sink.write(rows(5, 5), path, opts)  # begins, and rolls back failed writes
    storage = Storage(path)
    assert InstantGuard(storage, live.instant, live.action).alive()
    coordinator.complete(live, live_files.write_stats)
    assert_table_matches(path, rows(0, 10).to_pylist() + rows(100, 5).to_pylist())

    crashed = coordinator.begin(cfg, rows(0, 1).schema)  # a writer that dies: nobody beats any more
    BulkInsertTask(crashed, TaskIdentity(0, 1, 1)).write(rows(200, 5).to_batches())
    time.sleep(1.2)  # > interval x (misses + 1)
    hoodie_sink.write(rows(10, 5), path, opts)
    assert Timeline.load(storage).pending() == []
    assert not any(crashed.instant in p.name for p in (tmp_path / "t").rglob("*.parquet"))
    assert not storage.exists(heartbeat_path(crashed.instant))
    assert_table_matches(path, rows(0, 15).to_pylist() + rows(100, 5).to_pylist())
