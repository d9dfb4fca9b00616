"""Upsert/delete sequences against a plain Python model of the table.

Each commit is written by several simulated tasks that receive a random partitioning of the
batch (the keys of one file group spread over every task), with duplicate keys inside a batch.
After every commit, hudi-rs and our reader must both equal the model.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import assert_table_matches

SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                    ("_hoodie_is_deleted", pa.bool_())])  # fmt: skip


def write_commit(path, options, rows, n_tasks, rng, operation="upsert", schema=SCHEMA):
    cfg = WriteConfig.from_options(
        {**options, "hoodie.datasource.write.operation": operation}, path=str(path)
    )
    ctx = coordinator.begin(cfg, schema)
    shards = [[] for _ in range(n_tasks)]
    for r in rows:
        shards[rng.randrange(n_tasks)].append(r)
    results = []
    for pid, shard in enumerate(shards):
        batches = [
            pa.RecordBatch.from_pylist(shard[i : i + 7], schema=schema) for i in range(0, len(shard), 7)
        ]
        results.append(write_path.write_task(ctx, TaskIdentity(pid, 5, 100 + pid), batches))
    return write_path.complete(ctx, results), shards


def apply_model(model, shards, precombine, operation="upsert"):
    # arrival order = (task, position): the reduce rule uses it for ties inside a batch
    latest: dict[str, tuple] = {}
    for pid, shard in enumerate(shards):
        for pos, r in enumerate(shard):
            k = r["id"]
            rank = ((r["ts"] if precombine else 0), pid, pos)
            if k not in latest or rank >= latest[k][0]:
                latest[k] = (rank, r)
    for k, (_, r) in latest.items():
        if operation == "delete":
            model.pop(k, None)
            continue
        stored = model.get(k)
        if precombine and stored is not None and stored["ts"] > r["ts"]:
            continue
        if r["_hoodie_is_deleted"]:
            model.pop(k, None)
        else:
            model[k] = dict(r)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("index", ["bloom", "global_bloom", "bucket"])
def test_upserts_and_deletes_match_the_model(tmp_path, seed, index):
    rng = random.Random(seed)
    path = tmp_path / "t"
    options = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.parquet.max.file.size": str(600 * 1024),
        "hoodie.parquet.small.file.limit": str(550 * 1024),
        "hoodie.index.type": index,
        "hoodie.bucket.index.num.buckets": "3",
        "hoodie.write.buffer.bucket.max.bytes": str(rng.choice([2000, 10**8])),  # many flushes, or one
    }
    model: dict[str, dict] = {}
    ts = 0
    for step in range(6):
        rows = []
        keys = list(model)
        for _ in range(rng.randrange(50, 400)):
            n = int(rng.choice(keys)[1:]) if keys and rng.random() < 0.5 else rng.randrange(2000)
            k, p = f"k{n:05d}", "abc"[n % 3]  # a key keeps its partition
            ts += 1
            # unique ordering values (ties are covered in test_merge.py), below or above the stored one
            order_value = (ts - rng.randrange(0, 3) * 400) * 1000 + ts % 1000
            rows.append({"id": k, "p": p, "ts": order_value, "v": rng.randrange(10**6),
                         "_hoodie_is_deleted": rng.random() < 0.1})  # fmt: skip
        operation = "delete" if step == 4 else "upsert"
        md, shards = write_commit(path, options, rows, rng.randrange(1, 5), rng, operation)
        apply_model(model, shards, "ts", operation)
        assert_table_matches(path, list(model.values()))
        totals = md.totals()
        assert totals["numWrites"] >= 0


def test_commit_counts_and_prev_commit(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "t"
    options = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
    }
    first = [{"id": f"k{i}", "p": "a", "ts": 1, "v": i, "_hoodie_is_deleted": False} for i in range(100)]
    md1, _ = write_commit(path, options, first, 1, rng)
    assert md1.totals()["numInserts"] == 100
    second = [{"id": f"k{i}", "p": "a", "ts": 2, "v": -i, "_hoodie_is_deleted": False} for i in range(10)]
    second += [{"id": f"n{i}", "p": "a", "ts": 2, "v": i, "_hoodie_is_deleted": False} for i in range(5)]
    md2, _ = write_commit(path, options, second, 3, rng)
    t = md2.totals()
    assert (t["numUpdateWrites"], t["numInserts"]) == (10, 5)
    first_instant = md1.write_stats[0].path.rsplit("_", 1)[1].split(".")[0]
    assert {s.prev_commit for s in md2.write_stats if s.num_update_writes} == {first_instant}
    dels = [{"id": k, "p": "a", "ts": 3, "v": 0, "_hoodie_is_deleted": False} for k in ("k1", "k2", "zz")]
    md3, _ = write_commit(path, options, dels, 2, rng, operation="delete")
    assert md3.totals()["numDeletes"] == 2
    import json

    assert json.loads(md3.extra_metadata["hoodie.sink.write.stats"])["deletesOfMissingKeys"] == 1


@pytest.mark.parametrize("move", [False, True])
def test_global_index_partition_change(tmp_path, move):
    rng = random.Random(3)
    path = tmp_path / "t"
    options = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.index.type": "global_bloom",
        "hoodie.bloom.index.update.partition.path": str(move).lower(),
    }
    rows = [{"id": f"k{i}", "p": "a", "ts": 1, "v": i, "_hoodie_is_deleted": False} for i in range(20)]
    write_commit(path, options, rows, 2, rng)
    change = [{"id": "k1", "p": "b", "ts": 2, "v": 100, "_hoodie_is_deleted": False}]
    write_commit(path, options, change, 1, rng)
    theirs = assert_table_matches(
        path, [r for r in rows if r["id"] != "k1"] + [{**change[0], "p": "b"}] if move else
        [r for r in rows if r["id"] != "k1"] + [change[0]],
    )  # fmt: skip
    k1 = [r for r in theirs.to_pylist() if r["id"] == "k1"]
    assert len(k1) == 1
    # moved: the record lives in the new partition; not moved: it stays where its key lives
    assert k1[0]["_hoodie_partition_path"] == ("b" if move else "a")


def test_bucket_index_file_ids_carry_the_bucket(tmp_path):
    rng = random.Random(4)
    path = tmp_path / "t"
    options = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
               "hoodie.index.type": "bucket", "hoodie.bucket.index.num.buckets": "4"}  # fmt: skip
    rows = [{"id": f"k{i}", "p": "a", "ts": 1, "v": i, "_hoodie_is_deleted": False} for i in range(200)]
    write_commit(path, options, rows, 3, rng)
    from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids

    theirs = assert_table_matches(path, rows)
    want = record_key_bucket_ids(theirs.column("_hoodie_record_key"), ["id"], 4)
    got = [bucket_of_file_id(n.split("_")[0]) for n in theirs.column("_hoodie_file_name").to_pylist()]
    assert list(want) == got
    assert len({n.split("_")[0] for n in theirs.column("_hoodie_file_name").to_pylist()}) <= 4
