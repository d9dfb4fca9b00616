"""Routed writes (issue 27: hoodie_sink.spark.route's steps, without Spark, tests/support/routing.py)
against the model of Hudi's keyed semantics (tests/support/keyed_model.py): every index type,
copy-on-write and merge-on-read, ordering and commit-time payloads, random tag and write task
counts, tag chunks of a few rows (a key's records then meet the chunk boundary) or one chunk.
After every commit hudi-rs and our reader must both equal the model."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie_sink.errors import (
    HoodieCommitError,
    HoodieConfigError,
    HoodieTableError,
    HoodieWriteConflictError,
)
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.routing import tag as route_tag
from tests.support.keyed_model import (
    SCHEMA,
    VARIANTS,
    BatchGenerator,
    KeyedModel,
    assert_locations,
    next_batch,
    options_for,
)
from tests.support.routing import route_table, routed_write, write_routed
from tests.support.tables import assert_table_matches

MOR = {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}


def _run(tmp_path, monkeypatch, index, move, seed, extra=None, commit_time=False, rounds=4):
    rng = random.Random(3000 + seed)
    gen = BatchGenerator(50 + seed)
    model = KeyedModel(index, move, commit_time)
    path = str(tmp_path / "t")
    options = {**options_for(index, move, commit_time), **(extra or {})}
    monkeypatch.setattr(route_tag, "TAG_ROWS", rng.choice([5, 13, route_tag.TAG_ROWS]))
    for step in range(rounds):
        operation = "delete" if step % 4 == 2 else "upsert"
        rows = next_batch(gen, model, rng, operation, 40, (60, 200))
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        routed_write(table, path, {**options, "hoodie.datasource.write.operation": operation},
                     tag_tasks=rng.randrange(1, 5), write_tasks=rng.randrange(1, 5))  # fmt: skip
        model.apply(rows, operation)
        assert_locations(assert_table_matches(path, model.expected()), model)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_routed_cow_matches_the_model(tmp_path, monkeypatch, index, move, seed):
    _run(tmp_path, monkeypatch, index, move, seed)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_routed_mor_matches_the_model(tmp_path, monkeypatch, index, move, seed):
    _run(tmp_path, monkeypatch, index, move, seed, extra=MOR)


@pytest.mark.parametrize("seed", range(3))
def test_routed_commit_time_ordering_matches_the_model(tmp_path, monkeypatch, seed):
    """OverwriteWithLatestAvroPayload (copy-on-write: a new merge-on-read table refuses it)."""
    _run(tmp_path, monkeypatch, "global_bloom", True, seed, commit_time=True)


def _rows(keys, p="a", ts=1):
    return pa.Table.from_pylist([{"id": k, "p": p, "ts": ts, "v": ts, "_hoodie_is_deleted": False}
                                 for k in keys], schema=SCHEMA)  # fmt: skip


def test_inserts_are_packed_into_sized_file_groups_whatever_the_task_count(tmp_path):
    """10k inserts over 1 or 8 tag and write tasks: the same 5 file groups of about 2,000 records (a
    key's group is drawn from its hash, in proportion to the plan's sizes)."""
    options = {**options_for("bloom", False), "hoodie.parquet.max.file.size": str(2_000 * 100),
               "hoodie.copyonwrite.record.size.estimate": "100"}  # fmt: skip
    files = {}
    for tasks in (1, 8):
        path = str(tmp_path / f"t{tasks}")
        md = routed_write(
            _rows([f"k{i:05d}" for i in range(10_000)]), path, options, tasks, tasks, batch_rows=999
        )
        files[tasks] = sorted(s.num_writes for s in md.write_stats)
    assert files[1] == files[8]
    assert len(files[1]) == 5 and all(1_800 <= n <= 2_200 for n in files[1]), files[1]


def test_a_route_of_an_older_snapshot_is_refused_and_nothing_is_written(tmp_path):
    path = str(tmp_path / "t")
    options = options_for("bloom", False)
    routed_write(_rows(["a", "b"]), path, options)
    per_task, schema = route_table(_rows(["a", "c"], ts=2), path, options, 2, 2)
    routed_write(_rows(["d"], ts=3), path, options)  # another write lands after the route
    before = Timeline.load(Storage(path)).completed()
    with pytest.raises(HoodieWriteConflictError, match="routed on the snapshot"):
        write_routed(per_task, schema, path, options)
    assert Timeline.load(Storage(path)).completed() == before
    assert_table_matches(path, [r for r in _rows(["a", "b"]).to_pylist() + _rows(["d"], ts=3).to_pylist()])


def test_a_file_group_in_two_write_tasks_is_refused(tmp_path):
    path = str(tmp_path / "t")
    options = options_for("bloom", False)
    routed_write(_rows(["a", "b", "c", "d"]), path, options)
    per_task, schema = route_table(_rows(["a", "b", "c", "d"], ts=2), path, options, 1, 1, batch_rows=2)
    split = [per_task[0][:1], per_task[0][1:]]  # one file group's records in two tasks
    with pytest.raises(HoodieCommitError, match="written by two tasks"):
        write_routed(split, schema, path, options)
    assert_table_matches(path, _rows(["a", "b", "c", "d"]).to_pylist())


def test_a_reordered_routed_input_is_refused(tmp_path):
    path = str(tmp_path / "t")
    options = options_for("bloom", False)
    routed_write(_rows(["a", "b"]), path, options)
    routed_write(_rows(["c", "d"], p="b"), path, options)
    per_task, schema = route_table(_rows(["a", "c", "b", "d"], ts=2), path, options, 1, 1, batch_rows=1)
    batches = per_task[0]
    assert len(batches) == 4
    with pytest.raises(HoodieTableError, match="two runs"):
        write_routed([[batches[0], batches[2], batches[1], batches[3]]], schema, path, options)


@pytest.mark.parametrize("operation", ["bulk_insert", "insert_overwrite", "append"])
def test_operations_route_does_not_route_are_refused(tmp_path, operation):
    with pytest.raises(HoodieConfigError, match="does not route operation"):
        routed_write(_rows(["a"]), str(tmp_path / "t"),
                     {**options_for("bloom", False), "hoodie.datasource.write.operation": operation})  # fmt: skip


def test_the_micro_batch_id_option_is_refused_where_it_would_do_nothing(tmp_path):
    from hoodie_sink import write
    from hoodie_sink.table.options.write_config import WriteConfig

    options = {**options_for("bloom", False), "hoodie.sink.streaming.batch.id": "3"}
    with pytest.raises(HoodieConfigError, match="hoodie.sink.streaming.batch.id"):
        write(_rows(["a"]), str(tmp_path / "t"), options)
    with pytest.raises(HoodieConfigError, match="hoodie.sink.streaming.batch.id"):
        WriteConfig.from_options(options, path=str(tmp_path / "t"), streaming=True)
