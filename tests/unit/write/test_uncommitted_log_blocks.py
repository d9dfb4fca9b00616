"""Issue 25 item 3: the log blocks of a write that died before its commit never become data.

A merge-on-read write is killed after writing its log file, before its commit.  The next writer
comes at once (the dead write's heartbeat is live, so it is rightly left alone) and folds that
file slice's logs: to rewrite its base file (GLOBAL_BLOOM and a delete; BLOOM and a key deleted
in the logs and written again; commit-time ordering with a precombine field), or to find the
stored ordering values its changes must beat (event-time ordering).  Every fold counts only the
blocks of completed instants (docs/hudi/uncommitted-log-blocks.md).  The table is checked against
a model, with our reader and hudi-rs, right after, after the dead instant's rollback, and after a
compaction.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.properties import PROPERTIES_FILE
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.rollback import rollback_failed_writes
from tests.support.tables import assert_table_matches, read_both

BASE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
}
PAYLOAD_KEY = "hoodie.compaction.payload.class"
DEAD_VALUE = 999.0  # what the dead write wrote: never to be read


def rows(ids: list[int], v: float | None = None, ts: int = 0, p: str = "p0") -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "p": [p] * len(ids),
        "v": [float(i) if v is None else v for i in ids],
        "ts": pa.array([ts] * len(ids), pa.int64()),
    })  # fmt: skip


class Model:
    """The rows a reader must see: id -> row."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}

    def upsert(self, t: pa.Table) -> None:
        self.rows.update({r["id"]: r for r in t.to_pylist()})

    def delete(self, ids: list[int]) -> None:
        for i in ids:
            self.rows.pop(i, None)


def write(path: str, options: dict, t: pa.Table, model: Model, operation: str = "upsert") -> None:
    hoodie_sink.write(t, path, {**options, "hoodie.datasource.write.operation": operation})
    if operation == "delete":
        model.delete(t.column("id").to_pylist())
    else:
        model.upsert(t)


def dead_write(path: str, options: dict, t: pa.Table) -> str:
    """A write killed after its task wrote the log file, before the commit (its heartbeat stays live)."""
    cfg = WriteConfig.from_options(options, path=path)
    ctx = coordinator.begin(cfg, t.schema)
    write_path.write_task(ctx, TaskIdentity(0, 1, 1, only_task=True), t.to_batches())
    storage = Storage(path)
    assert any(ctx.instant in _log_instants(storage, p) for p in storage.walk_files("p0") if ".log." in p)
    return ctx.instant


def _log_instants(storage: Storage, rel: str) -> set[str]:
    data = storage.read_bytes(rel)
    return {b.header.get(log_format.INSTANT_TIME, "") for b in log_format.read_blocks(data, rel)}


def check(path: str, model: Model, dead: str) -> None:
    """hudi-rs and our reader agree (read_both), hold none of the dead write's records, and equal
    the model."""
    theirs, _ = read_both(path)
    found = theirs.select(["_hoodie_commit_time", "id", "p", "v", "ts"]).to_pylist()
    leaked = [r for r in found if r["_hoodie_commit_time"] == dead or r["v"] == DEAD_VALUE]
    assert not leaked, f"records of the dead write {dead}: {leaked}"
    assert_table_matches(path, list(model.rows.values()))


def roll_back_dead_write(path: str, options: dict) -> None:
    """The dead write's heartbeat expires: the next rollback removes it."""
    cfg = dataclasses.replace(WriteConfig.from_options(options, path=path), heartbeat_interval_ms=0,
                              heartbeat_misses=0)  # fmt: skip
    storage = Storage(path)
    assert rollback_failed_writes(storage, ActiveTimeline.load(storage), config=cfg)


def then_rollback_and_compaction(path: str, options: dict, model: Model, dead: str) -> None:
    """Right after the next write; after the dead instant's rollback; after a compaction (of a
    slice with a new log: the rewrite left none)."""
    assert dead in {i.timestamp for i in ActiveTimeline.load(Storage(path)).pending()}  # left alone
    check(path, model, dead)
    roll_back_dead_write(path, options)
    assert dead not in {i.timestamp for i in ActiveTimeline.load(Storage(path)).instants}
    check(path, model, dead)
    write(path, options, rows([3], v=33.0), model)
    assert hoodie_sink.compact(path, options)
    check(path, model, dead)


def test_global_bloom_delete_rewrites_without_the_dead_writes_log(tmp_path):
    path, model = str(tmp_path / "t"), Model()
    options = {**BASE, "hoodie.index.type": "GLOBAL_BLOOM"}
    write(path, options, rows([0, 1, 2, 3]), model)
    write(path, options, rows([1], v=10.0), model)  # a committed log block, folded by the rewrite
    dead = dead_write(path, options, rows([2, 3], v=DEAD_VALUE))
    write(path, options, rows([0]), model, operation="delete")  # under GLOBAL_BLOOM: a rewrite
    then_rollback_and_compaction(path, options, model, dead)


