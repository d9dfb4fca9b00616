"""A compaction scheduled beside a writer (issue 25, item 7): the scheduler checks that no write is
pending, lists the slices and publishes its plan; a write that starts in that window must not append
to a slice the plan compacts without its log (its update would be lost when the compaction commits).
The interleavings are forced with hooks; every table is read back with our reader and hudi-rs and
compared with the model (what was written)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from hoodie_sink.table.format.heartbeat import Heartbeat
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.timeline.instant import COMMIT, COMPACTION, DELTA_COMMIT, format_instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.service_lock import STALE_LOCK_SECONDS, lock_path, service_lock
from hoodie_sink.table.services import compaction
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import compaction_fence, coordinator
from tests.unit.services.test_compaction import Table

REPO = Path(__file__).resolve().parents[3]


def _table(tmp_path) -> Table:
    t = Table(tmp_path / "t", **{"hoodie.compact.inline": "false"})
    t.write(range(40), 1, "bulk_insert")
    t.write(range(0, 40, 3), 2)  # logs in every file group: all of them are planned
    return t


def _ours(t: Table) -> dict[int, str]:
    return {r["id"]: r["v"] for r in read_snapshot(t.path).to_pylist()}


def _model(t: Table) -> dict[int, str]:
    return {i: r["v"] for i, r in t.rows.items()}


def _completed(path: str, action: str) -> list[str]:
    return [i.timestamp for i in Timeline.load(Storage(path)).completed((action,))]


def test_a_write_starting_between_the_check_and_the_plan_loses_nothing(tmp_path, monkeypatch):
    """The write starts after the scheduler found no pending write and before its plan is
    published.  Before the fix it chose its slices from a timeline without the plan, appended to
    the old slices, committed, and its updates vanished once the compaction committed."""
    t = _table(tmp_path)
    stopped = threading.Event()  # the writer finished, or waits for the scheduler
    errors: list[BaseException] = []

    def write() -> None:
        try:
            t.write(range(0, 40, 2), 3)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            stopped.set()

    writer = threading.Thread(target=write)
    real_wait = compaction_fence.wait_while_compaction_is_scheduled

    def waiting(storage):
        stopped.set()
        real_wait(storage)

    monkeypatch.setattr(coordinator, "wait_while_compaction_is_scheduled", waiting, raising=False)
    real_plan = compaction.plan_operations

    def between_listing_and_plan(view, excluded):
        # the scheduler has found no pending write and listed the slices; no plan published yet
        if not writer.is_alive() and not stopped.is_set():
            writer.start()
            assert stopped.wait(60), "the writer neither finished nor waited"
        return real_plan(view, excluded)

    monkeypatch.setattr(compaction, "plan_operations", between_listing_and_plan)
    c = compaction.schedule(Storage(t.path), t.config, force=True)
    writer.join(60)
    assert not writer.is_alive() and not errors, errors
    assert c is not None
    assert _ours(t) == _model(t)  # hudi-rs shows the new slice's logs only once c has committed
    compaction.execute(Storage(t.path), c, t.config)
    assert _ours(t) == _model(t)
    t.check()  # the write's updates are there after the compaction (ours and hudi-rs)
    (w,) = _completed(t.path, DELTA_COMMIT)[-1:]
    assert w > c  # Java's rule: no write pending before a compaction
    t.write(range(1, 40, 4), 4)
    t.check()


def test_a_write_stamped_before_the_plan_and_published_after_it_starts_again(tmp_path, monkeypatch):
    """The write takes its instant time, the whole scheduling happens, then the write publishes
    its instant: its time is earlier than the plan's.  Before the fix it wrote to the old slices
    (its timeline had no plan) and lost its updates at the compaction; its logs may not go to the
    plan's slice either (a write earlier than the compaction there is hidden as of its own time):
    it starts again at a time after the plan's."""
    t = _table(tmp_path)
    zone = read_table_config(Storage(t.path)).timeline_zone
    plans: list[str] = []

    class SchedulingHeartbeat(Heartbeat):
        def beat(self) -> None:
            super().beat()
            if not plans:  # the first beat of the write, before its instant appears
                while format_instant(datetime.now(timezone.utc), zone) <= self.instant:
                    pass  # the plan's time is later than the write's, as its clock says
                c = compaction.schedule(Storage(t.path), t.config, force=True)
                assert c is not None and c > self.instant
                plans.append(c)

    monkeypatch.setattr(coordinator, "Heartbeat", SchedulingHeartbeat)
    t.write(range(0, 40, 2), 3)
    (c,) = plans
    assert _ours(t) == _model(t)
    compaction.execute(Storage(t.path), c, t.config)
    assert _ours(t) == _model(t)
    t.check()
    timeline = Timeline.load(Storage(t.path))
    assert not timeline.pending((DELTA_COMMIT,))  # the first instant of the write is gone
    (w,) = _completed(t.path, DELTA_COMMIT)[-1:]
    assert w > c


