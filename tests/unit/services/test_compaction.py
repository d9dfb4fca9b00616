"""Compaction of merge-on-read tables (issue 12, item 5): plan then execute, inline by trigger, writes
while a plan is pending, a compaction that died, cleaning around it; every state read back with hudi-rs
and our reader and compared with what was written."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.avro_container import decode_record
from hoodie_sink.table.format.compaction_plan import decode_compaction_plan
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.markers import CREATE, create_marker
from hoodie_sink.table.format.timeline.instant import COMPACTION, COMPLETED, DELTA_COMMIT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import compaction
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
}


class Table:
    """A MOR table and the model of what it holds."""

    def __init__(self, path: Path, **options: str):
        self.path = str(path)
        self.options = {**OPTS, **options}
        self.rows: dict[int, dict] = {}

    def write(self, ids, ts: int, operation: str = "upsert") -> None:
        rows = [{"id": i, "part": "ab"[i % 2], "ts": ts, "v": f"v{ts}-{i}"} for i in ids]
        hoodie_sink.write(
            pa.Table.from_pylist(rows),
            self.path,
            {**self.options, "hoodie.datasource.write.operation": operation},
        )
        for r in rows:
            if operation == "delete":
                self.rows.pop(r["id"], None)
            else:
                self.rows[r["id"]] = r

    def check(self) -> pa.Table:
        return assert_table_matches(self.path, list(self.rows.values()))

    @property
    def config(self) -> WriteConfig:
        return WriteConfig.from_options(self.options, path=self.path)


def instants(path: str, action: str) -> list[Instant]:
    return [i for i in Timeline.load(Storage(path)).instants if i.action == action]


def test_inline_compaction_by_number_of_deltacommits(tmp_path):
    t = Table(tmp_path / "t", **{"hoodie.compact.inline.max.delta.commits": "3"})
    t.write(range(60), 1, "bulk_insert")
    t.write(range(0, 60, 4), 2)
    before = {r["_hoodie_record_key"]: r["_hoodie_commit_time"] for r in t.check().to_pylist()}
    assert not instants(t.path, COMPACTION)
    t.write(range(1, 60, 5), 3)  # the third deltacommit: compaction follows
    storage = Storage(t.path)
    (c,) = {i.timestamp for i in instants(t.path, COMPACTION)}
    names = {i.file_name for i in Timeline.load(storage).instants if i.timestamp == c}
    assert names == {f"{c}.compaction.requested", f"{c}.compaction.inflight", f"{c}.commit"}
    assert storage.read_bytes(f".hoodie/{c}.compaction.inflight") == b""
    plan = decode_record(storage.read_bytes(f".hoodie/{c}.compaction.requested"))
    assert plan["version"] == 2 and len(plan["operations"]) == 2
    for op in plan["operations"]:
        assert "/" not in op["dataFilePath"] and all("/" not in p for p in op["deltaFilePaths"])
        assert op["metrics"]["TOTAL_LOG_FILES"] == len(op["deltaFilePaths"]) >= 1
    md = json.loads(storage.read_bytes(f".hoodie/{c}.commit"))
    assert md["operationType"] == "COMPACT" and md["compacted"] is True
    assert {s["prevCommit"] for s in md["partitionToWriteStats"]["a"]} <= {
        i.timestamp for i in instants(t.path, DELTA_COMMIT)
    }
    assert all(s["totalLogFilesCompacted"] >= 1 for p in md["partitionToWriteStats"].values() for s in p)
    after = t.check()
    # every latest slice is now a base file of the compaction, no logs
    view = FileSystemView.load(storage)
    assert {sl.base_instant for sl in view.read_slices()} == {c} and not any(
        sl.log_files for sl in view.read_slices()
    )
    # the rows keep their commit times (Java's preserve.commit.metadata)
    times = {r["_hoodie_record_key"]: r["_hoodie_commit_time"] for r in after.to_pylist()}
    assert all(times[k] == v for k, v in before.items() if int(k) % 5 != 1)
    assert all(r["_hoodie_file_name"] == BaseFile.parse(r["_hoodie_partition_path"], r["_hoodie_file_name"]).name
               for r in read_snapshot(t.path).to_pylist())  # fmt: skip
    t.write(range(2, 60, 6), 4)  # logs of the new slice
    t.check()


def test_writes_while_a_compaction_is_pending(tmp_path):
    t = Table(tmp_path / "t", **{"hoodie.compact.inline": "false"})
    t.write(range(40), 1, "bulk_insert")
    t.write(range(0, 40, 3), 2)
    c = compaction.schedule(Storage(t.path), t.config, force=True)
    assert c is not None
    t.write(range(1, 40, 3), 3)  # into the slice of the compaction instant
    t.write(range(0, 10), 4, "delete")
    ours = {r["id"]: r["v"] for r in read_snapshot(t.path).to_pylist()}
    assert ours == {i: r["v"] for i, r in t.rows.items()}
    view = FileSystemView.load(Storage(t.path))
    assert {lf.base_instant for lf in view.listing.log_files} >= {c}
    compaction.execute(Storage(t.path), c, t.config)
    t.check()  # hudi-rs shows the new slice's logs once the compaction has committed
    t.write(range(20, 40), 5)
    t.check()


def test_a_dead_compaction_is_executed_again(tmp_path):
    t = Table(tmp_path / "t", **{"hoodie.compact.inline": "false"})
    t.write(range(30), 1, "bulk_insert")
    t.write(range(0, 30, 3), 2)
    storage = Storage(t.path)
    c = compaction.schedule(storage, t.config, force=True)
    assert c is not None
    # a run that died: inflight, one half-written base file of the compaction instant
    storage.write_atomic(f".hoodie/{c}.compaction.inflight", b"")
    op = decode_compaction_plan(storage.read_bytes(f".hoodie/{c}.compaction.requested"))[0]
    half = f"{op.partition_path}/{op.file_id}_0-999998-7_{c}.parquet"
    create_marker(storage, c, op.partition_path, half.rsplit("/", 1)[1], CREATE)
    storage.write_atomic(half, b"PAR1 not a parquet file")
    (result,) = compaction.run(t.config, force=False)
    assert result.instant == c and result.file_groups == 2
    assert not storage.exists(half)
    t.check()


def test_deletes_and_compaction_of_an_emptied_file_group(tmp_path):
    t = Table(tmp_path / "t", **{"hoodie.compact.inline.max.delta.commits": "2"})
    t.write(range(10), 1, "bulk_insert")
    t.write(range(0, 10, 2), 2, "delete")  # partition a emptied; compaction follows
    t.check()
    t.write([0, 2, 4], 3)  # re-inserted after the compaction
    t.check()


def test_triggers():
    cfg = compaction.CompactionConfig.of(
        WriteConfig.from_options({**OPTS, "hoodie.compact.inline.max.delta.commits": "2"}, path="/x")
    )
    deltas = [Instant(f"2026010100000{i}000", DELTA_COMMIT, COMPLETED) for i in range(3)]

    def timeline(*instants):
        return Timeline(tuple(sorted(instants)))

    assert not compaction.compaction_due(cfg, timeline(deltas[0]))
    assert compaction.compaction_due(cfg, timeline(deltas[0], deltas[1]))
    done = [
        Instant("20260101000001500", COMPACTION, REQUESTED),
        Instant("20260101000001500", "commit", COMPLETED),
    ]
    assert not compaction.compaction_due(cfg, timeline(*deltas[:2], *done))
    assert compaction.compaction_due(
        cfg, timeline(*deltas, Instant("20260101000003000", DELTA_COMMIT, COMPLETED), *done)
    )
    timed = replace(cfg, trigger="TIME_ELAPSED", max_delta_seconds=60)
    t0 = 1767225600000  # 2026-01-01T00:00:00Z
    assert not compaction.compaction_due(timed, timeline(deltas[0]), now_ms=t0 + 30_000)
    assert compaction.compaction_due(timed, timeline(deltas[0]), now_ms=t0 + 61_000)
    both = replace(cfg, trigger="NUM_AND_TIME", max_delta_seconds=60)
    assert not compaction.compaction_due(both, timeline(*deltas[:2]), now_ms=t0 + 30_000)
    assert compaction.compaction_due(both, timeline(*deltas[:2]), now_ms=t0 + 61_000)


def test_compaction_of_a_copy_on_write_table_is_refused(tmp_path):
    path = str(tmp_path / "cow")
    hoodie_sink.write(pa.table({"id": [1], "part": ["a"], "ts": [1]}), path,
                      {**OPTS, "hoodie.datasource.write.table.type": "COPY_ON_WRITE"})  # fmt: skip
    with pytest.raises(HoodieConfigError, match="COPY_ON_WRITE"):
        hoodie_sink.compact(path)


def test_cleaning_keeps_what_a_pending_compaction_needs(tmp_path):
    t = Table(tmp_path / "t", **{"hoodie.compact.inline": "false", "hoodie.cleaner.commits.retained": "1",
                                  "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})  # fmt: skip
    t.write(range(20), 1, "bulk_insert")
    t.write(range(0, 20, 2), 2)
    c = compaction.schedule(Storage(t.path), t.config, force=True)
    for ts in range(3, 7):  # cleaning runs after each write
        t.write(range(ts, 20, 4), ts)
    plan = decode_compaction_plan(Storage(t.path).read_bytes(f".hoodie/{c}.compaction.requested"))
    for op in plan:
        for name in (op.base_file, *op.log_files):
            assert Storage(t.path).exists(f"{op.partition_path}/{name}"), name
    compaction.execute(Storage(t.path), c, t.config)
    t.check()
    for ts in range(7, 10):  # now the compacted slices' predecessors go
        t.write(range(ts, 20, 5), ts)
    t.check()
    assert not any(Storage(t.path).exists(f"{op.partition_path}/{op.base_file}") for op in plan)


def test_clustering_merges_the_logs_of_merge_on_read_slices(tmp_path):
    """Issue 12, item 6: clustering rewrites small file groups with their log files merged in."""
    t = Table(tmp_path / "t", **{"hoodie.compact.inline": "false"})
    for start in range(0, 60, 15):  # four small file groups per partition
        t.write(range(start, start + 15), 1, "bulk_insert")
    t.write(range(0, 60, 4), 2)  # logs on every file group
    t.write(range(0, 60, 9), 3, "delete")
    storage = Storage(t.path)
    assert any(sl.log_files for sl in FileSystemView.load(storage).read_slices())
    result = hoodie_sink.cluster(t.path, {**t.options, "hoodie.clustering.plan.strategy.sort.columns": "v"})
    assert result is not None and result.input_files == 8
    plan = Timeline.load(storage).completed(("replacecommit",))
    assert len(plan) == 1
    slices = FileSystemView.load(storage).read_slices()
    assert len(slices) == 2 and not any(sl.log_files for sl in slices)
    t.check()
    t.write(range(1, 60, 5), 4)  # updates of the clustered file groups: logs again
    t.check()
    (c,) = [r.instant for r in hoodie_sink.compact(t.path, t.options)]
    assert c
    t.check()


def test_long_run_with_compaction_cleaning_and_archival(tmp_path):
    """Issue 12 acceptance: cleaning and archival (issue 11) on a merge-on-read table: the cleaner
    removes slices superseded by compactions (never a log a read needs), archival moves
    deltacommits and compactions (with their plans, as Java archives them) out of the timeline."""
    from hoodie_sink.table.services.archival import load_archived_timeline

    t = Table(tmp_path / "t", **{"hoodie.compact.inline.max.delta.commits": "3",
                                  "hoodie.cleaner.commits.retained": "2",
                                  "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6"})  # fmt: skip
    t.write(range(200), 0, "bulk_insert")
    for ts in range(1, 25):
        t.write(range(ts % 7, 200, 7), ts)
        if ts % 6 == 0:
            t.write(range(ts, 200, 50), ts, "delete")
    t.check()
    storage = Storage(t.path)
    archived = load_archived_timeline(storage)
    plans = [e for e in archived if e.instant.action == COMPACTION]
    assert plans and all(e.details and e.details["operations"] for e in plans)
    assert {e.instant.action for e in archived} >= {"deltacommit", "commit", "compaction", "clean"}
    # bounded: the active timeline and the files on storage stay small
    assert len(Timeline.load(storage).completed()) <= 8
    listing = FileSystemView.load(storage).listing
    assert len(listing.base_files) + len(listing.log_files) < 60
