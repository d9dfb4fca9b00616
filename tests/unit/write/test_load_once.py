"""Issue 9: a write loads the timeline once and reads the commit metadata it needs once, so what a
write asks of storage does not grow with the table's history (5 commits or 50: the same calls).

Storage calls are counted through a monkeypatched `Storage` (every instance the write creates),
by kind: listings of `.hoodie/` (timeline loads, and the new instant's same-time check), reads of
completed commit files, and per-file size calls."""

from __future__ import annotations

import re
import threading
from collections import Counter
from contextlib import contextmanager

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table import client
from hoodie_sink.table.format.metadata_table import is_metadata_storage
from hoodie_sink.table.format.timeline.instant import COMMIT, COMPLETED, INFLIGHT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import streaming
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.streaming import BatchRef
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.operation": "upsert",
    # the write path alone; what the table services after the commit read is measured in
    # tests/unit/services/test_services_cost.py
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}
_COMMIT_FILE = re.compile(r"^\.hoodie/\d+\.(commit|deltacommit|replacecommit)$")


def rows(start: int, n: int, ts: int = 1) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "p": pa.array([f"p{i % 2}" for i in ids]),
        "ts": pa.array([ts] * n, pa.int64()),
    })  # fmt: skip


def table_with_commits(path: str, commits: int) -> list[dict]:
    written = []
    for c in range(commits):
        batch = rows(2 * c, 2)
        hoodie_sink.write(batch, path, OPTS)  # inserts fill the small files: a new file slice each
        written += batch.to_pylist()
    return written


@contextmanager
def storage_calls(monkeypatch):
    counts: Counter = Counter()

    def kind(storage: Storage, method: str, rel: str) -> str | None:
        # the metadata table is a table of its own, at <table>/.hoodie/metadata
        table = "metadata " if is_metadata_storage(storage) else ""
        if method in ("list_dir", "list_names") and rel.rstrip("/") == ".hoodie":
            return f"{table}timeline listings"
        if method == "read_bytes" and _COMMIT_FILE.match(rel):
            return f"{table}commit file reads"
        if method == "size":
            return "file size calls"
        return None

    # list_names may call list_dir: count the outer call only, per thread (a write merges file
    # groups on several threads: a call on one must not hide a call on another)
    local = threading.local()
    lock = threading.Lock()

    with monkeypatch.context() as m:
        for method in ("list_names", "list_dir", "read_bytes", "size"):
            real = getattr(Storage, method)

            def counted(self, rel, *a, _real=real, _method=method, **k):
                depth = getattr(local, "depth", 0)
                if not depth and (what := kind(self, _method, rel)) is not None:
                    with lock:
                        counts[what] += 1
                local.depth = depth + 1
                try:
                    return _real(self, rel, *a, **k)
                finally:
                    local.depth = depth

            m.setattr(Storage, method, counted)
        yield counts


def test_a_write_reads_the_same_from_storage_for_5_and_50_commits(tmp_path, monkeypatch):
    seen = {}
    for commits in (5, 50):
        path = str(tmp_path / f"t{commits}")
        written = table_with_commits(path, commits)
        update = rows(0, 4, ts=2)  # two updates, two inserts
        with storage_calls(monkeypatch) as counts:
            hoodie_sink.write(update, path, OPTS)
        seen[commits] = dict(counts)
        by_id = {r["id"]: r for r in written} | {r["id"]: r for r in update.to_pylist()}
        assert_table_matches(path, list(by_id.values()))
    assert seen[5] == seen[50]
    # begin: one timeline load, one listing for the new instant's same-time check; the commit:
    # one load for the clustering-conflict check (it must see what happened since begin)
    assert seen[50].get("timeline listings") == 3
    # the metadata table's: at begin (its services), for the listing, and under its lock at commit
    assert seen[50].get("metadata timeline listings") == 3
    assert seen[50].get("commit file reads") == 1  # the newest commit: schema and record size
    # only of the 2 files written: the table's file sizes come with its listing
    assert seen[50].get("file size calls", 0) <= 2


def micro_batch(path: str, batch_id: int, data: pa.Table) -> None:
    """One micro-batch as the stream sink runs it: the first task begins it, writes, the driver
    commits it with the checkpoint (datasource/stream_writer.py)."""
    cfg = WriteConfig.from_options(OPTS, path=path)
    ref = BatchRef("q", batch_id, "run")
    ctx = streaming.begin_batch(cfg, data.schema, ref)
    result = client.write_task(ctx, TaskIdentity(), data.to_batches())
    storage = Storage(path)
    ctx = streaming.load_context(storage, ref)
    checkpoints = streaming.committed_checkpoints(storage)
    assert not streaming.batch_committed(checkpoints, "q", batch_id)
    client.complete(ctx, [result], streaming.with_checkpoint(checkpoints, "q", batch_id))
    streaming.forget_batch(storage, ref)


def test_a_micro_batch_reads_the_same_from_storage_for_5_and_50_commits(tmp_path, monkeypatch):
    seen = {}
    for commits in (5, 50):
        path = str(tmp_path / f"t{commits}")
        written = table_with_commits(path, commits)
        micro_batch(path, 0, rows(1000, 2))  # the stream's first commit carries its checkpoint
        with storage_calls(monkeypatch) as counts:
            micro_batch(path, 1, rows(2000, 2))
        seen[commits] = dict(counts)
        assert streaming.is_committed(Storage(path), "q", 1)
        assert_table_matches(path, written + rows(1000, 2).to_pylist() + rows(2000, 2).to_pylist())
    assert seen[5] == seen[50]
    # task: one load for the checkpoint check and the whole begin, plus the same-time check;
    # driver: one load for the checkpoints (replay check and carried-forward map), one for conflicts
    assert seen[50].get("timeline listings") == 4
    assert seen[50].get("metadata timeline listings") == 3  # as for a batch write
    assert seen[50].get("commit file reads") == 2  # the newest commit, once per process
    assert seen[50].get("file size calls", 0) <= 2


def test_visibility_checks_do_not_rescan_the_timeline(monkeypatch):
    """A file-system view asks is_committed once per data file: the completed instants are
    collected once per timeline, not once per question (files x instants on a long history)."""
    instants = []
    for i in range(1000):
        ts = f"2026010100{i // 60 % 60:02d}{i % 60:02d}000"
        instants += [Instant(ts, COMMIT, s) for s in (REQUESTED, INFLIGHT, COMPLETED)]
    timeline = Timeline(tuple(sorted(instants)))
    looked = Counter()
    real = Instant.is_completed

    def counted(self):
        looked["is_completed"] += 1
        return real.fget(self)

    monkeypatch.setattr(Instant, "is_completed", property(counted))
    assert all(timeline.is_committed(i.timestamp) for i in instants[::3])
    assert not timeline.is_committed("20270101000000000")
    assert looked["is_completed"] <= len(instants)
