"""Issue 8 item 9: a commit whose outcome is unknown is never undone (engine API).

A storage that fails after (or before) writing the completed commit file: the publish is read
back; landed -> the write returns; absent -> HoodieCommitError and the write is undone; cannot
tell -> HoodieCommitStateUnknown and every file stays.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieCommitError, HoodieCommitStateUnknown
from hoodie_sink.table.format.metadata_table import is_metadata_storage
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import assert_table_matches

pytestmark = pytest.mark.s3  # also on S3, where the publication is a conditional PUT

OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id"}


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "v": pa.array([float(i) for i in range(start, start + n)])})  # fmt: skip


DATA_TABLE, METADATA_TABLE = "data", "metadata"


def is_completed_commit(storage: Storage, rel: str, table: str = DATA_TABLE) -> bool:
    """A completed write instant on `table`'s timeline (not the `.rollback` an abort publishes);
    the metadata table is a table of its own, with its own Storage at `<table>/.hoodie/metadata`."""
    inst = Instant.parse(rel.rsplit("/", 1)[-1])
    is_metadata = is_metadata_storage(storage)
    return (
        is_metadata == (table == METADATA_TABLE)
        and rel.startswith(".hoodie/")
        and inst is not None
        and inst.is_completed
        and inst.action in WRITE_ACTIONS
    )


def fail_publish(
    monkeypatch, after_write: bool, check_fails: bool, table: str = DATA_TABLE, once: bool = False
) -> list[str]:
    """Storage that raises when publishing a completed commit of `table` (after writing it, or
    instead; only the first such publish if `once`), and optionally cannot read it back either.
    Returns the paths it failed on."""
    real_write, real_create, real_read = Storage.write_atomic, Storage.create_if_absent, Storage.read_bytes
    failed: list[str] = []

    def publisher(real):  # local disk publishes by rename, S3 by a conditional PUT
        def publish(self, rel, data=b""):
            if not is_completed_commit(self, rel, table) or (once and failed):
                return real(self, rel, data)
            failed.append(rel)
            if after_write:
                real(self, rel, data)
            raise OSError(f"injected: connection reset while publishing {rel}")

        return publish

    def read_bytes(self, rel):
        if check_fails and rel in failed:
            raise OSError(f"injected: storage unavailable reading {rel}")
        return real_read(self, rel)

    monkeypatch.setattr(Storage, "write_atomic", publisher(real_write))
    monkeypatch.setattr(Storage, "create_if_absent", publisher(real_create))
    monkeypatch.setattr(Storage, "read_bytes", read_bytes)
    return failed


def data_files(path: Path) -> list[str]:
    return sorted(str(p) for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


def test_publish_that_raises_after_landing_is_a_commit(tmp_path, monkeypatch):
    path = tmp_path / "t"
    hoodie_sink.write(rows(0, 10), str(path), OPTS)
    failed = fail_publish(monkeypatch, after_write=True, check_fails=False)
    md = hoodie_sink.write(rows(10, 10), str(path), OPTS)
    monkeypatch.undo()
    assert failed and md.totals()["numInserts"] == 10
    assert Timeline.load(Storage(str(path))).pending() == []
    assert_table_matches(path, rows(0, 20).to_pylist())


def test_unknown_outcome_raises_state_unknown_and_deletes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "t"
    hoodie_sink.write(rows(0, 10), str(path), OPTS)
    fail_publish(monkeypatch, after_write=True, check_fails=True)
    with pytest.raises(HoodieCommitStateUnknown, match="do not retry blindly"):
        hoodie_sink.write(rows(10, 10), str(path), OPTS)
    monkeypatch.undo()
    # the commit did land: its files are all there, so the table is whole
    assert_table_matches(path, rows(0, 20).to_pylist())
    hoodie_sink.write(rows(20, 5), str(path), OPTS)  # the next writer finds nothing to roll back
    assert_table_matches(path, rows(0, 25).to_pylist())


def test_publish_that_certainly_failed_is_undone(tmp_path, monkeypatch):
    path = tmp_path / "t"
    hoodie_sink.write(rows(0, 10), str(path), OPTS)
    before = data_files(path)
    fail_publish(monkeypatch, after_write=False, check_fails=False)
    with pytest.raises(HoodieCommitError, match="Could not publish"):
        hoodie_sink.write(rows(10, 10), str(path), OPTS)
    monkeypatch.undo()
    assert data_files(path) == before
    assert Timeline.load(Storage(str(path))).pending() == []
    assert_table_matches(path, rows(0, 10).to_pylist())


def test_abort_after_the_commit_landed_deletes_nothing(tmp_path):
    path = tmp_path / "t"
    cfg = WriteConfig.from_options(OPTS, path=str(path))
    ctx = coordinator.begin(cfg, rows(0, 1).schema)
    write_path.complete(
        ctx, [write_path.write_task(ctx, TaskIdentity(only_task=True), rows(0, 10).to_batches())]
    )
    files = sorted(str(p) for p in path.rglob("*"))
    coordinator.abort(ctx, settle_seconds=0)  # e.g. Spark's abort after a commit that raised late
    assert sorted(str(p) for p in path.rglob("*")) == files  # data and timeline files alike
    assert_table_matches(path, rows(0, 10).to_pylist())


@pytest.mark.parametrize("after_write,check_fails", [(False, False), (True, True)], ids=["absent", "unknown"])
def test_a_failed_metadata_deltacommit_fails_the_write_and_is_undone(tmp_path, monkeypatch, after_write,
                                                                     check_fails):  # fmt: skip
    """The metadata table's deltacommit of a write cannot be published, or its outcome is unknown:
    the data commit is certainly not published, so the write fails as a HoodieCommitError and is
    undone, the metadata deltacommit included if it landed."""
    path = tmp_path / "t"
    hoodie_sink.write(rows(0, 10), str(path), {**OPTS, "hoodie.metadata.enable": "true"})
    before = data_files(path)
    # only the write's own deltacommit fails: the rollback's, in the abort, publishes
    failed = fail_publish(monkeypatch, after_write, check_fails, table=METADATA_TABLE, once=True)
    with pytest.raises(HoodieCommitError, match="metadata table's deltacommit"):
        hoodie_sink.write(rows(10, 10), str(path), OPTS)
    monkeypatch.undo()
    assert failed and data_files(path) == before
    assert Timeline.load(Storage(str(path))).pending() == []
    assert_table_matches(path, rows(0, 10).to_pylist())  # the metadata table's listing included
    hoodie_sink.write(rows(20, 5), str(path), OPTS)
    assert_table_matches(path, [*rows(0, 10).to_pylist(), *rows(20, 5).to_pylist()])


def test_a_metadata_deltacommit_that_raised_after_landing_is_part_of_the_commit(tmp_path, monkeypatch):
    path = tmp_path / "t"
    hoodie_sink.write(rows(0, 10), str(path), {**OPTS, "hoodie.metadata.enable": "true"})
    failed = fail_publish(monkeypatch, after_write=True, check_fails=False, table=METADATA_TABLE, once=True)
    hoodie_sink.write(rows(10, 10), str(path), OPTS)
    monkeypatch.undo()
    assert failed
    assert_table_matches(path, rows(0, 20).to_pylist())
