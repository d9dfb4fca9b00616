"""A merge per micro-batch, exactly once (TableMerger.with_checkpoint, one process): the commit
carries the checkpoint map, a batch the table holds (same id or lower) writes nothing, other
identifiers' entries are carried forward, also when they commit between our read and our commit,
and a merge that changes nothing records nothing.  docs/design/table-dml.md#exactly-once-from-a-stream."""

from __future__ import annotations

import json

import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.dml.table_merger import TableMerger
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.streaming import CHECKPOINT_KEY, committed_checkpoints
from tests.support.tables import assert_table_matches
from tests.unit.dml.test_dml_rules import ROWS, source, table


def instants(t: Table) -> list[str]:
    return [i.timestamp for i in ActiveTimeline.load(Storage(t.path)).completed()]


def checkpoints(t: Table) -> dict[str, str]:
    return committed_checkpoints(Storage(t.path))


def upsert(t: Table, rows: list[dict]) -> TableMerger:
    return (
        t.merge(source(rows), "t.id = s.id", "s", "t").when_matched_update_all().when_not_matched_insert_all()
    )


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_merged_batch_is_recorded_and_not_applied_again(tmp_path, table_type):
    t = table(tmp_path, table_type)
    batch = [{**ROWS[0], "v": 11, "ts": 6}, {"id": 4, "p": "b", "v": 40, "ts": 6, "d": None}]
    got = upsert(t, batch).with_checkpoint("q1", 3).execute()
    assert got["batch_skipped"] == 0
    assert (got["num_target_rows_updated"], got["num_target_rows_inserted"]) == (1, 1)
    assert checkpoints(t) == {"q1": "3"}
    last = ActiveTimeline.load(Storage(t.path))
    assert json.loads(last.commit_metadata(last.completed()[-1]).extra_metadata[CHECKPOINT_KEY]) == {
        "q1": "3"
    }
    after = instants(t)
    expected = [batch[0], *ROWS[1:], batch[1]]

    # the same batch again (Spark's replay after a crash), and an older one: nothing written
    for batch_id in (3, 2, 0):
        again = upsert(t, [{**ROWS[0], "v": 99, "ts": 9}]).with_checkpoint("q1", batch_id).execute()
        assert again == {"num_source_rows": 0, "num_target_rows_updated": 0, "num_target_rows_inserted": 0,
                         "num_target_rows_deleted": 0, "batch_skipped": 1}  # fmt: skip
        assert instants(t) == after
    assert_table_matches(t.path, expected)

    # the next batch is applied
    upsert(t, [{**ROWS[1], "v": 21, "ts": 6}]).with_checkpoint("q1", 4).execute()
    assert checkpoints(t) == {"q1": "4"}
    assert len(instants(t)) == len(after) + 1
    assert_table_matches(t.path, [batch[0], {**ROWS[1], "v": 21, "ts": 6}, ROWS[2], batch[1]])


def test_other_identifiers_are_carried_forward(tmp_path):
    t = table(tmp_path)
    upsert(t, [{**ROWS[0], "v": 11, "ts": 6}]).with_checkpoint("q1", 7).execute()
    upsert(t, [{**ROWS[1], "v": 21, "ts": 6}]).with_checkpoint("q2", 0).execute()
    assert checkpoints(t) == {"q1": "7", "q2": "0"}
    # each identifier is checked on its own: q2's batch 7 is new, q1's batch 7 is not
    assert upsert(t, [{**ROWS[2], "v": 31, "ts": 6}]).with_checkpoint("q2", 7).execute()["batch_skipped"] == 0
    assert upsert(t, [{**ROWS[2], "v": 32, "ts": 7}]).with_checkpoint("q1", 7).execute()["batch_skipped"] == 1
    assert checkpoints(t) == {"q1": "7", "q2": "7"}
    # a plain write in between carries no map: the newest map on the timeline still counts
    hoodie_sink.write(source([{**ROWS[0], "v": 12, "ts": 8}]), t.path, t.options)
    assert upsert(t, [{**ROWS[0], "v": 13, "ts": 9}]).with_checkpoint("q1", 7).execute()["batch_skipped"] == 1
    assert checkpoints(t) == {"q1": "7", "q2": "7"}


def test_the_map_is_read_at_the_commit_not_at_the_read(tmp_path):
    """Another stream commits its batch after our merge read the table: our commit must carry its
    entry, or that stream's batch would look uncommitted and a replay would apply it twice."""
    t = table(tmp_path)

    def another_stream_first(cfg, data, read_on, extra=None):
        upsert(t, [{**ROWS[2], "v": 31, "ts": 6}]).with_checkpoint("other", 5).execute()  # other file group
        return write_read_changes(cfg, data, read_on, extra)

    merger = upsert(t, [{**ROWS[0], "v": 11, "ts": 6}]).with_checkpoint("mine", 1)
    merger.writer = another_stream_first
    assert merger.execute()["batch_skipped"] == 0
    assert checkpoints(t) == {"mine": "1", "other": "5"}


def test_a_batch_committed_between_the_read_and_the_commit_is_dropped(tmp_path):
    """Two runs of one batch at once (a misconfigured restart): the second to commit writes nothing."""
    t = table(tmp_path)

    def same_batch_first(cfg, data, read_on, extra=None):
        upsert(t, [{**ROWS[0], "v": 11, "ts": 6}]).with_checkpoint("q", 1).execute()
        return write_read_changes(cfg, data, read_on, extra)

    merger = upsert(t, [{**ROWS[1], "v": 99, "ts": 9}]).with_checkpoint("q", 1)
    merger.writer = same_batch_first
    assert merger.execute()["batch_skipped"] == 1
    assert_table_matches(t.path, [{**ROWS[0], "v": 11, "ts": 6}, *ROWS[1:]])
    assert not ActiveTimeline.load(Storage(t.path)).pending()  # the dropped instant was rolled back


def test_a_merge_that_changes_nothing_records_nothing(tmp_path):
    """No commit for a no-op merge, so no checkpoint: a replay runs the merge again, and as the
    first run changed nothing, nothing is applied twice."""
    t = table(tmp_path)
    upsert(t, [{**ROWS[0], "v": 11, "ts": 6}]).with_checkpoint("q", 1).execute()
    before = instants(t)
    noop = t.merge(source([{"id": 9, "p": "a", "v": 0, "ts": 1, "d": None}]), "t.id = s.id", "s", "t")
    got = noop.when_matched_delete().with_checkpoint("q", 2).execute()
    assert got["batch_skipped"] == 0 and got["num_target_rows_deleted"] == 0
    assert instants(t) == before
    assert checkpoints(t) == {"q": "1"}


def test_a_checkpoint_is_checked(tmp_path):
    t = table(tmp_path)
    with pytest.raises(HoodieConfigError, match="batch id must be an integer >= 0"):
        upsert(t, ROWS[:1]).with_checkpoint("q", -1)
    with pytest.raises(HoodieConfigError, match="identifier must be a non-empty string"):
        upsert(t, ROWS[:1]).with_checkpoint("", 1)
