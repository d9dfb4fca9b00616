"""A task attempt that outlives its instant leaves nothing behind (the CI race of stop 6).

Spark calls abort while cancelled attempts still run.  An attempt can pass its liveness check
just before the abort deletes the inflight file and write just after the abort swept: the
write-then-verify rule of InstantGuard.wrote must then remove what it wrote.  The check
before each write is disabled here to force that interleaving deterministically.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from hoodie_sink.table.write.instant_guard import InstantGuard
from tests.support.tables import assert_metadata_table_sound, without_rollback_records
from tests.unit.write.test_upsert_model import SCHEMA, write_commit

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def _rows(start, n):
    return [
        {"id": f"k{i}", "p": f"p{i % 3}", "ts": 1, "v": i, "_hoodie_is_deleted": False}
        for i in range(start, start + n)
    ]


def _tree(path):
    """The table's files, but for what the abort's rollback leaves (tables.without_rollback_records)."""
    return sorted(without_rollback_records({str(p.relative_to(path)): None for p in path.rglob("*")}))


@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_straggler_after_abort_leaves_table_as_before(tmp_path, monkeypatch, operation):
    path = tmp_path / "t"
    write_commit(path, OPTS, _rows(0, 60), 2, random.Random(1))
    before = _tree(path)

    cfg = WriteConfig.from_options({**OPTS, "hoodie.datasource.write.operation": operation}, path=str(path))
    ctx = coordinator.begin(cfg, SCHEMA)

    def batches():
        # updates (claims, merges, staged changes) and inserts (new files, key logs)
        yield pa.RecordBatch.from_pylist(_rows(30, 60), schema=SCHEMA)
        coordinator.abort(ctx, settle_seconds=0.0)

    monkeypatch.setattr(InstantGuard, "check", _check_only_after_write)
    with pytest.raises(HoodieCommitError, match="no longer in flight"):
        write_path.write_task(ctx, TaskIdentity(0, 1, 100), batches())
    assert _tree(path) == before
    assert_metadata_table_sound(path)


def _check_only_after_write(self):
    """InstantGuard.check with the checks before writes disabled: only wrote() still raises."""
    import inspect

    if inspect.stack()[1].function == "wrote" and not self.alive():
        raise HoodieCommitError(f"Instant {self.instant} is no longer in flight")


def test_create_if_absent_publishes_content_atomically(tmp_path):
    """A claim with content (a clustering plan, say) is never visible empty: a writer reading a
    plan being written would take it for another kind of instant and roll it back."""
    from hoodie_sink.table.storage import Storage

    storage = Storage(str(tmp_path))
    assert storage.create_if_absent(".hoodie/x.requested", b"plan")
    assert not storage.create_if_absent(".hoodie/x.requested", b"other")
    assert storage.read_bytes(".hoodie/x.requested") == b"plan"
    assert storage.create_if_absent(".hoodie/y.marker")
    assert sorted(p.name for p in (tmp_path / ".hoodie").iterdir()) == [
        "x.requested",
        "y.marker",
    ]  # no temp left