def test_a_plan_waits_for_a_write_in_flight(tmp_path, monkeypatch):
    """The other order: the write's instant is there when the scheduler checks: no plan."""
    t = _table(tmp_path)
    outcome: list[str | None] = []
    real_wait = compaction_fence.wait_while_compaction_is_scheduled

    def schedule_now(storage):
        if not outcome:
            outcome.append(compaction.schedule(Storage(t.path), t.config, force=True))
        real_wait(storage)

    monkeypatch.setattr(coordinator, "wait_while_compaction_is_scheduled", schedule_now)
    t.write(range(0, 40, 2), 3)
    assert outcome == [None]
    assert not [i for i in Timeline.load(Storage(t.path)).instants if i.action == COMPACTION]
    (result,) = compaction.run(t.config)
    assert result.file_groups > 0
    t.check()


def test_a_write_waits_only_for_a_live_scheduler(tmp_path):
    """The fence reads the scheduler's lock as service_lock.py writes and renews it."""
    storage = Storage(str(tmp_path))
    assert lock_path(compaction_fence.SCHEDULING_LOCK) == compaction_fence.SCHEDULING_LOCK_PATH
    assert compaction_fence.STALE_SECONDS == STALE_LOCK_SECONDS
    assert not compaction_fence._held(storage)
    with service_lock(storage, compaction_fence.SCHEDULING_LOCK, "test"):
        assert compaction_fence._held(storage)
    assert not compaction_fence._held(storage)
    storage.write_atomic(compaction_fence.SCHEDULING_LOCK_PATH, b"1.0")  # left by a crash long ago
    compaction_fence.wait_while_compaction_is_scheduled(storage)  # returns at once


_COMPACTOR = """
import json, os, sys
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import compaction
path, options, work = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
runs = 0
while not os.path.exists(os.path.join(work, "stop")) and runs < 500:
    compaction.run(WriteConfig.from_options(options, path=path), force=True)
    runs += 1
    with open(os.path.join(work, "runs.tmp"), "w") as f:
        f.write(str(runs))
    os.replace(os.path.join(work, "runs.tmp"), os.path.join(work, "runs"))
"""


def test_a_compactor_process_beside_a_writer(tmp_path):
    """`hoodie-sink compact` as a process of its own, compacting again and again while this process
    upserts (single-writer mode, no lock provider).  After each write the writer waits for the
    compactor to finish one more run, so that compactions happen all along; the compactor's next
    run then races with the next write as the machine decides.  The end state is the model's."""
    t = _table(tmp_path)
    work = tmp_path / "compactor"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    compactor = subprocess.Popen(
        [sys.executable, "-c", _COMPACTOR, t.path, json.dumps(t.options), str(work)], env=env
    )

    def runs() -> int:
        try:
            return int((work / "runs").read_text())
        except FileNotFoundError:
            return 0

    def wait_for_run_after(n: int) -> None:
        deadline = time.monotonic() + 120
        while runs() <= n:
            assert compactor.poll() is None, "the compactor stopped"
            assert time.monotonic() < deadline, "the compactor made no progress"
            time.sleep(0.01)

    try:
        rng = random.Random(7)
        wait_for_run_after(0)
        for ts in range(3, 15):
            before = runs()
            t.write(rng.sample(range(40), 12), ts)
            wait_for_run_after(before)
    finally:
        (work / "stop").touch()
        assert compactor.wait(120) == 0
    assert _ours(t) == _model(t)
    compaction.run(t.config)  # whatever the compactor left pending, then the rest
    assert len(_completed(t.path, COMMIT)) >= 4
    assert _ours(t) == _model(t)
    t.check()


def test_a_lock_left_by_a_dead_process_on_this_host_is_taken_at_once(tmp_path):
    import os
    import socket
    import subprocess
    import time

    storage = Storage(str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    storage.write_atomic(lock_path("metadata"), f"{time.time()!r} {socket.gethostname()} {dead.pid}".encode())
    started = time.monotonic()
    with service_lock(storage, "metadata", "test", wait_seconds=5):
        assert storage.read_bytes(lock_path("metadata")).decode().endswith(f" {os.getpid()}")
    assert time.monotonic() - started < 2
