"""UPDATE and DELETE as one Spark job (`Table.update(..., spark=)`, `Table.delete(..., spark=)`;
datasource/dml_conditions.py): a task per file slice the condition does not rule out, one instant.
Random sequences against a MODEL of the rows (plain Python, tests/unit/dml/test_condition_tasks.py)
and against the same calls in one process on a copy; both tables read by hudi-rs and our reader.
A task that fails leaves no commit and the table as it was; nothing matched, no commit."""

from __future__ import annotations

import random

import pytest

import hoodie_sink
from hoodie_sink.datasource import dml_conditions
from hoodie_sink.errors import HoodieKeyError
from hoodie_sink.table.dml.merge_plan import DELETE
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches, data_rows
from tests.unit.dml.test_condition_tasks import call, model_count, random_call, start_table
from tests.unit.dml.test_merge_model import options


def writes(path: str) -> list[str]:
    return [i.timestamp for i in ActiveTimeline.load(Storage(path)).completed(("commit", "deltacommit"))]


def every_instant(path: str) -> list[tuple[str, str, str]]:
    return sorted((i.timestamp, i.action, i.state) for i in ActiveTimeline.load(Storage(path)).instants)


@pytest.mark.parametrize(
    "table_type,index,seed",
    [("COPY_ON_WRITE", "BLOOM", 1), ("MERGE_ON_READ", "BLOOM", 2), ("MERGE_ON_READ", "GLOBAL_BLOOM", 3),
     ("COPY_ON_WRITE", "GLOBAL_BLOOM", 6)],
)  # fmt: skip
def test_updates_and_deletes_in_spark_tasks_equal_the_model_and_the_one_process_call(
    spark, tmp_path, table_type, index, seed
):
    rng = random.Random(seed)
    opts = options(table_type, index)
    model = start_table(tmp_path / "spark", opts, random.Random(seed))
    start_table(tmp_path / "one", opts, random.Random(seed))
    ours, one = (
        hoodie_sink.Table(str(tmp_path / "spark"), opts),
        hoodie_sink.Table(str(tmp_path / "one"), opts),
    )
    for _ in range(5):
        action, cond, sets, step = random_call(rng, index == "GLOBAL_BLOOM")
        want = {
            ("num_deleted_rows" if action == DELETE else "num_updated_rows"): model_count(model, action, cond)
        }
        before, before_one = writes(ours.path), writes(one.path)
        assert call(ours, action, cond, sets, spark=spark) == want, (action, cond, sets)
        assert call(one, action, cond, sets) == want
        # one instant, and the same services after it (a merge-on-read table's inline compaction)
        made = len(writes(ours.path)) - len(before)
        assert made == len(writes(one.path)) - len(before_one)
        assert (made >= 1) == (next(iter(want.values())) > 0)
        model = step(model)
        assert_table_matches(ours.path, model)
        assert data_rows(hoodie_sink.read(ours.path)) == data_rows(hoodie_sink.read(one.path))
    # one record per key (a moved record is not left behind), no file the timeline does not name
    assert ours.validate(global_keys=index == "GLOBAL_BLOOM") == []


def test_a_failed_task_leaves_no_commit_and_the_table_as_it_was(spark, tmp_path, monkeypatch):
    opts = options("MERGE_ON_READ", "BLOOM")
    path = str(tmp_path / "t")
    model = start_table(path, opts, random.Random(7))
    table = hoodie_sink.Table(path, opts)
    before = writes(path)
    real = dml_conditions.changes_of

    def fails_in_partition_b(plan, share):
        from pyspark import TaskContext

        changes = real(plan, share)
        if TaskContext.get() is not None and any(ref.startswith("b/") or "/b/" in ref for ref in share):
            raise RuntimeError("injected task failure")
        return changes

    # the job's task function is pickled with the module's `changes_of` as it is now
    monkeypatch.setattr(dml_conditions, "changes_of", fails_in_partition_b)
    with pytest.raises(Exception, match="injected task failure"):
        table.update({"v": "v + 1", "ts": "ts + 1"}, spark=spark)
    monkeypatch.undo()
    assert writes(path) == before
    assert_table_matches(path, model)
    # the instant was begun, then rolled back with what the other tasks had written
    assert len({ts for ts, action, _ in every_instant(path) if action == "rollback"}) == 1
    assert table.validate() == []

    # an expression that fails on the rows of one partition only: the other tasks wrote, in vain
    with pytest.raises(Exception, match="(?i)invalid|cast|parse"):
        table.update({"v": "CASE WHEN p = 'c' THEN CAST(s AS BIGINT) ELSE v + 1 END"}, spark=spark)
    assert writes(path) == before
    assert_table_matches(path, model)

    # a refusal decided in a task reaches the caller as the one-process call raises it
    with pytest.raises(HoodieKeyError, match="ordering field"):
        table.update({"ts": "ts - 1"}, "id = 3", spark=spark)
    assert writes(path) == before

    # the table still takes a DML
    assert table.delete("id < 5", spark=spark) == {"num_deleted_rows": 5}
    assert_table_matches(path, [r for r in model if r["id"] >= 5])
    assert table.validate() == []


def test_nothing_matched_commits_nothing(spark, tmp_path):
    opts = options("COPY_ON_WRITE", "BLOOM")
    path = str(tmp_path / "t")
    model = start_table(path, opts, random.Random(8))
    table = hoodie_sink.Table(path, opts)
    instants = every_instant(path)
    # every slice ruled out by its statistics: no job, no instant of any kind
    assert table.delete("id >= 1000", spark=spark) == {"num_deleted_rows": 0}
    assert table.update({"v": "0"}, "id > 500", spark=spark) == {"num_updated_rows": 0}
    assert every_instant(path) == instants
    # every slice read, no row true: the instant begun is rolled back, nothing committed
    before = writes(path)
    assert table.update({"v": "0"}, "v + 0 = -1", spark=spark) == {"num_updated_rows": 0}
    assert writes(path) == before
    assert_table_matches(path, model)