def test_bloom_key_deleted_in_logs_and_written_again_rewrites_without_the_dead_writes_log(tmp_path):
    path, model = str(tmp_path / "t"), Model()
    options = {**BASE, "hoodie.index.type": "BLOOM"}
    write(path, options, rows([0, 1, 2, 3]), model)
    write(path, options, rows([0]), model, operation="delete")  # a delete block in the logs
    dead = dead_write(path, options, rows([2, 3], v=DEAD_VALUE))
    write(path, options, rows([0], v=5.0), model)  # key 0 written again: a rewrite
    then_rollback_and_compaction(path, options, model, dead)


def test_bloom_dead_delete_does_not_make_a_rewrite_drop_a_key(tmp_path):
    """The dead write deleted key 2: the key is not tombstoned for the next writer, and a rewrite
    keeps it."""
    path, model = str(tmp_path / "t"), Model()
    options = {**BASE, "hoodie.index.type": "BLOOM"}
    write(path, options, rows([0, 1, 2, 3]), model)
    write(path, options, rows([0]), model, operation="delete")
    cfg_delete = {**options, "hoodie.datasource.write.operation": "delete"}
    dead = dead_write(path, cfg_delete, rows([2]))
    write(path, options, rows([0], v=5.0), model)  # a rewrite of the slice
    then_rollback_and_compaction(path, options, model, dead)


def set_payload_class(path: str, payload: str) -> None:
    """The table's payload class, as a Java writer may have set it (ours refuses to create such a
    merge-on-read table with a precombine field: table_setup.check_merge_on_read)."""
    storage = Storage(path)
    lines = [
        line for line in storage.read_text(PROPERTIES_FILE).splitlines() if not line.startswith(PAYLOAD_KEY)
    ]
    storage.write_atomic(PROPERTIES_FILE, ("\n".join([*lines, f"{PAYLOAD_KEY}={payload}"]) + "\n").encode())


def test_commit_time_ordering_rewrite_without_the_dead_writes_log(tmp_path):
    """OverwriteWithLatestAvroPayload with a precombine field (a Java table): a slice with logs is
    rewritten by the next write (log_writer.rewritten_slices); the dead write's log is its only one."""
    path, model = str(tmp_path / "t"), Model()
    # listed from storage, where the dead write's log is seen; a metadata table does not list it
    # (the next test)
    options = {**BASE, "hoodie.datasource.write.precombine.field": "ts", "hoodie.metadata.enable": "false"}
    write(path, options, rows([0, 1, 2, 3]), model)
    set_payload_class(path, "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload")
    dead = dead_write(path, options, rows([2, 3], v=DEAD_VALUE))
    write(path, options, rows([1], v=7.0), model)
    then_rollback_and_compaction(path, options, model, dead)


def test_with_a_metadata_table_the_dead_writes_log_is_not_listed_and_a_log_is_written_beside_it(tmp_path):
    """The metadata table lists committed files only: the next write does not see the dead write's
    log, appends a log of the same version with its own write token beside it (as Java's writers do),
    and the rollback deletes the dead one only."""
    path, model = str(tmp_path / "t"), Model()
    options = {**BASE, "hoodie.datasource.write.precombine.field": "ts", "hoodie.metadata.enable": "true"}
    write(path, options, rows([0, 1, 2, 3]), model)
    set_payload_class(path, "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload")
    dead = dead_write(path, options, rows([2, 3], v=DEAD_VALUE))
    storage = Storage(path)
    (dead_log,) = [p for p in storage.walk_files("p0") if ".log." in p]
    write(path, options, rows([1], v=7.0), model)
    logs = sorted(p for p in storage.walk_files("p0") if ".log." in p)
    assert len(logs) == 2 and {p.rsplit("_", 1)[0] for p in logs} == {dead_log.rsplit("_", 1)[0]}
    check(path, model, dead)
    roll_back_dead_write(path, options)
    assert sorted(p for p in storage.walk_files("p0") if ".log." in p) == [p for p in logs if p != dead_log]
    check(path, model, dead)


def test_event_time_move_is_not_compared_with_the_dead_writes_value(tmp_path):
    """GLOBAL_BLOOM with update.partition.path and DefaultHoodieRecordPayload: a record moving to
    another partition must beat the stored record, the committed one (ts 0), not the dead write's
    (ts 100): the move happens."""
    path, model = str(tmp_path / "t"), Model()
    options = {**BASE, "hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true",
               "hoodie.datasource.write.precombine.field": "ts"}  # fmt: skip
    write(path, options, rows([0, 1, 2, 3]), model)
    dead = dead_write(path, options, rows([2], v=DEAD_VALUE, ts=100))
    write(path, options, rows([2], v=20.0, ts=50, p="p1"), model)
    then_rollback_and_compaction(path, options, model, dead)
