"""Keyed writes (upsert, delete) of every index type against Hudi's semantics (tests/support/keyed_model.py),
through the engine API with simulated tasks (issue 8, items 1 and 2).

Each commit's batch is split over 1-4 simulated tasks at random (the records of one key, or of one file
group, in several tasks), in small Arrow batches, with a small tagging size and bucket buffer in some
seeds (several tag batches and flushes per task).  After every commit hudi-rs and our reader must both
equal the model, and under a global index no key may be in two partitions.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write import coordinator, upsert_task, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.keyed_model import (
    SCHEMA,
    VARIANTS,
    BatchGenerator,
    KeyedModel,
    assert_locations,
    next_batch,
    options_for,
)
from tests.support.tables import assert_table_matches, partition_of_keys


def write_shards(path, options, shards, operation="upsert"):
    """One commit written by len(shards) tasks, task i receiving shards[i] in batches of 7 rows."""
    options = {**options, "hoodie.datasource.write.operation": operation}
    cfg = WriteConfig.from_options(options, path=str(path))
    ctx = coordinator.begin(cfg, SCHEMA)
    results = []
    for pid, shard in enumerate(shards):
        batches = [pa.RecordBatch.from_pylist(shard[i : i + 7], schema=SCHEMA)
                   for i in range(0, len(shard), 7)]  # fmt: skip
        task = TaskIdentity(pid, 5, 100 + pid, only_task=len(shards) == 1)
        results.append(write_path.write_task(ctx, task, batches))
    return write_path.complete(ctx, results)


def shard(rows, n_tasks, rng):
    shards = [[] for _ in range(n_tasks)]
    for r in rows:
        shards[rng.randrange(n_tasks)].append(r)
    return shards


def arrival_order(shards):
    return [r for s in shards for r in s]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_keyed_writes_match_hudi_semantics(tmp_path, monkeypatch, index, move, seed):
    check_against_model(tmp_path, monkeypatch, index, move, seed)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "index,move", [("bloom", False), ("global_bloom", True)], ids=["bloom", "global_bloom-move"]
)
def test_commit_time_ordering_matches_hudi_semantics(tmp_path, monkeypatch, index, move, seed):
    """OverwriteWithLatestAvroPayload: late records replace the stored one (and move it)."""
    check_against_model(tmp_path, monkeypatch, index, move, seed, commit_time=True)


def check_against_model(tmp_path, monkeypatch, index, move, seed, commit_time=False, extra=None, rounds=4):
    rng = random.Random(1000 + seed)
    gen = BatchGenerator(seed)
    model = KeyedModel(index, move, commit_time)
    path = tmp_path / "t"
    options = {**options_for(index, move, commit_time), **(extra or {})}
    options["hoodie.write.buffer.bucket.max.bytes"] = str(rng.choice([1500, 10**8]))  # many flushes, or one
    # several tag batches per task, or one
    monkeypatch.setattr(upsert_task, "TAG_ROWS", rng.choice([20, upsert_task.TAG_ROWS]))
    # inserts; updates, moves, late records, soft deletes; the delete operation; again
    for step in range(rounds):
        operation = "delete" if step % 4 == 2 else "upsert"
        rows = next_batch(gen, model, rng, operation, 40, (60, 200))
        shards = shard(rows, rng.randrange(1, 5), rng)
        write_shards(path, options, shards, operation)
        model.apply(arrival_order(shards), operation)
        theirs = assert_table_matches(path, model.expected())
        assert_locations(theirs, model)


def _row(k, p, ts, deleted=False):
    return {"id": k, "p": p, "ts": ts, "v": ts, "_hoodie_is_deleted": deleted}


@pytest.mark.parametrize("tasks", [1, 3])
def test_global_index_moves_only_the_winner(tmp_path, tasks):
    """Item 1: GLOBAL_BLOOM with update.partition.path: a late record does not move its key, an
    in-batch duplicate in the stored partition with a higher ordering value keeps the key there,
    two moves to different partitions leave the key in the winner's partition only, and a soft
    delete in another task removes a moved key everywhere."""
    path = tmp_path / "t"
    options = options_for("global_bloom", True)
    stored = [_row("late", "a", 50), _row("stay", "a", 10), _row("twice", "a", 10), _row("gone", "a", 10),
              _row("moves", "a", 10)]  # fmt: skip
    write_shards(path, options, [stored])
    batch = [
        [_row("late", "b", 40), _row("stay", "b", 20), _row("twice", "b", 20), _row("gone", "b", 20),
         _row("moves", "c", 20)],
        [_row("stay", "a", 30), _row("twice", "c", 30), _row("gone", "a", 30, deleted=True)],
        [_row("moves", "d", 15)],
    ]  # fmt: skip
    shards = batch if tasks == 3 else [[r for s in batch for r in s]]
    write_shards(path, options, shards)
    theirs = assert_table_matches(path, [_row("late", "a", 50), _row("stay", "a", 30), _row("twice", "c", 30),
                                         _row("moves", "c", 20)])  # fmt: skip
    assert partition_of_keys(theirs) == {"late": "a", "stay": "a", "twice": "c", "moves": "c"}


@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_partition_scoped_index_combines_per_key_and_partition(tmp_path, index):
    """Item 2: a CDC batch deleting k in d4 and then inserting k in d0 (a BLOOM / BUCKET table keys
    records by (key, partition)): both changes apply, k ends in d0 only."""
    path = tmp_path / "t"
    options = options_for(index, False)
    write_shards(path, options, [[_row("k", "d4", 1), _row("j", "d4", 1)]])
    cdc = [_row("k", "d4", 2, deleted=True), _row("k", "d0", 3),
           _row("j", "d0", 2), _row("j", "d4", 3, deleted=True)]  # fmt: skip
    write_shards(path, options, [cdc])
    theirs = assert_table_matches(path, [_row("k", "d0", 3), _row("j", "d0", 2)])
    assert sorted(theirs.column("_hoodie_partition_path").to_pylist()) == ["d0", "d0"]
