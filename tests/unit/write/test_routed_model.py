"""Routed writes (issue 27: hoodie_sink.spark.route's steps, without Spark, tests/support/routing.py)
against the model of Hudi's keyed semantics (tests/support/keyed_model.py): every index type,
copy-on-write and merge-on-read, ordering and commit-time payloads, random tag and write task
counts, tag chunks of a few rows (a key's records then meet the chunk boundary) or one chunk.
After every commit hudi-rs and our reader must both equal the model."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
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


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("operation", ["append", "bulk_insert"])
@pytest.mark.parametrize(
    "index,move", [("bloom", False), ("global_bloom", True)], ids=["bloom", "global_bloom-move"]
)
def test_routed_append_and_bulk_insert_of_new_keys_match_the_model(tmp_path, monkeypatch, operation, table_type,
                                                                  index, move, seed):  # fmt: skip
    """Routed upserts and deletes, and between them routed appends or bulk_inserts of new keys
    (which the later upserts update): the table equals the model after every commit, and each
    append or bulk_insert adds only file groups it planned (bulk_insert's rows sorted by key)."""
    rng = random.Random(4000 + seed)
    gen = BatchGenerator(70 + seed)
    model = KeyedModel(index, move, False)
    path = str(tmp_path / "t")
    options = {**options_for(index, move), "hoodie.datasource.write.table.type": table_type}
    monkeypatch.setattr(route_tag, "TAG_ROWS", rng.choice([5, route_tag.TAG_ROWS]))
    for step in range(6):
        op = ("upsert", operation, "upsert", "delete", operation, "upsert")[step]
        if op == operation:
            rows = [{"id": f"n{step}-{i:04d}", "p": rng.choice("abcd"), "ts": rng.randrange(1, 50), "v": i,
                     "_hoodie_is_deleted": False} for i in rng.sample(range(5000), rng.randrange(1, 300))]  # fmt: skip
        else:
            rows = next_batch(gen, model, rng, op, 40, (60, 200))
        md = routed_write(pa.Table.from_pylist(rows, schema=SCHEMA), path,
                          {**options, "hoodie.datasource.write.operation": op},
                          tag_tasks=rng.randrange(1, 5), write_tasks=rng.randrange(1, 5))  # fmt: skip
        model.apply(rows, "upsert" if op == operation else op)
        assert_locations(assert_table_matches(path, model.expected()), model)
        if op == operation:
            assert all(s.prev_commit == "null" for s in md.write_stats)
            for s in md.write_stats:
                keys = pq.read_table(f"{path}/{s.path}", columns=["_hoodie_record_key"]).column(0).to_pylist()
                assert len(keys) == s.num_writes
                if op == "bulk_insert":
                    assert keys == sorted(keys)


@pytest.mark.parametrize("operation", ["append", "bulk_insert"])
def test_routed_new_file_groups_are_sized_whatever_the_task_count(tmp_path, operation):
    """10k new records over 1 or 8 tag and write tasks: the same 5 file groups of about 2,000 records
    (unrouted, each task opens its own file group in every partition it sees)."""
    options = {**options_for("bloom", False), "hoodie.parquet.max.file.size": str(2_000 * 100),
               "hoodie.copyonwrite.record.size.estimate": "100",
               "hoodie.datasource.write.operation": operation}  # fmt: skip
    files = {}
    for tasks in (1, 8):
        md = routed_write(_rows([f"k{i:05d}" for i in range(10_000)]), str(tmp_path / f"t{tasks}"), options,
                          tasks, tasks, batch_rows=999)  # fmt: skip
        files[tasks] = sorted(s.num_writes for s in md.write_stats)
    assert sum(files[1]) == 10_000
    assert len(files[1]) == len(files[8]) == 5 and all(1_800 <= n <= 2_200 for n in files[1] + files[8]), (
        files
    )


def test_a_routed_keyless_append_generates_unique_keys_and_keeps_every_row(tmp_path):
    path = str(tmp_path / "t")
    options = {"hoodie.table.name": "logs", "hoodie.datasource.write.partitionpath.field": "p",
               "hoodie.datasource.write.operation": "append", "hoodie.parquet.max.file.size": str(500 * 100),
               "hoodie.copyonwrite.record.size.estimate": "100"}  # fmt: skip
    rows = pa.table({"p": [f"p{i % 3}" for i in range(3_000)], "v": list(range(3_000))})
    for _ in range(2):
        md = routed_write(rows, path, options, tag_tasks=4, write_tasks=3, batch_rows=97)
        assert sum(s.num_writes for s in md.write_stats) == 3_000
        assert len(md.write_stats) == 6  # 1,000 records per partition, 500 per file group
    got = pq.read_table(path, columns=["_hoodie_record_key", "v"])
    assert got.num_rows == 6_000 and len(set(got.column(0).to_pylist())) == 6_000
    assert sorted(got.column(1).to_pylist()) == sorted(list(range(3_000)) * 2)


def test_routes_made_for_another_operation_are_refused(tmp_path):
    path = str(tmp_path / "t")
    options = options_for("bloom", False)
    routed_write(_rows(["a", "b"]), path, options)
    per_task, schema = route_table(_rows(["c"], ts=2), path, {**options, "hoodie.datasource.write.operation":
                                                               "bulk_insert"}, 1, 1)  # fmt: skip
    with pytest.raises(HoodieConfigError, match="routed for operation 'bulk_insert'"):
        write_routed(per_task, schema, path, options)
    assert_table_matches(path, _rows(["a", "b"]).to_pylist())


@pytest.mark.parametrize("operation", ["insert_overwrite", "insert_overwrite_table"])
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
