"""Restore and rollback on merge-on-read tables (issue 25, items 4 and 5), checked against a model
with hudi-rs and our reader.

Item 4: a deltacommit that updated rows of an older file slice wrote a log file named with that
slice's base instant, not with its own: a rollback that deletes "the files named with the instant"
left it behind.  Reads were right just after the restore (its blocks belong to no completed
instant) and went wrong later: a GLOBAL_BLOOM delete, a BLOOM delete and re-insert of one key (the
writer's base-file rewrite folds the slice's logs), or no write at all to that partition once the
savepoint is gone and archival moves the timeline past the rolled-back instant (blocks older than
the timeline count as committed).

Item 5: a restore left the plans of compactions after the savepoint (`<c>.compaction.requested`/
`.inflight`, also those of completed compactions), so they were pending again: executed later with
a time older than the restore, or failing for good when the plan names a log file the restore
deleted.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.file_group import LogFile, log_file_name
from hoodie_sink.table.format.markers import marker_dir
from hoodie_sink.table.format.rollback_metadata import decode_rollback_metadata
from hoodie_sink.table.format.savepoint_metadata import RESTORE, decode_restore_metadata
from hoodie_sink.table.format.timeline.instant import COMPACTION, DELTA_COMMIT, ROLLBACK, Instant
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline, TimelineStore
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import compaction
from hoodie_sink.table.services import savepoint as sp
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import rollback_failed_writes
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
}


class Mor:
    """A merge-on-read table and the model of what it holds (id -> row)."""

    def __init__(self, path, **options: str):
        self.path = str(path)
        self.options = {**OPTS, **options}
        self.rows: dict[int, dict] = {}
        self.storage = Storage(self.path)

    def write(self, ids, ts: int, operation: str = "upsert", **options: str) -> None:
        rows = [{"id": i, "part": "ab"[i % 2], "ts": ts, "v": f"v{ts}-{i}"} for i in ids]
        hoodie_sink.write(
            pa.Table.from_pylist(rows),
            self.path,
            {**self.options, **options, "hoodie.datasource.write.operation": operation},
        )
        for r in rows:
            if operation == "delete":
                self.rows.pop(r["id"], None)
            else:
                self.rows[r["id"]] = r

    def check(self) -> None:
        assert_table_matches(self.path, list(self.rows.values()))

    def log_files(self) -> set[str]:
        return {p for p in self.storage.walk_files("") if not p.startswith(".hoodie") and ".log." in p}

    def restore_after(self, writes) -> str:
        """Savepoint, `writes()` (changes the table), restore: the model goes back to the savepoint."""
        saved = dict(self.rows)
        info = sp.create_savepoint(self.path)
        writes()
        sp.restore(self.path, info.instant)
        self.rows = saved
        self.check()
        return info.instant


# ---------------------------------------------------------------------------------------- item 4


def test_a_global_bloom_delete_after_a_restore_brings_back_no_rolled_back_update(tmp_path):
    t = Mor(tmp_path / "t", **{"hoodie.index.type": "GLOBAL_BLOOM"})
    t.write(range(8), 1)
    t.restore_after(lambda: t.write([0, 1, 2, 5], 2))  # appends logs to the first slices
    t.write([3], 3, "delete")
    t.check()
    t.write([9, 1], 4)
    t.check()


@pytest.mark.parametrize("key,ts", [(1, 0), (3, 3)])
def test_a_bloom_delete_and_reinsert_after_a_restore_brings_back_no_rolled_back_update(tmp_path, key, ts):
    t = Mor(tmp_path / "t", **{"hoodie.index.type": "BLOOM"})
    t.write(range(8), 1)
    t.restore_after(lambda: t.write([1, 2, 5], 2))
    t.write([key], 3, "delete")
    t.check()
    t.write([key], ts)  # the re-insert rewrites the slice's base file, folding its logs
    t.check()


def test_archival_past_a_rolled_back_deltacommit_brings_back_none_of_its_rows(tmp_path):
    t = Mor(tmp_path / "t")
    t.write(range(8), 1)
    savepoint = t.restore_after(lambda: t.write([1, 3, 5], 2))  # partition b only
    sp.delete_savepoint(t.path, savepoint)
    archiving = {
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
        "hoodie.cleaner.commits.retained": "1",
        # archival stops at the metadata table's latest compaction (Java's rule): compact often
        "hoodie.metadata.compact.max.delta.commits": "2",
    }
    for k in range(8):  # partition a only: nothing is written to b again
        t.write([0, 2], 10 + k, **archiving)
    assert Timeline.load(t.storage).earliest_write_instant_time() > savepoint  # archived past it
    t.check()


def test_restore_deletes_the_logs_a_completed_deltacommit_added_to_older_slices(tmp_path):
    t = Mor(tmp_path / "t")
    t.write(range(6), 1)
    before = t.log_files()
    undone: list[str] = []

    def update() -> None:
        t.write([0, 1, 2], 2)
        undone.extend(t.log_files() - before)

    t.restore_after(update)
    assert undone and all(LogFile.parse(*p.rsplit("/", 1)) for p in undone)
    assert t.log_files() == before  # every log the deltacommit wrote is gone
    # ... and listed in the rollback metadata inside the restore, as deleted files (full paths)
    store = TimelineStore(t.storage)
    [restore] = Timeline.load(t.storage).completed((RESTORE,))
    md = decode_restore_metadata(t.storage.read_bytes(store.path(restore)))
    [[rollback]] = md["hoodieRestoreMetadata"].values()
    deleted = {f for p in rollback["partitionMetadata"].values() for f in p["successDeleteFiles"]}
    assert {f.rsplit("/", 2)[-2] + "/" + f.rsplit("/", 1)[-1] for f in deleted} >= set(undone)
    # as Java's finishRestore: the rollbacks it ran live on only inside the restore's metadata
    assert not [i for i in Timeline.load(t.storage).instants if i.action == ROLLBACK]


def test_a_restore_that_died_after_planning_a_rollback_finishes_it(tmp_path, monkeypatch):
    t = Mor(tmp_path / "t")
    t.write(range(6), 1)
    before = t.log_files()
    saved = dict(t.rows)
    info = sp.create_savepoint(t.path)
    t.write([0, 1, 2], 2)
    t.write([3, 4], 3)
    real = sp.execute_rollback

    def dies(*args, **kwargs):
        raise OSError("killed after planning")

    monkeypatch.setattr(sp, "execute_rollback", dies)
    with pytest.raises(OSError, match="killed"):
        sp.restore(t.path, info.instant)
    monkeypatch.setattr(sp, "execute_rollback", real)
    sp.restore(t.path, info.instant)
    t.rows = saved
    t.check()
    assert t.log_files() == before


CRASHED = "20300101000000000"  # newer than anything the tests write


def java_crashed_append(t: Mor, partition: str, blocks_of: list[str], tail: bytes = b"") -> tuple[str, str]:
    """A Java deltacommit that died after appending to the latest slice of a file group in
    `partition`: a new log version holding blocks with INSTANT_TIME `blocks_of`, and Java 0.15's
    APPEND marker, named like the slice's base file (docs/hudi/format.md#markers).  (log path, base
    file path)."""
    storage = t.storage
    base = next(p for p in storage.walk_files(partition) if p.endswith(".parquet"))
    file_id, _, base_instant = base.rsplit("/", 1)[1].removesuffix(".parquet").split("_")
    versions = [
        lf.version
        for p in t.log_files()
        if (lf := LogFile.parse(*p.rsplit("/", 1))) and lf.file_id == file_id
    ]
    log = f"{partition}/{log_file_name(file_id, base_instant, max(versions, default=0) + 1, '1-0-1')}"
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "int"}]}
    body = b"".join(
        log_format.encode_block(log_format.avro_data_block(schema, [{"x": 1}], i)) for i in blocks_of
    )
    storage.write_bytes(log, body + tail)
    store = TimelineStore(storage)
    storage.write_bytes(store.path(Instant(CRASHED, DELTA_COMMIT, "requested")), b"")
    storage.write_bytes(store.path(Instant(CRASHED, DELTA_COMMIT, "inflight")), b"")
    storage.write_bytes(f"{marker_dir(CRASHED)}/{base}.marker.APPEND", b"")
    return log, base


# the crash may cut the file inside its last block (a length past the end, or the length itself)
DAMAGED_TAILS = {
    "whole": b"",
    "cut_block": b"#HUDI#" + struct.pack(">q", 1000) + b"\0" * 10,
    "cut_length": b"#HUDI#\0",
}


@pytest.mark.parametrize("tail", DAMAGED_TAILS.values(), ids=DAMAGED_TAILS.keys())
def test_rollback_of_a_crashed_java_append_deletes_the_log_it_wrote_in_an_older_slice(tmp_path, tail):
    t = Mor(tmp_path / "t")
    t.write(range(6), 1)
    log, base = java_crashed_append(t, "b", [CRASHED], tail)
    rolled = rollback_failed_writes(t.storage, ActiveTimeline.load(t.storage))
    assert [i.timestamp for i in rolled] == [CRASHED]
    assert not t.storage.exists(log) and t.storage.exists(base)
    [rb] = Timeline.load(t.storage).completed((ROLLBACK,))
    md = decode_rollback_metadata(t.storage.read_bytes(TimelineStore(t.storage).path(rb)))
    assert [f.endswith(log) for f in md["partitionMetadata"]["b"]["successDeleteFiles"]] == [True]
    t.check()


def test_rollback_refuses_a_log_mixing_the_crashed_appends_with_other_blocks(tmp_path):
    t = Mor(tmp_path / "t")
    t.write(range(6), 1)
    committed = Timeline.load(t.storage).completed()[-1].timestamp
    log, base = java_crashed_append(t, "b", [committed, CRASHED])  # an append on HDFS
    with pytest.raises(HoodieTableError, match="holds blocks of other instants"):
        rollback_failed_writes(t.storage, ActiveTimeline.load(t.storage))
    assert t.storage.exists(log) and t.storage.exists(base)


# ---------------------------------------------------------------------------------------- item 5


def _compaction_files(storage: Storage, after: str) -> list[str]:
    return [
        i.file_name for i in Timeline.load(storage).instants if i.action == COMPACTION and i.timestamp > after
    ]


@pytest.mark.parametrize("state", ["requested", "inflight", "completed"])
def test_restore_undoes_the_compactions_after_the_savepoint(tmp_path, state):
    t = Mor(tmp_path / "t")
    t.write(range(8), 1)
    t.write([0, 1], 2)  # logs before the savepoint
    cfg = WriteConfig.from_options(t.options, path=t.path)

    def writes_and_a_compaction() -> None:
        t.write([2, 3, 4], 3)  # logs the plan below names, deleted by the restore
        c = compaction.schedule(t.storage, cfg, force=True)
        assert c is not None
        if state == "inflight":  # a run that died after writing some of its base files
            compaction.execute(t.storage, c, cfg)
            store = TimelineStore(t.storage)
            t.storage.delete(store.path(Instant(c, "commit")))
        elif state == "completed":
            compaction.execute(t.storage, c, cfg)
            t.write([5], 4)

    savepoint = t.restore_after(writes_and_a_compaction)
    timeline = Timeline.load(t.storage)
    assert not timeline.pending((COMPACTION,)), "a compaction of the restored table is pending again"
    assert _compaction_files(t.storage, savepoint) == []
    assert [i for i in timeline.instants if i.timestamp > savepoint and i.action != RESTORE] == []
    # the table carries on: writes, then a compaction of its own, then writes again
    t.write([0, 6], 5)
    t.check()
    [done] = compaction.run(cfg)
    assert done.instant > savepoint and done.file_groups
    t.check()
    t.write([1, 7], 6)
    t.check()


# ------------------------------------------------------------------------------ random, model-checked

ARCHIVING = {
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.cleaner.commits.retained": "1",
}


def random_rounds(t: Mor, rng: random.Random, rounds: range, compactions: str, **options: str) -> None:
    """Upserts (updates of older slices and inserts), deletes, and compactions: `compactions` is
    "leave" (scheduled, some executed, some left pending) or "run" (each executed at once)."""
    cfg = WriteConfig.from_options({**t.options, **options}, path=t.path)
    for r in rounds:
        x = rng.random()
        if x < 0.2 and t.rows:
            t.write(rng.sample(sorted(t.rows), min(3, len(t.rows))), r, "delete", **options)
        elif x < 0.35:
            c = compaction.schedule(t.storage, cfg, force=True)
            if c is not None and (compactions == "run" or rng.random() < 0.5):
                compaction.execute(t.storage, c, cfg)
        else:
            t.write(rng.sample(range(24), 6), r, **options)


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_BLOOM"])
@pytest.mark.parametrize("seed", range(2))
def test_random_merge_on_read_writes_restored_then_carried_on(tmp_path, index, seed):
    rng = random.Random(seed)
    t = Mor(tmp_path / "t", **{"hoodie.index.type": index})
    t.write(range(12), 0)
    random_rounds(t, rng, range(1, 7), "run")
    savepoint = t.restore_after(lambda: random_rounds(t, rng, range(100, 110), "leave"))
    assert not Timeline.load(t.storage).pending()
    random_rounds(t, rng, range(200, 208), "run")
    t.check()
    sp.delete_savepoint(t.path, savepoint)
    random_rounds(t, rng, range(300, 310), "run", **ARCHIVING)  # archival moves past the restore
    assert Timeline.load(t.storage).earliest_write_instant_time() > savepoint
    t.check()
